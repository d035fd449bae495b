#!/usr/bin/env bash
# Times one createRunFiles of N names (default 50,000) through W&B's GraphQL on `hone serve`,
# as the wandb SDK asks for a run's files' upload URLs. Issue 33 item 6.
#
#   scripts/hardening-probe/runfiles.sh BIN [DSN] [N]
#
# DSN: a postgres:// URL (a fresh schema is made in it and dropped after), or empty for SQLite.
# Example (the figures in docs/reliability.md):
#   go build -o /tmp/hone-33 ./cmd/hone
#   scripts/hardening-probe/runfiles.sh /tmp/hone-33 "$HONE_TEST_POSTGRES_DSN"
set -euo pipefail
bin=$1 dsn=${2:-} n=${3:-50000}
data=$(mktemp -d)
port=$(( 20000 + RANDOM % 20000 ))
PSQL=$(ls /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -n 1 || true)
args=()
schema=""
if [ -n "$dsn" ]; then
  schema="probe_$RANDOM$RANDOM"
  "$PSQL" "$dsn" -qc "CREATE SCHEMA $schema"
  sep='?'; [[ "$dsn" == *\?* ]] && sep='&'
  args=(--db "${dsn}${sep}search_path=$schema")
fi
"$bin" serve --data "$data" --addr "127.0.0.1:$port" --train-workers 0 --log-level warn "${args[@]}" >"$data/out" 2>"$data/err" &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  [ -n "$schema" ] && PGOPTIONS='--client-min-messages=warning' "$PSQL" "$dsn" -qc "DROP SCHEMA $schema CASCADE" || true
  rm -rf "$data"
}
trap cleanup EXIT
for _ in $(seq 600); do grep -q listening "$data/out" 2>/dev/null && break; sleep 0.2; done
grep -q listening "$data/out" || { cat "$data/err"; exit 1; }
key=$(cat "$data/initial-api-key")
url="http://127.0.0.1:$port"
curl -sS -u "api:$key" -H 'Content-Type: application/json' -o /dev/null \
  -d '{"query":"mutation { upsertBucket(input: {name: \"r\", modelName: \"p\", entityName: \"local\"}) { bucket { id } } }"}' "$url/graphql"
python3 -c 'import json,sys; n=int(sys.argv[1]); print(json.dumps({"query":"mutation F($input: CreateRunFilesInput!) { createRunFiles(input: $input) { files { uploadUrl } } }","variables":{"input":{"entityName":"local","projectName":"p","runName":"r","files":["files/f%05d.txt" % i for i in range(n)]}}}))' "$n" >"$data/q.json"
start=$(date +%s.%N)
curl -sS -u "api:$key" -H 'Content-Type: application/json' -o "$data/a.json" --data-binary @"$data/q.json" "$url/graphql"
end=$(date +%s.%N)
got=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["data"]["createRunFiles"]["files"]))' "$data/a.json")
echo "createRunFiles of $n names: $got upload URLs in $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.2f", b-a}') s"

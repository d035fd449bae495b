#!/usr/bin/env bash
# Uploads one W&B run file of SIZE bytes (default 2,147,483,648: 2 GiB) to `hone serve` as a
# chunked PUT (no Content-Length) and reports the answer, the time, the server's peak RSS,
# the row recorded, and what the upload left in the database and the data directory; then
# the same upload cut short after half its bytes, which must leave nothing. Issue 33 item 2.
#
#   scripts/hardening-probe/upload.sh BIN [DSN] [SIZE] [-- extra serve flags]
#
# DSN: a postgres:// URL (a fresh schema is made in it and dropped after), or empty for SQLite.
# Example (the figures in docs/reliability.md):
#   go build -o /tmp/hone-33 ./cmd/hone
#   scripts/hardening-probe/upload.sh /tmp/hone-33 "$HONE_TEST_POSTGRES_DSN"
set -euo pipefail
bin=$1 dsn=${2:-} size=${3:-2147483648}
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
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
"$bin" serve --data "$data" --addr "127.0.0.1:$port" --train-workers 0 --read-timeout 30m --log-level warn "${args[@]}" "$@" >"$data/out" 2>"$data/err" &
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
gql() { curl -sS -u "api:$key" -H 'Content-Type: application/json' -d "$1" "$url/graphql"; }
gql '{"query":"mutation { upsertBucket(input: {name: \"r\", modelName: \"p\", entityName: \"local\"}) { bucket { id } } }"}' >/dev/null
urls=$(gql '{"query":"mutation { createRunFiles(input: {entityName: \"local\", projectName: \"p\", runName: \"r\", files: [\"big.bin\", \"cut.bin\"]}) { files { name uploadUrl } } }"}' |
  python3 -c 'import json,sys; print("\n".join(f["uploadUrl"] for f in json.load(sys.stdin)["data"]["createRunFiles"]["files"]))')
big=$(sed -n 1p <<<"$urls") cut=$(sed -n 2p <<<"$urls")
dbsize() {
  if [ -n "$dsn" ]; then "$PSQL" "$dsn" -tAc "SELECT pg_database_size(current_database())"
  else du -sb "$data"/hone.db* | awk '{s+=$1} END {print s}'; fi
}
dirsize() { du -sb --exclude='hone.db*' "$data" | awk '{print $1}'; }
mib() { awk -v b="$1" 'BEGIN{printf "%.0f MiB", b/1048576}'; }
rss() { awk -v k="$1:" '$1==k{printf "%.0f MiB", $2/1024}' "/proc/$pid/status"; }
db0=$(dbsize) dir0=$(dirsize)
echo "idle: RSS $(rss VmRSS); database $(mib "$db0"), data directory $(mib "$dir0")"
start=$(date +%s.%N)
code=$(head -c "$size" /dev/zero | curl -sS -o "$data/answer" -w '%{http_code}' -T - -H 'Transfer-Encoding: chunked' "$big" || true)
end=$(date +%s.%N)
sleep 1
echo "PUT of $size bytes (chunked): $code in $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}') s; RSS $(rss VmRSS), peak $(rss VmHWM); $(head -c 300 "$data/answer")"
if [ -n "$dsn" ]; then
  echo "recorded: $("$PSQL" "$dsn" -tAc "SELECT name || ' ' || size FROM $schema.wandb_run_files" | tr '\n' ' ')"
else
  echo "recorded: $(python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT name, size FROM wandb_run_files").fetchall())' "$data/hone.db")"
fi
db1=$(dbsize) dir1=$(dirsize)
echo "after: database +$(mib $((db1 - db0))), data directory +$(mib $((dir1 - dir0)))"
# The same size announced (Content-Length), cut short after half: the client goes away.
python3 - "$cut" "$size" <<'PY'
import socket, sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1]); size = int(sys.argv[2])
s = socket.create_connection((u.hostname, u.port))
s.sendall(f"PUT {u.path}?{u.query} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Length: {size}\r\n\r\n".encode())
block, left = bytes(1 << 20), size // 2
while left > 0:
    s.sendall(block[:min(left, len(block))]); left -= len(block)
s.close()
PY
sleep 2
db2=$(dbsize) dir2=$(dirsize)
echo "after an upload cut at half: database $( [ $((db2 - db1)) -ge 0 ] && echo + )$(mib $((db2 - db1))), data directory $( [ $((dir2 - dir1)) -ge 0 ] && echo + )$(mib $((dir2 - dir1))); temporary files left: $(find "$data" -name '.tmp-*' -o -name '.upload-*' | wc -l)"

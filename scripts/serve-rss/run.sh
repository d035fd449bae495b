#!/usr/bin/env bash
# Measures the resident memory of `hone serve` serving one model: after start-up (idle) and
# after a burst of concurrent chat completions, plus the peak (VmHWM). Linux only (/proc).
#
#   scripts/serve-rss/run.sh BIN MODEL_DIR [CONCURRENT] [MAX_TOKENS] [-- extra serve flags]
#
# Example (the figures in docs/performance.md):
#   CGO_ENABLED=0 go build -trimpath -o /tmp/hone ./cmd/hone   # as the Makefile builds it
#   /tmp/hone models synth --preset smollm2-135m --out /tmp/smol
#   scripts/serve-rss/run.sh /tmp/hone /tmp/smol 8 128
set -euo pipefail
bin=$1 dir=$2
conc=${3:-8} maxtok=${4:-128}
shift $(( $# < 4 ? $# : 4 ))
[ "${1:-}" = "--" ] && shift
data=$(mktemp -d)
port=$(( 20000 + RANDOM % 20000 ))
"$bin" serve --data "$data" --addr "127.0.0.1:$port" --no-demo-model --model "m=$dir" --log-level warn "$@" >"$data/out" 2>"$data/err" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 600); do grep -q listening "$data/out" 2>/dev/null && break; sleep 0.2; done
grep -q listening "$data/out" || { cat "$data/err"; exit 1; }
cat "$data/out" | grep -v -e '^Created an API key' -e '^hone_' || true
rss() { awk -v k="$1:" '$1==k{printf "%.0f MiB", $2/1024}' /proc/$pid/status; }
sleep 1
echo "idle:        RSS $(rss VmRSS)"
key=$(cat "$data/initial-api-key")
body='{"model":"m","messages":[{"role":"user","content":"Write a long story about a lighthouse keeper and the sea."}],"max_tokens":'$maxtok',"ignore_eos":true,"temperature":1,"seed":SEED}'
start=$(date +%s.%N)
for i in $(seq "$conc"); do
  curl -sS -o /dev/null -w '%{http_code} ' -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d "${body/SEED/$i}" "http://127.0.0.1:$port/v1/chat/completions" &
done
wait $(jobs -p | grep -v "^$pid$") 2>/dev/null || true
echo
end=$(date +%s.%N)
echo "after $conc×$maxtok tokens ($(awk -v a=$start -v b=$end 'BEGIN{printf "%.1f", b-a}') s): RSS $(rss VmRSS), peak $(rss VmHWM)"

#!/usr/bin/env bash
# Resident memory of `hone serve` and llama-server on the same GGUF file, like for like: 2
# threads, a 2048-position KV cache, after 4 concurrent chat completions of 128 tokens.
#
#   scripts/quant-bench/rss.sh HONE_BIN LLAMA_SERVER FILE.gguf [extra hone serve flags]
# (e.g. --kv-cache-dtype f32 for the f32 KV cache Hone had before --kv-cache-dtype; the
# default, auto, is f16 for a quantized file, as llama-server's default.)
# (llama-server: llama.cpp configured with -DLLAMA_BUILD_SERVER=ON.)
set -uo pipefail
hone=$1 server=$2 F=$3
shift 3
cd "$(dirname "$0")/../.."
echo "== hone $F"
GOMAXPROCS=2 scripts/serve-rss/run.sh "$hone" "$F" 4 128 -- --kv-blocks 128 "$@" 2>&1 | grep -E "idle|after"
echo "== llama-server $F"
port=$(( 20000 + RANDOM % 20000 ))
log=$(mktemp)
"$server" -m "$F" -t 2 -c 2048 -np 4 --port $port >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 300); do curl -s "http://127.0.0.1:$port/health" | grep -q ok && break; sleep 0.2; done
sleep 1
rss() { awk -v k="$1:" '$1==k{printf "%.0f MiB", $2/1024}' /proc/$pid/status; }
echo "idle:        RSS $(rss VmRSS)"
body='{"model":"m","messages":[{"role":"user","content":"Write a long story about a lighthouse keeper and the sea."}],"max_tokens":128,"ignore_eos":true,"temperature":1,"seed":SEED}'
for i in 1 2 3 4; do
  curl -sS -o /dev/null -w '%{http_code} ' -H 'Content-Type: application/json' -d "${body/SEED/$i}" "http://127.0.0.1:$port/v1/chat/completions" &
done
wait $(jobs -p | grep -v "^$pid$") 2>/dev/null
echo
echo "after 4×128 tokens: RSS $(rss VmRSS), peak $(rss VmHWM)"

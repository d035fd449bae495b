#!/usr/bin/env bash
# Resident memory of `hone serve` against llama-server on the same GGUF file (issue 31 item 6):
# each server started alone, its RSS (VmRSS) read when idle after start-up, then after 4
# concurrent text completions of 128 tokens (/v1/completions: a base model such as Gemma 3 270M
# has no chat template), with the peak (VmHWM, start-up included), and its KV cache as the
# server reports it. Both on 2 threads. Rows:
#
#   llama-server -c 2048 -np 4   4 slots of 512 positions (f16 KV allocated at start)
#   llama-server                 its defaults (-c 4096, one slot: the 4 requests queue)
#   hone                         its defaults (f16 KV for a quantized file, allocated as used)
#   hone --dtype f32 / bf16      the file dequantized (compare with the weights' f32/bf16 size)
#   OLD hone                     a second Hone binary (before a change), when OLD is set
#
# and the ratio of each Hone row to the two llama-server rows measured in the same run.
#
#   scripts/serve-rss/vs-llama.sh HONE_BIN LLAMA_SERVER FILE.gguf
#   OLD=/tmp/hone-old DTYPES="f32 bf16" ROUNDS=2 scripts/serve-rss/vs-llama.sh ...
#
# HONE_BIN: `CGO_ENABLED=0 go build -trimpath -o /tmp/hone ./cmd/hone`, as the Makefile builds;
# LLAMA_SERVER: `scripts/llama-cpp-build.sh CACHE bench` (llama.cpp 4227c9be). Each server's
# measurement holds /tmp/hone-bench.lock (flock), so other benchmarks do not run beside it.
# Linux only (/proc).
set -uo pipefail
hone=$1 server=$2 F=$3
DTYPES=${DTYPES-"f32 bf16"} ROUNDS=${ROUNDS:-1} OLD=${OLD:-}
lock=/tmp/hone-bench.lock
echo "== machine"
lscpu | grep -E "^(Model name|CPU\(s\)|Flags)" | sed 's/^/  /'
echo "  go $(go version 2>/dev/null | awk '{print $3}'), $(basename "$F") $(stat -c %s "$F") bytes"

body='{"model":"m","prompt":"Write a long story about a lighthouse keeper and the sea.","max_tokens":128,"ignore_eos":true,"temperature":1,"seed":SEED}'
kib() { awk -v k="$1:" '$1==k{print $2}' "/proc/$2/status"; }
mib() { awk -v k="$1" 'BEGIN{printf "%.0f", k/1024}'; }
declare -A AFTER

# burst PID PORT [AUTH]: 4 concurrent completions, then prints "idle after peak" in MiB.
burst() {
  local pid=$1 port=$2 auth=${3:-} idle i
  sleep 1
  idle=$(kib VmRSS "$pid")
  for i in 1 2 3 4; do
    curl -sS -o /dev/null -w '%{http_code} ' ${auth:+-H "Authorization: Bearer $auth"} -H 'Content-Type: application/json' \
      -d "${body/SEED/$i}" "http://127.0.0.1:$port/v1/completions" >&2 &
  done
  wait $(jobs -p | grep -v "^$pid$") 2>/dev/null
  echo "$(mib "$idle") $(mib "$(kib VmRSS "$pid")") $(mib "$(kib VmHWM "$pid")")"
}

# llama NAME [flags]
llama() {
  local name=$1 port=$(( 20000 + RANDOM % 20000 )) log pid r kv
  shift
  log=$(mktemp)
  "$server" -m "$F" -t 2 --port "$port" "$@" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do curl -s "http://127.0.0.1:$port/health" | grep -q ok && break; sleep 0.2; done
  r=$(burst "$pid" "$port")
  kv=$(grep -oE "CPU KV buffer size = +[0-9.]+ MiB" "$log" | awk '{s+=$(NF-1)} END{printf "%.0f MiB f16 allocated at start", s}')
  kill "$pid"; wait "$pid" 2>/dev/null; rm -f "$log"
  AFTER[$name]=$(echo "$r" | awk '{print $2}')
  printf '| %s | %s | %s | %s | %s |\n' "$name" $r "$kv"
}

# hone NAME BIN [flags]
hone() {
  local name=$1 bin=$2 port=$(( 20000 + RANDOM % 20000 )) data pid r kv
  shift 2
  data=$(mktemp -d)
  GOMAXPROCS=2 "$bin" serve --data "$data" --addr "127.0.0.1:$port" --no-demo-model --model "m=$F" --log-level warn "$@" >"$data/out" 2>"$data/err" &
  pid=$!
  for _ in $(seq 600); do grep -q listening "$data/out" 2>/dev/null && break; sleep 0.2; done
  if ! grep -q listening "$data/out"; then cat "$data/err" >&2; kill "$pid" 2>/dev/null; rm -rf "$data"; return; fi
  r=$(burst "$pid" "$port" "$(cat "$data/initial-api-key")")
  kv=$(grep -oE "weights [0-9.]+ [KMG]iB, KV cache up to [0-9.]+ [KMG]iB \([0-9]+ tokens in f[0-9]+" "$data/out" | sed 's/$/, allocated as used)/')
  kill "$pid"; wait "$pid" 2>/dev/null; rm -rf "$data"
  AFTER[$name]=$(echo "$r" | awk '{print $2}')
  printf '| %s | %s | %s | %s | %s |\n' "$name" $r "$kv"
}

ratio() { awk -v a="${AFTER[$1]:-0}" -v b="${AFTER[$2]:-0}" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else printf "-" }'; }

for round in $(seq "$ROUNDS"); do
  echo
  echo "== round $round, $(date -u +%Y-%m-%dT%H:%M:%SZ), RSS in MiB after 4 × 128 tokens"
  echo "| server | idle | after | peak | weights and KV cache |"
  echo "|---|---:|---:|---:|---|"
  { flock 9; llama "llama-server -c 2048 -np 4" -c 2048 -np 4; } 9>"$lock"
  { flock 9; llama "llama-server" ; } 9>"$lock"
  { flock 9; hone "hone" "$hone"; } 9>"$lock"
  [ -n "$OLD" ] && { flock 9; hone "old hone" "$OLD"; } 9>"$lock"
  for d in $DTYPES; do
    { flock 9; hone "hone --dtype $d" "$hone" --dtype "$d"; } 9>"$lock"
    [ -n "$OLD" ] && { flock 9; hone "old hone --dtype $d" "$OLD" --dtype "$d"; } 9>"$lock"
  done
  echo
  echo "hone / llama-server after the completions: $(ratio hone "llama-server -c 2048 -np 4") (-c 2048 -np 4), $(ratio hone llama-server) (defaults)"
  [ -n "$OLD" ] && echo "old hone / llama-server: $(ratio "old hone" "llama-server -c 2048 -np 4") (-c 2048 -np 4), $(ratio "old hone" llama-server) (defaults)"
done

#!/usr/bin/env bash
# One round of issue 15's comparison (docs/performance.md, "Quantized GGUF files against
# llama.cpp"): Hone's prefill and decode benchmarks (NEW and, if set, OLD model.test binaries
# from `go test -c ./internal/model`) and llama.cpp's llama-bench and llama-batched-bench
# (in LLAMA_BIN) on each GGUF file given, 2 threads, back to back. Run it inside
# `flock /tmp/hone-bench.lock` and take the best of several rounds.
#
#   NEW=/tmp/model.test OLD=/tmp/model-old.test LLAMA_BIN=~/.cache/hone/llama-bench \
#     scripts/quant-bench/round.sh smol-q8_0.gguf smol-q4_k_m.gguf
set -uo pipefail
cd "$(dirname "$0")/../../internal/model"
lscpu | grep -E 'Model name|Flags'
for F in "$@"; do
  echo "== $F"
  for v in OLD NEW; do
    B=${!v:-}
    [ -n "$B" ] || continue
    HONE_BENCH_GGUF=$F GOMAXPROCS=2 "$B" -test.run XXX -test.bench '^BenchmarkPrefill$/^gguf$/^batch1$' -test.benchtime 10x 2>&1 | grep ^Bench | sed "s/^/$v /"
    HONE_BENCH_GGUF=$F GOMAXPROCS=2 "$B" -test.run XXX -test.bench '^BenchmarkDecode$/^gguf$/' -test.benchtime 40x 2>&1 | grep ^Bench | sed "s/^/$v /"
  done
  "$LLAMA_BIN/llama-bench" -m "$F" -t 2 -p 128 -n 64 -r 3 2>&1 | grep -E "pp128|tg64"
  "$LLAMA_BIN/llama-batched-bench" -m "$F" -t 2 -c 8192 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,16 2>&1 | grep -E "^\|\s+128"
done

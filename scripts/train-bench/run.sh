#!/bin/sh
# Runs Hone's BenchmarkSFTStep and the PyTorch + peft reference on the same synthetic models,
# model by model back to back, and prints both. PYTHON: a Python with torch, transformers and
# peft (../train-goldens/requirements.txt). WORK: where the models are written. STEPS: steps
# per measurement (default 5). ROUNDS: how many times each pair is measured, Hone and PyTorch
# alternating (default 1; on a shared machine take the median). QWEN=1 adds the Qwen2.5-0.5B
# shape (2 GB of bf16 weights).
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
WORK=${WORK:-/tmp/hone-train-bench}
STEPS=${STEPS:-5}
mkdir -p "$WORK"
go build -o "$WORK/hone" ./cmd/hone
go test -c -o "$WORK/train.test" ./internal/train
models="smollm2-135m-f32 smollm2-135m-bf16"
[ "${QWEN:-}" = 1 ] && models="$models qwen2.5-0.5b-bf16"
for m in $models; do
  dtype=${m##*-}
  preset=${m%-*}
  [ -d "$WORK/$m" ] || "$WORK/hone" models synth --preset "$preset" --dtype "$dtype" --out "$WORK/$m"
  tdtype=float32
  [ "$dtype" = bf16 ] && tdtype=bfloat16
  echo "== $m"
  for round in $(seq "${ROUNDS:-1}"); do
  (cd internal/train && HONE_BENCH_MODELS=$WORK HONE_BENCH_QWEN=1 GOMAXPROCS=2 \
    "$WORK/train.test" -test.run XXX -test.bench "BenchmarkSFTStep/$m\$" -test.benchtime "${STEPS}x" | grep Benchmark)
  echo "PyTorch + peft (2 threads): $("$PY" scripts/train-bench/torch_sft.py "$WORK/$m" "$STEPS" "$tdtype" 2>/dev/null)"
  done
done

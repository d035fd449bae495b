#!/bin/sh
# Runs Hone's BenchmarkSFTStep and the PyTorch + peft reference on the same synthetic models,
# back to back, and prints both. PYTHON: a Python with torch, transformers and peft
# (../train-goldens/requirements.txt). WORK: where the models are written.
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
WORK=${WORK:-/tmp/hone-train-bench}
mkdir -p "$WORK"
go build -o "$WORK/hone" ./cmd/hone
for m in smollm2-135m-f32 smollm2-135m-bf16; do
  [ -d "$WORK/$m" ] || "$WORK/hone" models synth --preset smollm2-135m --dtype "${m##*-}" --out "$WORK/$m"
done
echo "== Hone (GOMAXPROCS=2)"
HONE_BENCH_MODELS=$WORK GOMAXPROCS=2 go test -run XXX -bench BenchmarkSFTStep -benchtime ${STEPS:-5}x ./internal/train | grep Benchmark
echo "== PyTorch + peft (2 threads)"
for m in smollm2-135m-f32:float32 smollm2-135m-bf16:bfloat16; do
  echo "$m: $("$PY" scripts/train-bench/torch_sft.py "$WORK/${m%%:*}" ${STEPS:-5} "${m##*:}" 2>/dev/null)"
done

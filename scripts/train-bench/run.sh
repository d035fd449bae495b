#!/bin/sh
# Runs Hone's BenchmarkSFTStep and the PyTorch + peft reference on the same synthetic models,
# model by model back to back, and prints both. PYTHON: a Python with torch, transformers and
# peft (../train-goldens/requirements.txt). WORK: where the models are written. STEPS: steps
# per measurement (default 5). ROUNDS: how many times each pair is measured, Hone and PyTorch
# alternating (default 1; on a shared machine take the median). QWEN=1 adds the Qwen2.5-0.5B
# shape (1 GB of bf16 weights). QLORA=1 (with QWEN=1) adds, on the Qwen shape, Hone on the
# bf16 model quantized at load to Q8_0 and to Q4_K (QLoRA), and PyTorch + peft on the base
# loaded in bitsandbytes 4-bit NF4, run by BNB_PYTHON (a Python that also has bitsandbytes;
# default PYTHON). MODELS (e.g. qwen2.5-0.5b-bf16) measures only those models.
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
models=${MODELS:-$models}
for m in $models; do
  dtype=${m##*-}
  preset=${m%-*}
  [ -d "$WORK/$m" ] || "$WORK/hone" models synth --preset "$preset" --dtype "$dtype" --out "$WORK/$m"
  tdtype=float32
  [ "$dtype" = bf16 ] && tdtype=bfloat16
  echo "== $m"
  subs=$m
  [ "${QLORA:-}" = 1 ] && [ "$preset" = qwen2.5-0.5b ] && subs="$m $m-q8_0 $m-q4_k"
  for round in $(seq "${ROUNDS:-1}"); do
  for sub in $subs; do
  (cd internal/train && HONE_BENCH_MODELS=$WORK HONE_BENCH_QWEN=1 GOMAXPROCS=2 \
    "$WORK/train.test" -test.run XXX -test.bench "BenchmarkSFTStep/$sub\$" -test.benchtime "${STEPS}x" | grep Benchmark)
  done
  echo "PyTorch + peft (2 threads): $("$PY" scripts/train-bench/torch_sft.py "$WORK/$m" "$STEPS" "$tdtype" 2>/dev/null)"
  if [ "$subs" != "$m" ]; then
    echo "PyTorch + peft, bitsandbytes NF4 base (2 threads): $("${BNB_PYTHON:-$PY}" scripts/train-bench/torch_sft.py "$WORK/$m" "$STEPS" "$tdtype" nf4 2>/dev/null)"
  fi
  done
done

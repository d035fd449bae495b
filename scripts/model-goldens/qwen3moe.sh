#!/bin/sh
# Regenerates internal/model/testdata/goldens-qwen3moe: synthetic Qwen3-MoE models written by
# `hone models synth`, logits computed by transformers (+ peft for the LoRA variant) in float64.
# Needs a Python with torch, transformers and peft (requirements.txt); go test does not.
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/hone" ./cmd/hone
# Keep these in step with moeGoldenVariants in internal/model/moe_test.go.
"$tmp/hone" models synth --arch qwen3moe --std 0.08 --out "$tmp/m/qwen3moe"
"$tmp/hone" models synth --arch qwen3moe --std 0.08 --layers 3 --experts 6 --experts-per-tok 3 \
	--no-norm-topk --mlp-only-layers 1 --out "$tmp/m/qwen3moe-mixed"
rm -rf internal/model/testdata/goldens-qwen3moe
"$PY" scripts/model-goldens/qwen3moe.py "$tmp/m" internal/model/testdata/goldens-qwen3moe
rm -f internal/model/testdata/goldens-qwen3moe/lora-adapter/README.md
gzip -9n internal/model/testdata/goldens-qwen3moe/*.json

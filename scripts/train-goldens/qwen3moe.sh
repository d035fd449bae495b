#!/bin/sh
# Regenerates internal/train/testdata/golden-qwen3moe: a tiny synthetic Qwen3-MoE written by
# `hone models synth`, a PEFT LoRA adapter on its attention, and the adapter's gradients
# computed by PyTorch + peft in float64. Needs a Python with torch, transformers and peft
# (requirements.txt); go test does not.
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/hone" ./cmd/hone
# Keep in step with moeGoldenModel in internal/train/moe_test.go.
"$tmp/hone" models synth --arch qwen3moe --std 0.2 --layers 3 --mlp-only-layers 1 --out "$tmp/m"
rm -rf internal/train/testdata/golden-qwen3moe
"$PY" scripts/train-goldens/qwen3moe.py "$tmp/m" internal/train/testdata/golden-qwen3moe
rm -f internal/train/testdata/golden-qwen3moe/adapter/README.md

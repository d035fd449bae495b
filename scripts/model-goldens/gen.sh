#!/bin/sh
# Regenerates internal/model/testdata/goldens: synthetic models written by `hone models synth`,
# logits computed by Hugging Face transformers (+ peft for the LoRA variant) in float64.
# Needs a Python with torch, transformers and peft (requirements.txt); go test does not.
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/hone" ./cmd/hone
# Keep these in step with goldenVariants in internal/model/golden_test.go.
"$tmp/hone" models synth --arch llama --std 0.08 --out "$tmp/m/llama"
"$tmp/hone" models synth --arch llama --std 0.08 --tied --rope-scaling llama3 --max-pos 256 --out "$tmp/m/llama-tied-rope3"
"$tmp/hone" models synth --arch llama --std 0.08 --dtype bf16 --out "$tmp/m/llama-bf16"
"$tmp/hone" models synth --arch qwen2 --std 0.08 --out "$tmp/m/qwen2"
"$tmp/hone" models synth --arch qwen3 --std 0.08 --out "$tmp/m/qwen3"
"$tmp/hone" models synth --arch gemma2 --std 0.08 --out "$tmp/m/gemma2"
"$tmp/hone" models synth --arch gemma3 --std 0.08 --out "$tmp/m/gemma3"
"$tmp/hone" models synth --arch mistral --std 0.08 --out "$tmp/m/mistral"
"$tmp/hone" models synth --arch ministral --std 0.08 --out "$tmp/m/ministral"
rm -rf internal/model/testdata/goldens
"$PY" scripts/model-goldens/gen.py "$tmp/m" internal/model/testdata/goldens
rm -f internal/model/testdata/goldens/*-adapter/README.md
gzip -9n internal/model/testdata/goldens/*.json

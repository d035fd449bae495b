#!/bin/sh
# Regenerates internal/train/testdata/golden (and adamw.json): a tiny synthetic Llama written by
# `hone models synth`, a PEFT LoRA adapter on it, and the adapter's gradients computed by
# PyTorch + peft in float64. Needs a Python with torch, transformers and peft
# (requirements.txt); go test does not.
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/hone" ./cmd/hone
# Keep in step with goldenModel in internal/train/golden_test.go.
"$tmp/hone" models synth --arch llama --std 0.2 --out "$tmp/llama"
rm -rf internal/train/testdata/golden
"$PY" scripts/train-goldens/gen.py "$tmp/llama" internal/train/testdata/golden
rm -f internal/train/testdata/golden/adapter/README.md
# Gemma 2 and 3 (TestGemmaGradientsMatchPyTorch in internal/train/gemma_backward_test.go) and
# Mistral (TestMistralGradientsMatchPyTorch in internal/train/mistral_test.go).
for a in gemma2 gemma3 mistral; do
  "$tmp/hone" models synth --arch $a --std 0.2 --out "$tmp/$a"
  rm -rf internal/train/testdata/golden-$a
  "$PY" scripts/train-goldens/gen.py "$tmp/$a" internal/train/testdata/golden-$a
  rm -f internal/train/testdata/golden-$a/adapter/README.md
done
# AdamW and gradient clipping, step by step (internal/train/testdata/adamw.json).
"$PY" scripts/train-goldens/adamw.py internal/train/testdata/adamw.json

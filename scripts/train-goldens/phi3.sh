#!/bin/sh
# Regenerates internal/train/testdata/phi3: Phi-3 LoRA gradients from PyTorch + peft in
# float64 on tiny synthetic models (`hone models synth --arch phi3`). Keep in step with
# phi3GoldenModels in internal/train/phi3_test.go.
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/hone" ./cmd/hone
"$tmp/hone" models synth --arch phi3 --std 0.2 --out "$tmp/phi3"
"$tmp/hone" models synth --arch phi3 --std 0.2 --partial-rotary 0.75 --tied --out "$tmp/phi4mini"
rm -rf internal/train/testdata/phi3
"$PY" scripts/train-goldens/phi3.py "$tmp/phi3" internal/train/testdata/phi3/phi3 23
"$PY" scripts/train-goldens/phi3.py "$tmp/phi4mini" internal/train/testdata/phi3/phi4mini-long 80
rm -f internal/train/testdata/phi3/*/adapter/README.md

#!/bin/sh
# Regenerates the Phi-3 goldens of internal/model/testdata/goldens (phi3*.json.gz,
# phi4mini*.json.gz, phi3-lora-adapter): synthetic models written by `hone models synth --arch
# phi3`, logits from transformers (+ peft) in float64. Needs the Python of requirements.txt.
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/hone" ./cmd/hone
# Keep these in step with phi3Variants in internal/model/phi3_test.go.
"$tmp/hone" models synth --arch phi3 --std 0.08 --out "$tmp/m/phi3"
"$tmp/hone" models synth --arch phi3 --std 0.08 --sliding-window 16 --out "$tmp/m/phi3window"
"$tmp/hone" models synth --arch phi3 --std 0.08 --partial-rotary 0.75 --tied --out "$tmp/m/phi4mini"
g=internal/model/testdata/goldens
rm -rf "$g"/phi3*.json.gz "$g"/phi4mini*.json.gz "$g/phi3-lora-adapter"
"$PY" scripts/model-goldens/phi3.py "$tmp/m" "$g"
rm -f "$g/phi3-lora-adapter/README.md"
gzip -9n "$g"/phi3*.json "$g"/phi4mini*.json

#!/bin/sh
# Regenerates internal/model/testdata/phi3-llamacpp-layout.json: llama.cpp's converter run on
# `hone models synth --arch phi3 --std 0.08 --partial-rotary 0.75 --tied --sliding-window 16`
# (the phi4mini model of internal/model/phi3gguf_test.go; keep in step). LLAMA_CPP_SRC defaults
# to the llama.cpp tree vendored by llama-cpp-python in ~/.cache/hone.
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
SRC=${LLAMA_CPP_SRC:-$HOME/.cache/hone/llama-cpp-python-0.3.16/vendor/llama.cpp}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/hone" ./cmd/hone
"$tmp/hone" models synth --arch phi3 --std 0.08 --partial-rotary 0.75 --tied --sliding-window 16 --out "$tmp/m"
"$PY" scripts/gguf-goldens/phi3_layout.py "$SRC" "$tmp/m" internal/model/testdata/phi3-llamacpp-layout.json

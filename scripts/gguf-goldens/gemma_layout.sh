#!/bin/sh
# Regenerates internal/export/testdata/gemma-llamacpp-layout.json: llama.cpp's converter run on
# the Gemma 2 and Gemma 3 fixtures that internal/export's TestWriteGemmaFixtures writes (the
# models of TestExportGGUFGemmaMatchesConverter). PYTHON needs torch, numpy, sentencepiece and
# transformers (the converter imports them); LLAMA_CPP_SRC defaults to the llama.cpp tree
# vendored by llama-cpp-python in ~/.cache/hone.
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
SRC=${LLAMA_CPP_SRC:-$HOME/.cache/hone/llama-cpp-python-0.3.16/vendor/llama.cpp}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
HONE_GEMMA_FIXTURES="$tmp" go test ./internal/export -run '^TestWriteGemmaFixtures$' -count=1
mkdir -p internal/export/testdata
"$PY" scripts/gguf-goldens/gemma_layout.py "$SRC" "$tmp" internal/export/testdata/gemma-llamacpp-layout.json

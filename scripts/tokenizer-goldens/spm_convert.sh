#!/bin/sh
# Regenerates internal/tokenizer/testdata/spm/convert-llama.gguf: what llama.cpp's
# convert_hf_to_gguf.py --vocab-only writes for a Llama directory holding the SentencePiece
# test vocabulary (tokenizer.model, legacy/tokenizer.json and tokenizer_config.json) and a
# config.json of 800 embeddings; TestSPMGGUFMetadataMatchesConverter compares Hone's export
# with its tokenizer.* keys. PYTHON needs sentencepiece, torch and numpy (the converter
# imports them); LLAMA_CPP_SRC defaults to the llama.cpp tree vendored by llama-cpp-python in
# ~/.cache/hone (scripts/llama-cpp-build.sh).
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
SRC=${LLAMA_CPP_SRC:-$HOME/.cache/hone/llama-cpp-python-0.3.16/vendor/llama.cpp}
spm=internal/tokenizer/testdata/spm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$spm/tokenizer.model" "$spm/legacy/tokenizer_config.json" "$tmp/"
gunzip -c "$spm/legacy/tokenizer.json.gz" >"$tmp/tokenizer.json"
cat >"$tmp/config.json" <<'JSON'
{"architectures":["LlamaForCausalLM"],"model_type":"llama","vocab_size":800,"hidden_size":64,"intermediate_size":128,"num_hidden_layers":1,"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":512,"rms_norm_eps":1e-5,"rope_theta":10000.0,"bos_token_id":1,"eos_token_id":2,"torch_dtype":"float32","tie_word_embeddings":true}
JSON
"$PY" "$SRC/convert_hf_to_gguf.py" "$tmp" --vocab-only --outfile "$spm/convert-llama.gguf"

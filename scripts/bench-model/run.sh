#!/usr/bin/env bash
# Model benchmark: Hone's prefill and decode on a SmolLM2-135M-shaped model with random
# weights (f32 and bf16, batch 1 and 16, 2 threads), then llama.cpp on the same weights when
# LLAMA_CPP points at a llama.cpp source tree with build/bin/llama-bench and
# build/bin/llama-batched-bench built (see docs/performance.md; llama.cpp is a measurement
# reference only, never part of Hone). PYTHON must have torch, numpy, sentencepiece and
# mistral_common for llama.cpp's converter. Holds /tmp/hone-bench.lock while measuring.
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${WORK:-/tmp/hone-bench-model}
THREADS=${THREADS:-2}
mkdir -p "$WORK"
go build -o "$WORK/hone" ./cmd/hone
for dt in f32 bf16; do
	[ -f "$WORK/smollm2-$dt/model.safetensors" ] ||
		"$WORK/hone" models synth --preset smollm2-135m --dtype "$dt" --out "$WORK/smollm2-$dt"
done
go test -c -o "$WORK/model.test" ./internal/model
echo "== Hone (GOMAXPROCS=$THREADS)"
flock /tmp/hone-bench.lock env HONE_BENCH_MODELS="$WORK" GOMAXPROCS="$THREADS" \
	"$WORK/model.test" -test.run xxx -test.bench 'Prefill|Decode' -test.benchtime "${BENCHTIME:-20x}" -test.count "${COUNT:-3}"
[ -n "${LLAMA_CPP:-}" ] || exit 0
for dt in f32 bf16; do
	gguf="$WORK/smollm2-$dt.gguf"
	[ -f "$gguf" ] || PYTHONPATH="$LLAMA_CPP/gguf-py:$LLAMA_CPP" "${PYTHON:-python3}" \
		scripts/bench-model/convert_gguf.py "$WORK/smollm2-$dt" "$gguf" "$dt" >"$WORK/convert-$dt.log" 2>&1 ||
		{ echo "llama.cpp's converter failed: see $WORK/convert-$dt.log" >&2; exit 1; }
done
echo "== llama.cpp ($THREADS threads)"
for dt in f32 bf16; do
	flock /tmp/hone-bench.lock "$LLAMA_CPP/build/bin/llama-bench" -m "$WORK/smollm2-$dt.gguf" -t "$THREADS" -p 128 -n 128 -r 3 2>/dev/null | grep -E 'pp|tg'
	flock /tmp/hone-bench.lock "$LLAMA_CPP/build/bin/llama-batched-bench" -m "$WORK/smollm2-$dt.gguf" -t "$THREADS" -c 8192 -b 2048 -ub 512 \
		-npp 128 -ntg 128 -npl 1,16 2>/dev/null | grep -E '^\|'
done

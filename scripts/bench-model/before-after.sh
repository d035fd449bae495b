#!/usr/bin/env bash
# Batch-16 decode and the bf16 SFT step, two commits alternating inside one hold of
# /tmp/hone-bench.lock (docs/performance.md, "Batched decode and the bf16 SFT step"):
#   scripts/bench-model/before-after.sh BEFORE AFTER
# Each commit's internal/model, internal/gemm and internal/train test binaries are built from a
# `git archive` of it, with AFTER's benchmark files laid over BEFORE's (the same harness, and
# BenchmarkDecode's cpu-ms/step and DecodeBandwidth's batch 16 on both sides). Then, R rounds
# (default 3) of BenchmarkDecode at batch 16 on the synthetic SmolLM2-135M in f32 and bf16
# (WORK, default /tmp/hone-bench-model, as run.sh prepares it) with llama.cpp's
# llama-batched-bench on the same GGUF files (LLAMA_BIN, when set), DecodeBandwidth's batch-16
# products twice, and BenchmarkSFTStep on the 135M (twice) and Qwen2.5-0.5B shapes in bf16
# (TRAIN_WORK, default /tmp/hone-train-bench, as scripts/train-bench/run.sh prepares it) with
# PyTorch + peft (PYTHON, when set). 2 threads everywhere; the load average beside each figure.
set -euo pipefail
cd "$(dirname "$0")/../.."
BEFORE=${1:?BEFORE commit}
AFTER=${2:?AFTER commit}
PKGS="model gemm train"
BENCH_FILES="internal/model/bench_test.go internal/gemm/decodebw_test.go internal/train/bench_test.go"
. scripts/bench-model/build-sides.sh
exec flock /tmp/hone-bench.lock bash -c '
OUT=$1 W=$2 TW=$3 R=$4 SRC=$5
lscpu | grep -E "Model name|Flags"
go version
echo "### decode at batch 16"
for r in $(seq "$R"); do
	echo "== round $r $(date -u +%T) load $(cut -d" " -f1-3 /proc/loadavg)"
	for dt in f32 bf16; do
		for side in before after; do
			l=$(cut -d" " -f1 /proc/loadavg)
			out=$(cd "$SRC/internal/model" && HONE_BENCH_MODELS=$W GOMAXPROCS=2 "$OUT/$side-model.test" -test.run xxx -test.bench "^BenchmarkDecode\$/$dt/batch16" -test.benchtime 100x 2>/dev/null | grep Benchmark)
			echo "  $side $dt load=$l $(echo "$out" | grep -o "[0-9.]* tokens/s") $(echo "$out" | grep -o "[0-9.]* cpu-ms/step")"
		done
		if [ -n "${LLAMA_BIN:-}" ]; then
			l=$(cut -d" " -f1 /proc/loadavg)
			s=$( { TIMEFORMAT="user %U sys %S"; time "$LLAMA_BIN/llama-batched-bench" -m "$W/smollm2-$dt.gguf" -t 2 -c 4096 -b 2048 -ub 512 -npp 128 -ntg 64 -npl 16 2>/dev/null | grep -E "^\|\s+128" | awk -F"|" "{print \"S_TG \"\$9\" tokens/s\"}"; } 2>&1 | tr "\n" " ")
			echo "  llama.cpp $dt load=$l $s(CPU s of the whole run: load, prefill, 64 steps)"
		fi
	done
done
echo "### the products of decode at batch 16 (DecodeBandwidth)"
for side in before after before after; do
	echo "  $side $(date -u +%T) load $(cut -d" " -f1 /proc/loadavg)"
	(cd "$SRC/internal/gemm" && GOMAXPROCS=2 "$OUT/$side-gemm.test" -test.run xxx -test.bench "DecodeBandwidth/.*/batch16" -test.benchtime 20x 2>/dev/null | grep Benchmark | sed "s/^/    /")
done
echo "### the SFT step"
for m in smollm2-135m-bf16 smollm2-135m-bf16 qwen2.5-0.5b-bf16; do
	echo "== $m $(date -u +%T) load $(cut -d" " -f1-3 /proc/loadavg)"
	for side in before after; do
		l=$(cut -d" " -f1 /proc/loadavg)
		out=$(cd "$SRC/internal/train" && HONE_BENCH_MODELS=$TW HONE_BENCH_QWEN=1 GOMAXPROCS=2 "$OUT/$side-train.test" -test.run XXX -test.bench "BenchmarkSFTStep/$m\$" -test.benchtime 5x 2>/dev/null | grep Benchmark)
		echo "  $side load=$l $(echo "$out" | grep -o "[0-9.]* tokens/s") $(echo "$out" | grep -o "[0-9.]* cpu-s/step") $(echo "$out" | grep -o "[0-9.]* peak-RSS-MB")"
	done
	if [ -n "${PYTHON:-}" ]; then
		l=$(cut -d" " -f1 /proc/loadavg)
		echo "  PyTorch+peft load=$l $(cd "$SRC" && "$PYTHON" scripts/train-bench/torch_sft.py "$TW/$m" 5 bfloat16 2>/dev/null)"
	fi
done
echo "end $(date -u +%T) load $(cut -d" " -f1-3 /proc/loadavg)"
rm -rf "$OUT"' _ "$OUT" "$W" "$TW" "$R" "$PWD"

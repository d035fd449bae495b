#!/usr/bin/env bash
# Prefill and the SFT step, two commits alternating inside one hold of /tmp/hone-bench.lock
# (docs/performance.md, "Element-wise kernels in AVX-512"):
#   scripts/bench-model/prefill-sft-before-after.sh BEFORE AFTER
# Each commit's internal/model and internal/train test binaries are built from a `git archive`
# of it, with AFTER's benchmark files laid over BEFORE's. Then, R rounds (default 3) of
# BenchmarkPrefill (128 tokens per sequence) in f32 and bf16 at batch 1 and 16 on the
# synthetic SmolLM2-135M (WORK, default /tmp/hone-bench-model, as scripts/bench-cpu.sh
# prepares it), and BenchmarkSFTStep on the 135M shape in f32 and bf16 (and Qwen2.5-0.5B in
# bf16 with QWEN=1) (TRAIN_WORK, default /tmp/hone-train-bench, as scripts/train-bench/run.sh
# prepares it), before and after back to back. 2 threads everywhere; the load average beside
# each figure, and each figure's CPU time (all threads) per prefill pass or SFT step, which the
# other work of a shared machine moves less than the rates.
set -euo pipefail
cd "$(dirname "$0")/../.."
BEFORE=${1:?BEFORE commit}
AFTER=${2:?AFTER commit}
PKGS="model train"
BENCH_FILES="internal/model/bench_test.go internal/train/bench_test.go"
. scripts/bench-model/build-sides.sh
exec flock /tmp/hone-bench.lock bash -c '
OUT=$1 W=$2 TW=$3 R=$4 SRC=$5
lscpu | grep -E "Model name|Flags"
go version
models="smollm2-135m-f32 smollm2-135m-bf16"
[ "${QWEN:-}" = 1 ] && models="$models qwen2.5-0.5b-bf16"
for r in $(seq "$R"); do
	echo "== round $r $(date -u +%T) load $(cut -d" " -f1-3 /proc/loadavg)"
	for dt in f32 bf16; do
		for batch in 1 16; do
			n=10
			[ "$batch" = 16 ] && n=3
			for side in before after; do
				l=$(cut -d" " -f1 /proc/loadavg)
				out=$(cd "$SRC/internal/model" && HONE_BENCH_MODELS=$W GOMAXPROCS=2 "$OUT/$side-model.test" -test.run xxx -test.bench "^BenchmarkPrefill\$/$dt/batch$batch\$" -test.benchtime ${n}x 2>/dev/null | grep Benchmark)
				echo "  prefill $dt batch$batch $side load=$l $(echo "$out" | grep -o "[0-9.]* tokens/s") $(echo "$out" | grep -o "[0-9.]* cpu-ms/pass")"
			done
		done
	done
	for m in $models; do
		for side in before after; do
			l=$(cut -d" " -f1 /proc/loadavg)
			out=$(cd "$SRC/internal/train" && HONE_BENCH_MODELS=$TW HONE_BENCH_QWEN=1 GOMAXPROCS=2 "$OUT/$side-train.test" -test.run XXX -test.bench "BenchmarkSFTStep/$m\$" -test.benchtime 5x 2>/dev/null | grep Benchmark)
			echo "  sft $m $side load=$l $(echo "$out" | grep -o "[0-9.]* tokens/s") $(echo "$out" | grep -o "[0-9.]* cpu-s/step")"
		done
	done
done
echo "end $(date -u +%T) load $(cut -d" " -f1-3 /proc/loadavg)"
rm -rf "$OUT"' _ "$OUT" "$W" "$TW" "$R" "$PWD"

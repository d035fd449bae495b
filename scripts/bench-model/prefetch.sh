#!/usr/bin/env bash
# Decode with and without software prefetch of the weights (HONE_DECODE_PREFETCH=off|on, the
# same binaries) and as measured per process (the variable unset: the default), against llama.cpp on the same files, R rounds inside one hold of
# /tmp/hone-bench.lock (docs/performance.md, "Decode prefetch per CPU"). Needs WORK prepared
# by run.sh (the synthetic SmolLM2 f32/bf16 models and their GGUF conversions), QBENCH (a
# directory with smol-q8_0.gguf, smol-q4_k_m.gguf, smol-q4_1.gguf: see the "Quantized GGUF
# files" section) and LLAMA_BIN (llama-bench, llama-batched-bench). Each of Hone's figures runs
# REPS times (default 3), each time in a fresh process (the prefetch tuners decide per
# process), so that scripts/bench-cpu-summary.py reports its median and spread.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${WORK:-/tmp/hone-bench-model}
Q=${QBENCH:?QBENCH: the directory of the SmolLM2 GGUF files}
LB=${LLAMA_BIN:?LLAMA_BIN: the directory of llama-bench and llama-batched-bench}
R=${R:-2}
REPS=${REPS:-3}
go test -c -o "$W/model.test" ./internal/model
go test -c -o "$W/gemm.test" ./internal/gemm
exec flock /tmp/hone-bench.lock bash -c '
W=$1 Q=$2 LB=$3 R=$4 REPS=$5
lscpu | grep -E "Model name|Flags"
tps() { grep -o "^Benchmark[^ ]*\|[0-9.]* tokens/s\|[0-9.]* weights-GB/s\|[0-9.]* GB/s\|decode prefetch measured.*" | awk "/^Benchmark/ {n = \$0; next} /^decode/ {print \"  \" \$0; next} {print \"  \" n \"\t\" \$0}"; }
for r in $(seq "$R"); do
	echo "== round $r $(date -u +%T) load $(cut -d" " -f1 /proc/loadavg)"
	# The modes alternate repetition by repetition (the two vCPUs'"'"' memory bandwidth moves by
	# up to 1.8x from minute to minute on a shared host), each repetition after a STREAM read,
	# llama.cpp too.
	for rep in $(seq "$REPS"); do
		GOMAXPROCS=2 "$W/gemm.test" -test.run xxx -test.bench "MemoryBandwidth/threads2" -test.benchtime 5x | grep ^Bench
		for pf in off on measured; do
			# measured: the variable unset, the default (each kind of weights times both kernel
			# sets on its first decode products and keeps the faster; gemm.PrefetchTuner)
			echo "Hone, HONE_DECODE_PREFETCH=$pf"
			export HONE_DECODE_PREFETCH=$pf
			[ "$pf" = measured ] && unset HONE_DECODE_PREFETCH
			[ "$rep" = 1 ] && GOMAXPROCS=2 "$W/gemm.test" -test.run xxx -test.bench "DecodeBandwidth" -test.benchtime 10x 2>&1 | tps
			HONE_BENCH_MODELS="$W" GOMAXPROCS=2 "$W/model.test" -test.run xxx -test.bench "^BenchmarkDecode\$/(f32|bf16)/" -test.benchtime 20x 2>&1 | tps
			for f in q8_0 q4_k_m q4_1; do
				echo " $f"
				HONE_BENCH_GGUF="$Q/smol-$f.gguf" GOMAXPROCS=2 "$W/model.test" -test.run xxx -test.bench "^BenchmarkDecode\$/^gguf\$/" -test.benchtime 40x 2>&1 | tps
			done
			unset HONE_DECODE_PREFETCH
		done
		echo "llama.cpp"
		for f in "$W/smollm2-f32.gguf" "$W/smollm2-bf16.gguf" "$Q/smol-q8_0.gguf" "$Q/smol-q4_k_m.gguf" "$Q/smol-q4_1.gguf"; do
			echo " $(basename "$f") $("$LB/llama-bench" -m "$f" -t 2 -p 0 -n 64 -r 3 2>/dev/null | grep -o "tg64 .*")"
			"$LB/llama-batched-bench" -m "$f" -t 2 -c 4096 -b 2048 -ub 512 -npp 128 -ntg 64 -npl 1,16 2>/dev/null | grep -E "^\|\s+128" | awk -F"|" "{print \"  batched B=\"\$4\" S_TG \"\$9}"
		done
	done
done' _ "$W" "$Q" "$LB" "$R" "$REPS"

#!/usr/bin/env bash
# Same-run rounds on a shared machine: R rounds of Hone's BenchmarkPrefill/bf16 and
# BenchmarkDecode, then llama.cpp's llama-bench and llama-batched-bench, then gemm's
# MemoryBandwidth and DecodeBandwidth, all inside one hold of /tmp/hone-bench.lock (take the
# best of the rounds). Needs WORK prepared by run.sh (the synthetic models and their GGUF
# conversions) and LLAMA_BIN holding llama-bench and llama-batched-bench.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${WORK:-/tmp/hone-bench-model}
LB=${LLAMA_BIN:?LLAMA_BIN: the directory of llama-bench and llama-batched-bench}
R=${R:-2}
go test -c -o "$W/model.test" ./internal/model
go test -c -o "$W/gemm.test" ./internal/gemm
exec flock /tmp/hone-bench.lock bash -c '
W=$1 LB=$2 R=$3
lscpu | grep -E "Model name|Flags"
for r in $(seq "$R"); do
	echo "== round $r $(date -u +%T) load $(cut -d" " -f1 /proc/loadavg)"
	env HONE_BENCH_MODELS="$W" GOMAXPROCS=2 "$W/model.test" -test.run xxx -test.bench "^BenchmarkPrefill\$/bf16" -test.benchtime 20x | grep Benchmark
	env HONE_BENCH_MODELS="$W" GOMAXPROCS=2 "$W/model.test" -test.run xxx -test.bench "^BenchmarkDecode\$" -test.benchtime 20x | grep Benchmark
	for dt in f32 bf16; do
		"$LB/llama-bench" -m "$W/smollm2-$dt.gguf" -t 2 -p 128 -n 128 -r 3 2>/dev/null | grep -E "pp|tg"
		"$LB/llama-batched-bench" -m "$W/smollm2-$dt.gguf" -t 2 -c 8192 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,16 2>/dev/null | grep -E "^\|"
	done
	GOMAXPROCS=2 "$W/gemm.test" -test.run xxx -test.bench "MemoryBandwidth|DecodeBandwidth" -test.benchtime 10x | grep Benchmark
done' _ "$W" "$LB" "$R"

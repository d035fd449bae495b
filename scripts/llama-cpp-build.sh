#!/usr/bin/env bash
# Builds the llama.cpp binaries the GGUF export tests use as a reference (llama-cli,
# llama-simple, llama-quantize; CPU only, no network code) from the llama.cpp source that
# PyPI's llama-cpp-python 0.3.16 sdist vendors (llama.cpp commit 4227c9be), into
#   $cache/llama.cpp-4227c9be/bin
# once: it does nothing when the binaries are there. Prints the bin directory on success.
# Usage: scripts/llama-cpp-build.sh CACHE_DIR [bench]
# With "bench", builds the benchmark references of docs/performance.md instead (llama-bench,
# llama-batched-bench, llama-server) into $cache/llama.cpp-4227c9be/bench-bin; never part of
# the tests.
set -euo pipefail
cache="$1"
pyver=0.3.16
commit=4227c9be
out="$cache/llama.cpp-$commit"
bins=(llama-cli llama-simple llama-quantize)
bindir="$out/bin" server=OFF
if [ "${2:-}" = bench ]; then
  bins=(llama-bench llama-batched-bench llama-server)
  bindir="$out/bench-bin" server=ON
fi
ok=1
for b in "${bins[@]}"; do [ -x "$bindir/$b" ] || ok=0; done
if [ "$ok" = 1 ]; then echo "$bindir"; exit 0; fi
venv="$cache/goldens-venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
src="$cache/llama-cpp-python-$pyver"
if [ ! -d "$src/vendor/llama.cpp" ]; then
  rm -rf "$src.tmp" && mkdir -p "$src.tmp"
  "$venv/bin/pip" download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$src.tmp" "llama-cpp-python==$pyver" >&2
  tar xzf "$src.tmp/llama_cpp_python-$pyver.tar.gz" -C "$src.tmp" >&2
  rm -rf "$src" && mv "$src.tmp/llama_cpp_python-$pyver" "$src" && rm -rf "$src.tmp"
fi
build="$out.build${2:+-$2}"
start=$(date +%s)
nice -n 10 cmake -S "$src/vendor/llama.cpp" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DGGML_OPENMP=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=$server -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON >&2
nice -n 10 cmake --build "$build" -j2 --target "${bins[@]}" >&2
mkdir -p "$bindir"
for b in "${bins[@]}"; do cp "$build/bin/$b" "$bindir/$b"; done
rm -rf "$build"
echo "llama-cpp-build: built ${bins[*]} in $(($(date +%s) - start))s" >&2
echo "$bindir"

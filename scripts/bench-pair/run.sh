#!/bin/sh
# Measures chat serving (cmd/hone BenchmarkChatServing) and an SFT step (internal/train
# BenchmarkSFTStep) at two commits of Hone, alternating the two builds ROUNDS times on the
# same machine, so that a change can be shown to cost nothing beyond noise:
#
#   scripts/bench-pair/run.sh OLD_COMMIT [NEW_COMMIT]    # NEW defaults to the working tree
#
# WORK: where the builds and models go (default /tmp/hone-bench-pair). ROUNDS (default 3).
# The models are SmolLM2-135M-shaped random models (hone models synth), bf16 and f32.
set -eu
cd "$(dirname "$0")/../.."
old=$1
new=${2:-}
WORK=${WORK:-/tmp/hone-bench-pair}
ROUNDS=${ROUNDS:-3}
mkdir -p "$WORK/models"
build() { # build DIR: the test binaries and hone of the tree in DIR
  (cd "$1" && go test -c -o "$WORK/$2-chat.test" ./cmd/hone && go test -c -o "$WORK/$2-train.test" ./internal/train &&
    go build -o "$WORK/$2-hone" ./cmd/hone)
}
rm -rf "$WORK/old-tree" && git worktree add -q --detach "$WORK/old-tree" "$old"
build "$WORK/old-tree" old
git worktree remove --force "$WORK/old-tree"
if [ -n "$new" ]; then
  rm -rf "$WORK/new-tree" && git worktree add -q --detach "$WORK/new-tree" "$new"
  build "$WORK/new-tree" new
  git worktree remove --force "$WORK/new-tree"
else
  build . new
fi
for m in smollm2-bf16:smollm2-135m:bf16 smollm2-135m-f32:smollm2-135m:f32 smollm2-135m-bf16:smollm2-135m:bf16; do
  name=${m%%:*}; rest=${m#*:}; preset=${rest%%:*}; dtype=${rest#*:}
  [ -d "$WORK/models/$name" ] || "$WORK/new-hone" models synth --preset "$preset" --dtype "$dtype" --out "$WORK/models/$name" >/dev/null
done
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) flags: $(grep -m1 flags /proc/cpuinfo | grep -o 'avx512[a-z_0-9]*\|amx[a-z_0-9]*\|avx2' | sort -u | tr '\n' ' ')"
for round in $(seq "$ROUNDS"); do
  for which in old new; do
    echo "== round $round $which"
    (cd cmd/hone && HONE_BENCH_MODELS="$WORK/models" GOMAXPROCS=2 "$WORK/$which-chat.test" -test.run XXX \
      -test.bench 'BenchmarkChatServing/streams=(1|16)$' -test.benchtime 3x | grep Benchmark)
    (cd internal/train && HONE_BENCH_MODELS="$WORK/models" GOMAXPROCS=2 "$WORK/$which-train.test" -test.run XXX \
      -test.bench 'BenchmarkSFTStep/smollm2-135m-(f32|bf16)$' -test.benchtime 5x | grep Benchmark)
  done
done

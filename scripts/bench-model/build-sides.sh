# Sourced by before-after.sh and prefill-sft-before-after.sh: reads BEFORE and AFTER (commits),
# PKGS (packages under internal/) and BENCH_FILES (AFTER's benchmark files, laid over BEFORE's so
# that both sides run the same harness); sets W, TW, R and OUT, a new directory holding each
# side's source (OUT/before, OUT/after) and test binaries (OUT/SIDE-PKG.test).
W=${WORK:-/tmp/hone-bench-model}
TW=${TRAIN_WORK:-/tmp/hone-train-bench}
R=${R:-3}
OUT=$(mktemp -d /tmp/hone-before-after.XXXXXX)
for side in before:$BEFORE after:$AFTER; do
	name=${side%%:*} rev=${side#*:}
	mkdir -p "$OUT/$name"
	git archive "$rev" | tar -x -C "$OUT/$name"
	# shellcheck disable=SC2086 # a list of paths
	git archive "$AFTER" $BENCH_FILES | tar -x -C "$OUT/$name"
	for p in $PKGS; do
		(cd "$OUT/$name" && go test -c -o "$OUT/$name-$p.test" "./internal/$p")
	done
done

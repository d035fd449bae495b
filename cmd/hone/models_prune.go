package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

const modelsPruneUsage = `usage: hone models prune --model ENTITY/PROJECT/NAME [--metric val/reward] [--keep-best N]

Deletes every checkpoint of the model except the latest and the N best by the metric (higher
is better; a checkpoint's metrics are its training metrics and those POST …/log records, such
as val/reward), with their files, as ART's delete_checkpoints does. Nothing is deleted when no
checkpoint has the metric.
`

func runModelsPrune(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "models prune"
	fs := newFlagSet(name)
	co := clientFlags(fs)
	modelRef := fs.String("model", "", "ENTITY/PROJECT/NAME (or id) of the model (required)")
	metric := fs.String("metric", "val/reward", "checkpoint metric to keep the best by (higher is better)")
	keepBest := fs.Int("keep-best", 1, "how many of the best checkpoints to keep (besides the latest)")
	if code, ok := flagsOnly(name, modelsPruneUsage, fs, fs.Parse(args), stdout, stderr); !ok {
		return code
	}
	if *modelRef == "" {
		fmt.Fprintf(stderr, "hone %s: --model ENTITY/PROJECT/NAME is required\n", name)
		return 2
	}
	fail := failer(name, stderr)
	c, err := newClient(co)
	if err != nil {
		return fail(err)
	}
	res, err := c.PruneCheckpoints(ctx, *modelRef, *metric, *keepBest)
	if err != nil {
		return fail(err)
	}
	steps := func(xs []int) string {
		if len(xs) == 0 {
			return "none"
		}
		var s []string
		for _, x := range xs {
			s = append(s, fmt.Sprint(x))
		}
		return strings.Join(s, ", ")
	}
	fmt.Fprintf(stdout, "deleted %d checkpoint(s) of %s: steps %s\n", len(res.DeletedSteps), *modelRef, steps(res.DeletedSteps))
	latest := 0
	if len(res.KeptSteps) > 0 {
		latest = slices.Max(res.KeptSteps)
	}
	fmt.Fprintf(stdout, "kept steps %s (best by %s: %s; latest: %d)\n", steps(res.KeptSteps), *metric, steps(res.BestSteps), latest)
	return 0
}

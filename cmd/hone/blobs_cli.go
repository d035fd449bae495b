package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/quota"
)

func init() {
	register("blobs", "the shared blob store on PostgreSQL: gc (delete blobs nothing references)", func(args []string) int {
		return runBlobs(context.Background(), args, os.Stdout, os.Stderr)
	})
}

const blobsUsage = `usage:
  hone blobs gc --db postgres://... [--data DIR] [--grace 1h]
      delete the blobs (checkpoint, base model, upload and W&B files) that nothing references any
      more and that were last stored more than --grace ago; safe while nodes run; then set
      each entity's count for --entity-quota to the files it stores, and print it
`

func runBlobs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "gc" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, blobsUsage)
			return 0
		}
		fmt.Fprint(stderr, blobsUsage)
		return 2
	}
	const name = "blobs gc"
	fs := newFlagSet(name)
	dataDir := fs.String("data", "./hone-data", "data directory (this machine's blob cache)")
	dsn := fs.String("db", "", "the shared store: a postgres:// URL (required)")
	grace := fs.Duration("grace", time.Hour, "keep blobs stored more recently than this (a checkpoint being written)")
	pos, err := parseInterleaved(fs, args[1:])
	if code, ok := flagError(name, blobsUsage, fs, err, stdout, stderr); !ok {
		return code
	}
	if len(pos) != 0 || *dsn == "" || *grace < time.Minute {
		fmt.Fprintf(stderr, "hone %s: --db is required and --grace at least 1m\n%s", name, blobsUsage)
		return 2
	}
	fail := failer(name, stderr)
	store, blobs, reg, err := openSharedRegistry(ctx, *dataDir, *dsn, "blobs are kept in a shared PostgreSQL store (--db postgres://...)")
	if err != nil {
		return fail(err)
	}
	defer store.Close()
	refs, err := reg.BlobRefs(ctx)
	if err != nil {
		return fail(err)
	}
	n, size, err := blobs.Remote.(*blob.DB).GC(ctx, *grace, refs...)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "deleted %d unreferenced blob(s), %s\n", n, humanize.IBytes(uint64(size)))
	// The quota's ledger (--entity-quota) becomes what the names hold: files stored before
	// it existed are counted, and a charge lost to a failure is made good.
	usage, err := blobs.Remote.(*blob.DB).EntityBytes(ctx)
	if err != nil {
		return fail(err)
	}
	if err := quota.Set(ctx, store, usage); err != nil {
		return fail(err)
	}
	for _, e := range slices.Sorted(maps.Keys(usage)) {
		fmt.Fprintf(stdout, "entity %s stores %s of files (the quota's count)\n", e, humanize.IBytes(uint64(usage[e])))
	}
	return 0
}

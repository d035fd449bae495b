package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/dustin/go-humanize"

	"github.com/honeai/hone/internal/registry"
)

const modelsStoreUsage = `usage:
  hone models register   --db postgres://... [--data DIR] [--replace] NAME PATH|REF
                         (store a Hugging Face directory or a .gguf file, or a model pulled by its
                          reference hf:OWNER/REPO or ollama:NAME (hone pull), in the shared store as base
                          model NAME: every hone serve and hone worker on that store loads it, at start
                          or within --base-model-poll)
  hone models registered --db postgres://... [--data DIR]        list the registered base models
  hone models unregister --db postgres://... [--data DIR] NAME   remove one (nodes drop it at restart)
DIR (default ./hone-data) keeps this machine's cache of the store's blobs.
`

// runModelsStore is `hone models register|registered|unregister`: base models by name in a
// shared (PostgreSQL) store.
func runModelsStore(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	name := "models " + sub
	fs := newFlagSet(name)
	dataDir := fs.String("data", "./hone-data", "data directory (this machine's blob cache)")
	dsn := fs.String("db", "", "the shared store: a postgres:// URL (required)")
	replace := fs.Bool("replace", false, "register: replace a base model of that name")
	pos, err := parseInterleaved(fs, args)
	if code, ok := flagError(name, modelsStoreUsage, fs, err, stdout, stderr); !ok {
		return code
	}
	want := map[string]int{"register": 2, "registered": 0, "unregister": 1}[sub]
	if len(pos) != want || *dsn == "" {
		fmt.Fprintf(stderr, "hone %s: wrong arguments\n%s", name, modelsStoreUsage)
		return 2
	}
	fail := failer(name, stderr)
	store, _, reg, err := openSharedRegistry(ctx, *dataDir, *dsn, "base models are registered in a shared PostgreSQL store (--db postgres://...); with SQLite serve a directory with --model NAME=DIR")
	if err != nil {
		return fail(err)
	}
	defer store.Close()
	switch sub {
	case "register":
		src, err := pullPath(ctx, pos[1], stderr) // pull.go: PATH may be hf:... or ollama:...
		if err != nil {
			return fail(err)
		}
		b, err := reg.RegisterBase(ctx, pos[0], src, *replace)
		if errors.Is(err, registry.ErrExists) {
			return fail(fmt.Errorf("a base model %s is registered already (--replace replaces it)", pos[0]))
		}
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "registered base model %s (%d files, %s); nodes load it when they start\n", b.Name, b.Files, humanize.IBytes(uint64(b.Bytes)))
	case "unregister":
		if err := reg.UnregisterBase(ctx, pos[0]); err != nil {
			if errors.Is(err, registry.ErrNotFound) {
				return fail(fmt.Errorf("no base model %s is registered", pos[0]))
			}
			return fail(err)
		}
		fmt.Fprintf(stdout, "unregistered base model %s\n", pos[0])
	default:
		list, err := reg.BaseModels(ctx)
		if err != nil {
			return fail(err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tFILES\tSIZE\tREGISTERED")
		for _, b := range list {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", b.Name, b.Files, humanize.IBytes(uint64(b.Bytes)), b.CreatedAt)
		}
		tw.Flush()
	}
	return 0
}

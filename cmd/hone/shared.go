package main

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/registry"
)

// Several nodes on one PostgreSQL (docs/deploy.md): what one node writes that another must
// read (checkpoint files, uploaded training files) is kept as blobs in the database, and the
// data directory holds only this node's cache of them, under DIR/cache. With SQLite
// everything stays in the data directory as before.

// sharedBlobs returns the node's cache of the shared blob store on a PostgreSQL store, nil on
// SQLite.
func sharedBlobs(ctx context.Context, d *db.DB, dataDir string, log *slog.Logger) (*blob.Cache, error) {
	if d.Dialect() != db.Postgres {
		return nil, nil
	}
	remote := blob.NewDB(d)
	if err := remote.Migrate(ctx); err != nil {
		return nil, err
	}
	return &blob.Cache{Remote: remote, Dir: blob.Dir{Root: filepath.Join(dataDir, "cache", "blobs")}, Log: log}, nil
}

// openRegistry opens the model registry: checkpoints under DIR/checkpoints, or, with shared
// blobs, as blobs put together under DIR/cache/checkpoints (DIR/checkpoints is then only
// where a trainer writes a checkpoint before it is stored).
func openRegistry(ctx context.Context, d *db.DB, dataDir string, blobs *blob.Cache) (*registry.Registry, error) {
	reg, err := registry.New(ctx, d, filepath.Join(dataDir, "checkpoints"))
	if err != nil || blobs == nil {
		return reg, err
	}
	return reg, reg.UseBlobs(ctx, blobs, filepath.Join(dataDir, "cache", "checkpoints"))
}

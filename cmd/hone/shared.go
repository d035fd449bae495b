package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/serving"
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
	removeStaleTemps(filepath.Join(dataDir, "cache"), log)
	return &blob.Cache{Remote: remote, Dir: blob.Dir{Root: filepath.Join(dataDir, "cache", "blobs")}, Log: log}, nil
}

// staleTemp is how old a temporary file or directory of the cache must be before a start
// removes it: another process on the same directory (a worker beside hone serve) may be
// writing a younger one.
const staleTemp = time.Hour

// removeStaleTemps removes what an interrupted write left in the cache: .tmp-* under
// cache/blobs, cache/checkpoints and cache/models, older than staleTemp.
func removeStaleTemps(cache string, log *slog.Logger) {
	for _, sub := range []string{"blobs", "checkpoints", "models"} {
		leftovers, _ := filepath.Glob(filepath.Join(cache, sub, ".tmp-*"))
		for _, p := range leftovers {
			if fi, err := os.Lstat(p); err == nil && time.Since(fi.ModTime()) > staleTemp {
				if log != nil {
					log.Info("removing an interrupted write from the cache", "path", p)
				}
				os.RemoveAll(p)
			}
		}
	}
}

// openRegistry opens the model registry: checkpoints under DIR/checkpoints, or, with shared
// blobs, as blobs put together under DIR/cache/checkpoints (DIR/checkpoints is then only
// where a trainer writes a checkpoint before it is stored).
func openRegistry(ctx context.Context, d *db.DB, dataDir string, blobs *blob.Cache) (*registry.Registry, error) {
	reg, err := registry.New(ctx, d, filepath.Join(dataDir, "checkpoints"))
	if err != nil || blobs == nil {
		return reg, err
	}
	return reg, reg.UseBlobs(ctx, blobs, filepath.Join(dataDir, "cache"))
}

// loadRegistered loads the base models registered in the shared store (`hone models
// register`), each from the node's cache, so that every node serves (and trains) the same
// base models by name. A --model of a registered name is refused: two nodes could otherwise
// serve different weights under one name.
func (s *system) loadRegistered(ctx context.Context, opts serving.LoadOptions, now int64) error {
	if s.blobs == nil {
		return nil
	}
	list, err := s.reg.BaseModels(ctx)
	if err != nil {
		return fmt.Errorf("registered base models: %w", err)
	}
	for _, b := range list {
		if _, ok := s.models.Get(b.Name); ok {
			return fmt.Errorf("--model %s: a base model %s is registered in the store, which every node serves; drop the flag, or give another name", b.Name, b.Name)
		}
		if err := s.loadBase(ctx, b, opts, now); err != nil {
			return err
		}
	}
	return nil
}

// loadBase loads one registered base model from the node's cache and serves it.
func (s *system) loadBase(ctx context.Context, b registry.BaseModel, opts serving.LoadOptions, now int64) error {
	path, err := s.reg.BasePath(ctx, b)
	if err != nil {
		return err
	}
	m, err := s.loadServed(b.Name, path, opts, now, true)
	if err != nil {
		return fmt.Errorf("registered base model %s: %w", b.Name, err)
	}
	s.setToolParser(m)
	s.reportMemory(m)
	s.models.Add(m)
	s.loaded.Store(b.Name, b.ID)
	return nil
}

// watchBaseModels loads, every --base-model-poll until ctx ends, the base models registered
// in the shared store since the node started, so that every node serves the same names
// without a restart. A name registered again (--replace) or unregistered is logged: the node
// keeps what it loaded until it restarts.
func (s *system) watchBaseModels(ctx context.Context) {
	every := s.cfg.BaseModelPoll
	if s.blobs == nil || every <= 0 {
		return
	}
	s.workers.Add(1)
	go func() {
		defer s.workers.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		warned := map[string]bool{}
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			list, err := s.reg.BaseModels(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("registered base models: not listed", "err", err)
				}
				continue
			}
			for _, b := range list {
				id, seen := s.loaded.Load(b.Name)
				if _, served := s.models.Get(b.Name); served || seen {
					if seen && id != b.ID && !warned[b.ID] {
						warned[b.ID] = true
						s.log.Warn("a base model this node serves was registered again; restart the node to load it", "model", b.Name)
					}
					continue
				}
				if err := s.loadBase(ctx, b, s.baseOpts, time.Now().Unix()); err != nil {
					s.log.Error("registered base model: not loaded", "model", b.Name, "err", err)
					continue
				}
				s.log.Info("loaded a newly registered base model", "model", b.Name)
			}
		}
	}()
}

// registeredBaseDir is where this machine's copy of a registered base model is ("" when
// no base model of that name is registered).
func registeredBaseDir(ctx context.Context, reg *registry.Registry, name string) (string, error) {
	list, err := reg.BaseModels(ctx)
	if err != nil {
		return "", err
	}
	for _, b := range list {
		if b.Name == name {
			return reg.BasePath(ctx, b)
		}
	}
	return "", nil
}

// openSharedRegistry opens the shared store of a command that works on blobs only (`hone blobs
// gc`, `hone models register`): the store, its blob cache and the registry; needs says what
// needs PostgreSQL when dsn names another store. The caller closes the store.
func openSharedRegistry(ctx context.Context, dataDir, dsn, needs string) (*db.DB, *blob.Cache, *registry.Registry, error) {
	store, _, err := openStore(ctx, dataDir, dsn)
	if err != nil {
		return nil, nil, nil, err
	}
	blobs, err := sharedBlobs(ctx, store, dataDir, nil)
	if err == nil && blobs == nil {
		err = errors.New(needs)
	}
	if err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	reg, err := openRegistry(ctx, store, dataDir, blobs)
	if err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	return store, blobs, reg, nil
}

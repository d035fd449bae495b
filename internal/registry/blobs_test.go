package registry

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// Two nodes on one store, each with its own data directory: a checkpoint written on one is
// read on the other from the blobs, never from the writer's directory (removed before the
// read); a step written again is read anew; a checkpoint whose files could not all be
// stored is never visible.
func TestCheckpointBlobsAcrossNodes(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		remote := blob.NewDB(d)
		if err := remote.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		node := func() (*Registry, string) {
			dir := t.TempDir()
			r, err := New(ctx, d, filepath.Join(dir, "checkpoints"))
			if err != nil {
				t.Fatal(err)
			}
			c := &blob.Cache{Remote: remote, Dir: blob.Dir{Root: filepath.Join(dir, "cache", "blobs")}}
			if err := r.UseBlobs(ctx, c, filepath.Join(dir, "cache")); err != nil {
				t.Fatal(err)
			}
			return r, dir
		}
		a, dirA := node()
		b, _ := node()
		m, _, err := a.Create(ctx, Model{Entity: "e", Project: "p", Name: "m", BaseModel: "demo"}, false)
		if err != nil {
			t.Fatal(err)
		}
		write := func(r *Registry, step int, content string) {
			t.Helper()
			dir := r.CheckpointDir(m.ID, step)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"adapter_model.safetensors", "adapter_config.json"} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(content+f), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		write(a, 1, "one")
		if _, err := a.AddCheckpoint(ctx, m.ID, 1, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(a.CheckpointDir(m.ID, 1)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the writer's scratch directory is left: %v", err)
		}
		if err := os.RemoveAll(dirA); err != nil { // nothing of A's disk can be read by B
			t.Fatal(err)
		}
		p, err := b.CheckpointPath(ctx, m.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(p, "adapter_config.json")); string(got) != "oneadapter_config.json" {
			t.Fatalf("read on B: %q", got)
		}

		// Step 1 deleted and written again: B answers the new files, not its copy.
		if _, _, err := a.DeleteCheckpoints(ctx, m.ID, []int{1}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CheckpointPath(ctx, m.ID, 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a deleted checkpoint: %v", err)
		}
		write(a, 1, "again")
		if _, err := a.AddCheckpoint(ctx, m.ID, 1, nil); err != nil {
			t.Fatal(err)
		}
		p2, err := b.CheckpointPath(ctx, m.ID, 1)
		if err != nil || p2 == p {
			t.Fatalf("rewritten step: %s (was %s), %v", p2, p, err)
		}
		if got, _ := os.ReadFile(filepath.Join(p2, "adapter_config.json")); string(got) != "againadapter_config.json" {
			t.Fatalf("rewritten step read on B: %q", got)
		}
		var orphans int
		if err := d.QueryRow(ctx, `SELECT COUNT(*) FROM train_checkpoint_files WHERE checkpoint_id NOT IN (SELECT id FROM train_checkpoints)`).Scan(&orphans); err != nil || orphans != 0 {
			t.Fatalf("file rows of deleted checkpoints: %d %v", orphans, err)
		}

		// A store that fails on the second file: no checkpoint row, nothing visible.
		a.blobs = &failSecond{BlobCache: a.blobs}
		write(a, 2, "two")
		if _, err := a.AddCheckpoint(ctx, m.ID, 2, nil); err == nil {
			t.Fatal("a checkpoint whose files failed to store was recorded")
		}
		if c, err := b.Latest(ctx, m.ID); err != nil || c.Step != 1 {
			t.Fatalf("latest after a failed store: %+v %v (want step 1)", c, err)
		}
		if _, err := b.CheckpointPath(ctx, m.ID, 2); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a half-stored checkpoint: %v", err)
		}
	})
}

type failSecond struct {
	BlobCache
	n int
}

func (f *failSecond) PutFile(ctx context.Context, path string) (blob.Info, error) {
	f.n++
	if f.n == 2 {
		return blob.Info{}, errors.New("connection lost")
	}
	return f.BlobCache.PutFile(ctx, path)
}

// A base model registered through one node (a directory with a subdirectory, and a GGUF
// file) is listed and put together on another, whose source is gone; registering the name
// again needs replace and gives a new id; a registry without blobs refuses.
func TestBaseModelsAcrossNodes(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		remote := blob.NewDB(d)
		if err := remote.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		node := func() *Registry {
			dir := t.TempDir()
			r, err := New(ctx, d, filepath.Join(dir, "checkpoints"))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.UseBlobs(ctx, &blob.Cache{Remote: remote, Dir: blob.Dir{Root: filepath.Join(dir, "cache", "blobs")}}, filepath.Join(dir, "cache")); err != nil {
				t.Fatal(err)
			}
			return r
		}
		a, b := node(), node()
		src := t.TempDir()
		os.MkdirAll(filepath.Join(src, "sub"), 0o755)
		os.WriteFile(filepath.Join(src, "config.json"), []byte(`{"a":1}`), 0o644)
		os.WriteFile(filepath.Join(src, "sub", "x.bin"), []byte("xx"), 0o644)
		gguf := filepath.Join(t.TempDir(), "m.gguf")
		os.WriteFile(gguf, []byte("GGUF"), 0o644)
		m1, err := a.RegisterBase(ctx, "hf", src, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.RegisterBase(ctx, "g", gguf, false); err != nil {
			t.Fatal(err)
		}
		if _, err := a.RegisterBase(ctx, "hf", src, false); !errors.Is(err, ErrExists) {
			t.Fatalf("registered twice: %v", err)
		}
		if _, err := a.RegisterBase(ctx, "bad/name", src, false); err == nil {
			t.Fatal("a name with '/' was registered")
		}
		os.RemoveAll(src)
		os.Remove(gguf)
		list, err := b.BaseModels(ctx)
		if err != nil || len(list) != 2 || list[0].Name != "g" || list[1].Name != "hf" || list[1].Files != 2 || list[1].Bytes != 9 {
			t.Fatalf("listed on B: %+v %v", list, err)
		}
		p, err := b.BasePath(ctx, list[1])
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(p, "sub", "x.bin")); string(got) != "xx" {
			t.Fatalf("a file of the directory on B: %q", got)
		}
		p, err = b.BasePath(ctx, list[0])
		if got, _ := os.ReadFile(p); err != nil || filepath.Base(p) != "m.gguf" || string(got) != "GGUF" {
			t.Fatalf("the GGUF file on B: %s %q %v", p, got, err)
		}
		src2 := t.TempDir()
		os.WriteFile(filepath.Join(src2, "config.json"), []byte(`{"a":2}`), 0o644)
		m2, err := a.RegisterBase(ctx, "hf", src2, true)
		if err != nil || m2.ID == m1.ID {
			t.Fatalf("replace: %+v %v", m2, err)
		}
		if err := b.UnregisterBase(ctx, "g"); err != nil {
			t.Fatal(err)
		}
		if list, _ := a.BaseModels(ctx); len(list) != 1 || list[0].ID != m2.ID {
			t.Fatalf("after replace and unregister: %+v", list)
		}
		plain, err := New(ctx, d, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := plain.BaseModels(ctx); !errors.Is(err, ErrNoBlobs) {
			t.Fatalf("without blobs: %v", err)
		}
	})
}

// GC with the registry's references: a deleted checkpoint's own blobs go, a live
// checkpoint's and a base model's stay and are read by a fresh node.
func TestBlobGCKeepsReferenced(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		remote := blob.NewDB(d)
		if err := remote.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		node := func() *Registry {
			dir := t.TempDir()
			r, err := New(ctx, d, filepath.Join(dir, "checkpoints"))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.UseBlobs(ctx, &blob.Cache{Remote: remote, Dir: blob.Dir{Root: filepath.Join(dir, "cache", "blobs")}}, filepath.Join(dir, "cache")); err != nil {
				t.Fatal(err)
			}
			return r
		}
		a := node()
		m, _, _ := a.Create(ctx, Model{Entity: "e", Project: "p", Name: "m", BaseModel: "demo"}, false)
		for step, content := range map[int]string{1: "one", 2: "two"} {
			dir := a.CheckpointDir(m.ID, step)
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "adapter_model.safetensors"), []byte(content), 0o644)
			os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte("{}"), 0o644) // shared by both
			if _, err := a.AddCheckpoint(ctx, m.ID, step, nil); err != nil {
				t.Fatal(err)
			}
		}
		src := t.TempDir()
		os.WriteFile(filepath.Join(src, "config.json"), []byte("base"), 0o644)
		if _, err := a.RegisterBase(ctx, "b", src, false); err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.DeleteCheckpoints(ctx, m.ID, []int{1}); err != nil {
			t.Fatal(err)
		}
		refs, err := a.BlobRefs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n, size, err := remote.GC(ctx, 0, refs...)
		if err != nil || n != 1 || size != 3 {
			t.Fatalf("gc: %d blobs, %d bytes, %v; want step 1's own file", n, size, err)
		}
		fresh := node()
		p, err := fresh.CheckpointPath(ctx, m.ID, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(p, "adapter_config.json")); string(got) != "{}" {
			t.Fatalf("the shared file of step 2: %q", got)
		}
		list, _ := fresh.BaseModels(ctx)
		if p, err := fresh.BasePath(ctx, list[0]); err != nil {
			t.Fatal(err)
		} else if got, _ := os.ReadFile(filepath.Join(p, "config.json")); string(got) != "base" {
			t.Fatalf("the base model's file: %q", got)
		}
	})
}

// A node's damaged copy of a checkpoint (its cached blob and so the assembled file, one
// inode) is found by the next process on that directory and replaced from the store.
func TestDamagedCachedCheckpointRepaired(t *testing.T) {
	d := dbtest.Postgres(t)
	ctx := context.Background()
	remote := blob.NewDB(d)
	if err := remote.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	open := func() *Registry {
		r, err := New(ctx, d, filepath.Join(dir, "checkpoints"))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.UseBlobs(ctx, &blob.Cache{Remote: remote, Dir: blob.Dir{Root: filepath.Join(dir, "cache", "blobs")}}, filepath.Join(dir, "cache")); err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := open()
	m, _, _ := r.Create(ctx, Model{Entity: "e", Project: "p", Name: "m", BaseModel: "demo"}, false)
	ck := r.CheckpointDir(m.ID, 1)
	os.MkdirAll(ck, 0o755)
	os.WriteFile(filepath.Join(ck, "adapter_model.safetensors"), []byte("weights"), 0o644)
	if _, err := r.AddCheckpoint(ctx, m.ID, 1, nil); err != nil {
		t.Fatal(err)
	}
	p, err := r.CheckpointPath(ctx, m.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(p, "adapter_model.safetensors")
	os.Chmod(f, 0o644)
	if err := os.WriteFile(f, []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	p2, err := open().CheckpointPath(ctx, m.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(p2, "adapter_model.safetensors")); string(got) != "weights" {
		t.Fatalf("the damaged copy was answered: %q", got)
	}
}

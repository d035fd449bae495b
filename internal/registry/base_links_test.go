package registry

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// TestBaseModelFromSnapshot registers a directory whose files are links to blobs, as a
// Hugging Face cache snapshot (hone pull) has them: the files register, not the links.
func TestBaseModelFromSnapshot(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		remote := blob.NewDB(d)
		if err := remote.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		r, err := New(ctx, d, filepath.Join(dir, "checkpoints"))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.UseBlobs(ctx, &blob.Cache{Remote: remote, Dir: blob.Dir{Root: filepath.Join(dir, "cache", "blobs")}}, filepath.Join(dir, "cache")); err != nil {
			t.Fatal(err)
		}
		repo := t.TempDir()
		os.MkdirAll(filepath.Join(repo, "blobs"), 0o755)
		os.MkdirAll(filepath.Join(repo, "snapshots", "c1"), 0o755)
		os.WriteFile(filepath.Join(repo, "blobs", "aaa"), []byte(`{"a":1}`), 0o644)
		os.WriteFile(filepath.Join(repo, "blobs", "bbb"), []byte("weights"), 0o644)
		os.Symlink(filepath.Join("..", "..", "blobs", "aaa"), filepath.Join(repo, "snapshots", "c1", "config.json"))
		os.Symlink(filepath.Join("..", "..", "blobs", "bbb"), filepath.Join(repo, "snapshots", "c1", "model.safetensors"))
		os.Symlink(filepath.Join("..", "..", "blobs", "gone"), filepath.Join(repo, "snapshots", "c1", "dangling"))
		b, err := r.RegisterBase(ctx, "pulled", filepath.Join(repo, "snapshots", "c1"), false)
		if err != nil || b.Files != 2 || b.Bytes != 14 {
			t.Fatalf("%+v %v", b, err)
		}
		p, err := r.BasePath(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(p, "model.safetensors")); string(got) != "weights" {
			t.Fatalf("%q", got)
		}
	})
}

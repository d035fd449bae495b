package wandb

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// An artifact logged through one node is resolved, file by file, on another node sharing the
// store, from the blobs: the first node's directory is removed before the second reads.
func TestArtifactAcrossNodes(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		remote := blob.NewDB(d)
		if err := remote.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		node := func() (*Service, string) {
			dir := t.TempDir()
			s, err := Open(ctx, d, filepath.Join(dir, "files"))
			if err != nil {
				t.Fatal(err)
			}
			s.UseBlobs(&blob.Cache{Remote: remote, Dir: blob.Dir{Root: filepath.Join(dir, "cache")}})
			return s, dir
		}
		a, dirA := node()
		b, _ := node()
		logOne(t, a, "e", "p", "data", "train.jsonl", []byte(`{"messages":[]}`+"\n"))
		if err := os.RemoveAll(dirA); err != nil {
			t.Fatal(err)
		}
		p, err := b.ResolveFile(ctx, "e", "p", "data:latest", "train.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); string(got) != `{"messages":[]}`+"\n" {
			t.Fatalf("read on the other node: %q", got)
		}
		if _, err := b.BlobPath("other", "00000000000000000000000000000000"); err != ErrNotFound {
			t.Fatalf("unknown blob: %v", err)
		}
	})
}

package training

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/fault"
)

// An upload through one node is checked and read on another (whose sibling directory is
// gone); another entity does not see it; an upload kept on disk before the blob store is
// still found.
func TestSharedUploads(t *testing.T) {
	d := dbtest.Postgres(t)
	ctx := context.Background()
	remote := blob.NewDB(d)
	if err := remote.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	node := func() (*Service, string) {
		dir := t.TempDir()
		return &Service{FilesDir: filepath.Join(dir, "files"), Blobs: &blob.Cache{Remote: remote, Dir: blob.Dir{Root: filepath.Join(dir, "cache")}}}, dir
	}
	a, dirA := node()
	b, dirB := node()
	up, err := a.SaveUploadContext(ctx, "e", []byte(sftLines))
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dirA)
	if err := b.checkDataURL(ctx, "e", up.URL); err != nil {
		t.Fatalf("check on B: %v", err)
	}
	if got, err := b.readData(ctx, "e", up.URL); err != nil || string(got) != sftLines {
		t.Fatalf("read on B: %q %v", got, err)
	}
	if err := b.checkDataURL(ctx, "other", up.URL); !fault.Is(err, fault.KindNotFound) {
		t.Fatalf("another entity's upload: %v", err)
	}
	legacy := filepath.Join(dirB, "files", "e", "file-0123abcd.jsonl")
	os.MkdirAll(filepath.Dir(legacy), 0o755)
	os.WriteFile(legacy, []byte(sftLines), 0o644)
	if got, err := b.readData(ctx, "e", "hone-file:///file-0123abcd"); err != nil || string(got) != sftLines {
		t.Fatalf("an upload from before the blob store: %q %v", got, err)
	}
}

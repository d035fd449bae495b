package trace

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db/dbtest"
)

// A file created through one node is read through another, from the blobs (the first
// node's cache removed); a file stored in trace_files before the blob store is still read;
// another project does not see it.
func TestFilesAcrossNodes(t *testing.T) {
	d := dbtest.Postgres(t)
	ctx := context.Background()
	st := NewSQLStore(d)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	remote := blob.NewDB(d)
	if err := remote.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	node := func() (*Service, string) {
		dir := t.TempDir()
		return NewService(WithFileBlobs(st, &blob.Cache{Remote: remote, Dir: blob.Dir{Root: dir}})), dir
	}
	a, dirA := node()
	b, _ := node()
	content := bytes.Repeat([]byte("trace file "), 200_000) // 2.2 MB: three chunks
	res, err := a.FileCreate(ctx, "e/p", "f.txt", content, "")
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dirA)
	got, err := b.FileContent(ctx, FileContentReadReq{ProjectID: "e/p", Digest: res.Digest})
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("read on B: %d bytes, %v", len(got), err)
	}
	if _, err := b.FileContent(ctx, FileContentReadReq{ProjectID: "e/other", Digest: res.Digest}); err == nil {
		t.Fatal("another project read the file")
	}
	var rows int
	d.QueryRow(ctx, `SELECT COUNT(*) FROM trace_files`).Scan(&rows)
	if rows != 0 {
		t.Fatalf("%d trace_files rows: the file was stored whole in a row", rows)
	}
	old := []byte("stored before")
	if err := st.PutFile(ctx, "e/p", BytesDigest(old), "old", old, "2025-01-01T00:00:00.000000Z"); err != nil {
		t.Fatal(err)
	}
	if got, err := b.FileContent(ctx, FileContentReadReq{ProjectID: "e/p", Digest: BytesDigest(old)}); err != nil || !bytes.Equal(got, old) {
		t.Fatalf("a file from before the blob store: %q %v", got, err)
	}
}

package trace

import (
	"bytes"
	"context"
	"errors"
	"os"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db"
)

// FileBlobs is the blob store (blob.Cache) trace files are kept in when several nodes share
// one PostgreSQL: a file is a blob in 1 MiB chunks, named by its digest in the namespace
// "trace/<project>", instead of one row of trace_files.
type FileBlobs = blob.Files

// WithFileBlobs returns st with its files kept in b; files stored in st before are still
// read from it. Every other method (the optional ones such as TableSorter included) is st's.
func WithFileBlobs(st *SQLStore, b FileBlobs) Store { return blobFiles{SQLStore: st, b: b} }

type blobFiles struct {
	*SQLStore
	b FileBlobs
}

func fileNamespace(project string) string { return "trace/" + project }

func (f blobFiles) PutFile(ctx context.Context, project, digest, name string, content []byte, at string) error {
	// The blob and its name in one transaction: no blob is left without its name.
	_, err := f.b.PutWith(ctx, bytes.NewReader(content), func(tx *db.Tx, info blob.Info) error {
		_, err := blob.NameTx(ctx, tx, fileNamespace(project), digest, info)
		return err
	})
	return err
}

func (f blobFiles) HasFile(ctx context.Context, project, digest string) (bool, error) {
	_, err := f.b.Lookup(ctx, fileNamespace(project), digest)
	if errors.Is(err, blob.ErrNotFound) {
		return f.SQLStore.HasFile(ctx, project, digest) // stored before the blob store
	}
	return err == nil, err
}

func (f blobFiles) GetFile(ctx context.Context, project, digest string) ([]byte, error) {
	info, err := f.b.Lookup(ctx, fileNamespace(project), digest)
	if errors.Is(err, blob.ErrNotFound) {
		return f.SQLStore.GetFile(ctx, project, digest) // stored before the blob store
	}
	if err != nil {
		return nil, err
	}
	p, err := f.b.Path(ctx, info.Hash)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

var _ TableSorter = blobFiles{} // the sorted-table cache still finds the SQL store's sorter

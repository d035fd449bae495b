package wandb

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db"
)

// SharedBlobs is the blob store (blob.Cache) artifact and run files are kept in when several
// nodes share one PostgreSQL: a file is a blob named by its MD5 (hex) in the namespace
// "wandb/<entity>", so a file uploaded through one node is downloaded, or trained on, through
// any other.
type SharedBlobs = blob.Files

// UseBlobs keeps the service's files in b instead of the files directory.
func (s *Service) UseBlobs(b SharedBlobs) { s.blobs = b }

func blobNamespace(entity string) string { return "wandb/" + entity }

// putShared stores an uploaded file (written and checked at tmp) as the blob of md5hex, with
// its name and the rows record writes (created: the name is new to the entity) in the same transaction: all of them or, whatever
// fails, none (blob.Cache.PutWith).
func (s *Service) putShared(ctx context.Context, entity, md5hex, tmp string, record func(tx *db.Tx, created bool) error) error {
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = s.blobs.PutWith(ctx, f, func(tx *db.Tx, info blob.Info) error {
		created, err := blob.NameTx(ctx, tx, blobNamespace(entity), md5hex, info)
		if err != nil {
			return err
		}
		return record(tx, created)
	})
	return err
}

// sharedPath is BlobPath with shared blobs: the node's cached copy.
func (s *Service) sharedPath(entity, md5hex string) (string, error) {
	ctx := context.Background()
	info, err := s.blobs.Lookup(ctx, blobNamespace(entity), md5hex)
	if errors.Is(err, blob.ErrNotFound) {
		// Stored before the blob store was used: on this node's disk, or nowhere.
		p := filepath.Join(s.dir, entity, "wandb", md5hex)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		return "", ErrNotFound
	}
	if err != nil {
		return "", err
	}
	return s.blobs.Path(ctx, info.Hash)
}

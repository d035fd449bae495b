package training

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/fault"
)

// SharedFiles is the blob store uploaded training files are kept in when several nodes
// share one database (blob.Cache): an upload is a blob named "<id>" in the namespace
// "upload/<entity>", readable by every node.
type SharedFiles = blob.Files

func uploadNamespace(entity string) string { return "upload/" + entity }

// saveSharedUpload stores an upload as a named blob, the blob and its name in one
// transaction (no blob left without its name when naming fails).
func (s *Service) saveSharedUpload(ctx context.Context, entity, id string, data []byte) error {
	_, err := s.Blobs.PutWith(ctx, bytes.NewReader(data), func(tx *db.Tx, info blob.Info) error {
		if _, err := blob.NameTx(ctx, tx, uploadNamespace(entity), id, info); err != nil {
			return err
		}
		return s.Quota.ChargeTx(ctx, tx, entity, info.Size, "file")
	})
	return err
}

// checkUpload refuses an upload of n bytes over MaxUpload (a 413 naming --max-upload-size)
// or past its entity's quota (a 403 naming --entity-quota), before it is written.
func (s *Service) checkUpload(ctx context.Context, entity string, n int64) error {
	if s.MaxUpload > 0 && n > s.MaxUpload {
		return fault.TooLarge("file", "the file of %d bytes is larger than the server's limit of %d bytes per upload (--max-upload-size)", n, s.MaxUpload)
	}
	return s.Quota.Check(ctx, entity, n, "file")
}

// saveLocalUpload writes an upload into FilesDir and charges it to its entity's quota; a
// charge refused (another upload took the room meanwhile) removes the file again.
func (s *Service) saveLocalUpload(ctx context.Context, entity, id string, data []byte) error {
	dir := filepath.Join(s.FilesDir, entity)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := filepath.Join(dir, id+".jsonl")
	if err := writeWhole(p, data); err != nil {
		return err
	}
	if err := s.Quota.Charge(ctx, entity, int64(len(data)), "file"); err != nil {
		os.Remove(p)
		return err
	}
	return nil
}

// sharedUploadExists checks an uploaded file in the blob store.
func (s *Service) sharedUploadExists(ctx context.Context, param, entity, id string) error {
	_, err := s.Blobs.Lookup(ctx, uploadNamespace(entity), id)
	if errors.Is(err, blob.ErrNotFound) {
		if _, lerr := os.Stat(s.localUpload(entity, id)); lerr == nil { // uploaded before the blob store
			return nil
		}
		return fault.NotFound(param, "uploaded file %s not found", id)
	}
	return err
}

// localUpload is where an upload was kept before the shared blob store (FilesDir).
func (s *Service) localUpload(entity, id string) string {
	return filepath.Join(s.FilesDir, entity, id+".jsonl")
}

// readSharedUpload reads an uploaded file from the blob store (through the node's cache).
func (s *Service) readSharedUpload(ctx context.Context, entity, id string) ([]byte, error) {
	info, err := s.Blobs.Lookup(ctx, uploadNamespace(entity), id)
	if errors.Is(err, blob.ErrNotFound) {
		return os.ReadFile(s.localUpload(entity, id)) // uploaded before the blob store
	}
	if err != nil {
		return nil, err
	}
	p, err := s.Blobs.Path(ctx, info.Hash)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// writeWhole writes data to path through a temporary file renamed into place: the file is
// whole or absent, whatever fails (a full disk, a kill).
func writeWhole(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".upload-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

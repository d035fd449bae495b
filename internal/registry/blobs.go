package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db"
)

// With a shared store (several nodes on one PostgreSQL), a checkpoint's files are blobs
// (internal/blob): AddCheckpoint stores every file of the directory the trainer wrote as a
// blob, then commits the checkpoint's row and its files' rows in one transaction, so no
// node ever sees a checkpoint whose files are not all stored. CheckpointPath gives any node a
// local directory of the checkpoint, put together from its blob cache under the checkpoint's
// id (a checkpoint written again under the same step has a new id, so a stale copy is never
// answered).

var blobMigrations = []db.Migration{{Version: 1, SQLite: `
CREATE TABLE train_checkpoint_files (
	checkpoint_id TEXT NOT NULL,
	name TEXT NOT NULL,
	hash TEXT NOT NULL,
	size INTEGER NOT NULL,
	PRIMARY KEY (checkpoint_id, name)
)`, Postgres: `
CREATE TABLE train_checkpoint_files (
	checkpoint_id TEXT NOT NULL,
	name TEXT NOT NULL,
	hash TEXT NOT NULL,
	size BIGINT NOT NULL,
	PRIMARY KEY (checkpoint_id, name)
)`}}

// BlobCache is the node's view of the shared blob store (blob.Cache).
type BlobCache interface {
	PutFile(ctx context.Context, path string) (blob.Info, error)
	Path(ctx context.Context, hash string) (string, error)
}

// UseBlobs keeps checkpoint files (and registered base models, base.go) in blobs, put
// together for reading under cacheDir (checkpoints/<checkpoint id>, models/<model id>); the
// directories of CheckpointDir become scratch space that AddCheckpoint empties.
func (r *Registry) UseBlobs(ctx context.Context, b BlobCache, cacheDir string) error {
	if err := r.db.Migrate(ctx, "registry_blobs", blobMigrations); err != nil {
		return err
	}
	r.blobs, r.cacheDir = b, cacheDir
	return nil
}

// addBlobCheckpoint stores the files under dir as blobs, then the checkpoint and its files
// in one transaction, then removes dir.
func (r *Registry) addBlobCheckpoint(ctx context.Context, modelID string, c Checkpoint, metrics string) error {
	dir := r.CheckpointDir(modelID, c.Step)
	files, err := r.putDir(ctx, dir, "checkpoint")
	if err != nil {
		return err
	}
	err = r.db.WriteTx(ctx, func(tx *db.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO train_checkpoints (model_id, step, id, metrics, created_at) VALUES (?, ?, ?, ?, ?)`,
			modelID, c.Step, c.ID, metrics, c.CreatedAt); err != nil {
			return err
		}
		for _, f := range files {
			if _, err := tx.Exec(ctx, `INSERT INTO train_checkpoint_files (checkpoint_id, name, hash, size) VALUES (?, ?, ?, ?)`,
				c.ID, f.name, f.info.Hash, f.info.Size); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// dirFile is a file of a directory stored as a blob.
type dirFile struct {
	name string
	info blob.Info
}

// putDir stores every file of dir (what: what the directory is, for errors) as a blob.
func (r *Registry) putDir(ctx context.Context, dir, what string) ([]dirFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("registry: %s files: %w", what, err)
	}
	var files []dirFile
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("registry: %s %s: %s is not a regular file", what, dir, e.Name())
		}
		info, err := r.blobs.PutFile(ctx, filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("registry: storing %s: %w", e.Name(), err)
		}
		files = append(files, dirFile{e.Name(), info})
	}
	return files, nil
}

// CheckpointPath returns a local directory holding the files of a model's checkpoint step:
// CheckpointDir without a shared blob store, else a copy put together from the node's blob
// cache (fetched from the store on first use). ErrNotFound when there is no such checkpoint.
func (r *Registry) CheckpointPath(ctx context.Context, modelID string, step int) (string, error) {
	if r.blobs == nil {
		return r.CheckpointDir(modelID, step), nil
	}
	var id string
	err := r.db.QueryRow(ctx, `SELECT id FROM train_checkpoints WHERE model_id = ? AND step = ?`, modelID, step).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: checkpoint step %d of model %s", ErrNotFound, step, modelID)
	}
	if err != nil {
		return "", err
	}
	dst := filepath.Join(r.cacheDir, "checkpoints", id)
	if r.isChecked(dst) {
		return dst, nil
	}
	names, hashes, err := r.fileList(ctx, `SELECT name, hash FROM train_checkpoint_files WHERE checkpoint_id = ? ORDER BY name`, id)
	if err != nil {
		return "", err
	}
	if len(names) == 0 { // written before the blob store was used: on this node's disk or nowhere
		return r.CheckpointDir(modelID, step), nil
	}
	if err := r.ensureAssembled(ctx, dst, names, hashes); err != nil {
		return "", fmt.Errorf("registry: checkpoint step %d: %w", step, err)
	}
	return dst, nil
}

func (r *Registry) isChecked(dst string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checked[dst]
}

// ensureAssembled makes dst hold the blobs hashes as the files names, once per process: a
// directory put together earlier (by this or an earlier process) is kept when each of its
// files is the cache's checked copy of its blob (the same file: they are hard links), and
// put together again otherwise (a damaged blob was fetched again, or links were not
// possible).
func (r *Registry) ensureAssembled(ctx context.Context, dst string, names, hashes []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.checked[dst] {
		return nil
	}
	if _, err := os.Stat(dst); err == nil {
		same := true
		for i, n := range names {
			src, err := r.blobs.Path(ctx, hashes[i]) // checks the blob, fetches it again if damaged
			if err != nil {
				return fmt.Errorf("file %s: %w", n, err)
			}
			a, err1 := os.Stat(src)
			b, err2 := os.Stat(filepath.Join(dst, filepath.FromSlash(n)))
			if err1 != nil || err2 != nil || !os.SameFile(a, b) {
				same = false
				break
			}
		}
		if !same {
			if err := os.RemoveAll(dst); err != nil {
				return err
			}
		}
	}
	if _, err := os.Stat(dst); err != nil {
		if err := r.assemble(ctx, dst, names, hashes); err != nil {
			return err
		}
	}
	if r.checked == nil {
		r.checked = map[string]bool{}
	}
	r.checked[dst] = true
	return nil
}

// fileList runs a query answering (relative path, hash) rows.
func (r *Registry) fileList(ctx context.Context, q string, args ...any) (names, hashes []string, err error) {
	rows, err := r.db.Query(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var n, h string
		if err := rows.Scan(&n, &h); err != nil {
			return nil, nil, err
		}
		names, hashes = append(names, n), append(hashes, h)
	}
	return names, hashes, rows.Err()
}

// assemble puts the blobs hashes together as the files names (relative, '/'-separated)
// of directory dst: in a temporary directory beside it, renamed whole into place, so a
// reader sees all of them or none. The files are hard links to the blob cache (read-only).
func (r *Registry) assemble(ctx context.Context, dst string, names, hashes []string) error {
	parent := filepath.Dir(dst)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-"+filepath.Base(dst)+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // gone after the rename
	for i, n := range names {
		if !filepath.IsLocal(filepath.FromSlash(n)) || strings.Contains(n, `\`) {
			return fmt.Errorf("a stored file is named %q", n)
		}
		src, err := r.blobs.Path(ctx, hashes[i])
		if err != nil {
			return fmt.Errorf("file %s: %w", n, err)
		}
		p := filepath.Join(tmp, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := linkOrCopy(src, p); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		if _, serr := os.Stat(dst); serr == nil { // another request put it together first
			return nil
		}
		return err
	}
	return nil
}

// dropFiles forgets the file rows of checkpoints that are gone (the blobs stay: other
// checkpoints may share them).
func (r *Registry) dropFiles(ctx context.Context) {
	if r.blobs == nil {
		return
	}
	_, _ = r.db.Exec(ctx, `DELETE FROM train_checkpoint_files WHERE checkpoint_id NOT IN (SELECT id FROM train_checkpoints)`)
}

// linkOrCopy hard-links src to dst, or copies it when a link is not possible.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

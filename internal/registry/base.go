package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db"
)

// Base models registered once by name in the shared store (`hone models register`): their
// files are blobs, and every node on the store loads them (BaseModels, BasePath), so every
// node serves and trains the same base models under the same names.

var baseMigrations = []db.Migration{{Version: 1, SQLite: `
CREATE TABLE base_models (
	name TEXT PRIMARY KEY,
	id TEXT NOT NULL,
	file TEXT NOT NULL,
	created_at TEXT NOT NULL
);
CREATE TABLE base_model_files (
	model_id TEXT NOT NULL,
	path TEXT NOT NULL,
	hash TEXT NOT NULL,
	size INTEGER NOT NULL,
	PRIMARY KEY (model_id, path)
)`, Postgres: `
CREATE TABLE base_models (
	name TEXT PRIMARY KEY,
	id TEXT NOT NULL,
	file TEXT NOT NULL,
	created_at TEXT NOT NULL
);
CREATE TABLE base_model_files (
	model_id TEXT NOT NULL,
	path TEXT NOT NULL,
	hash TEXT NOT NULL,
	size BIGINT NOT NULL,
	PRIMARY KEY (model_id, path)
)`}}

// BaseModel is a base model registered in the store.
type BaseModel struct {
	Name string `json:"name"`
	ID   string `json:"id"` // changes when the name is registered again
	// File is the GGUF file's name for a GGUF model, "" for a Hugging Face directory.
	File      string `json:"file,omitempty"`
	Files     int    `json:"files"`
	Bytes     int64  `json:"bytes"`
	CreatedAt string `json:"created_at"`
}

// ErrNoBlobs is returned by the base model calls of a registry without a shared blob store.
var ErrNoBlobs = errors.New("registry: base models are registered only in a shared store (PostgreSQL)")

func (r *Registry) baseReady(ctx context.Context) error {
	if r.blobs == nil {
		return ErrNoBlobs
	}
	return r.db.Migrate(ctx, "registry_base", baseMigrations)
}

// RegisterBase stores the model at src — a Hugging Face directory (every regular file under
// it) or a .gguf file — as blobs, then registers it under name in one transaction. A name
// registered already is ErrExists unless replace.
func (r *Registry) RegisterBase(ctx context.Context, name, src string, replace bool) (BaseModel, error) {
	if err := CheckBaseName(name); err != nil {
		return BaseModel{}, err
	}
	if err := r.baseReady(ctx); err != nil {
		return BaseModel{}, err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return BaseModel{}, err
	}
	var paths []string // relative to root, '/'-separated
	root := src
	b := BaseModel{Name: name, ID: uuid.Must(uuid.NewV7()).String(), CreatedAt: db.FormatTime(r.now())}
	if fi.Mode().IsRegular() {
		root, b.File = filepath.Dir(src), filepath.Base(src)
		paths = []string{b.File}
	} else {
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			// A file, or a link to one (a Hugging Face cache snapshot links its files to blobs).
			if d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0 && isRegularFile(p) {
				rel, _ := filepath.Rel(src, p)
				paths = append(paths, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return BaseModel{}, err
		}
		if len(paths) == 0 {
			return BaseModel{}, fmt.Errorf("registry: %s holds no files", src)
		}
	}
	sort.Strings(paths)
	infos := make([]blob.Info, len(paths))
	for i, p := range paths {
		if infos[i], err = r.blobs.PutFile(ctx, filepath.Join(root, filepath.FromSlash(p))); err != nil {
			return BaseModel{}, fmt.Errorf("registry: storing %s: %w", p, err)
		}
		b.Files++
		b.Bytes += infos[i].Size
	}
	err = r.db.WriteTx(ctx, func(tx *db.Tx) error {
		var old string
		err := tx.QueryRow(ctx, `SELECT id FROM base_models WHERE name = ?`, name).Scan(&old)
		if err == nil {
			if !replace {
				return ErrExists
			}
			if _, err := tx.Exec(ctx, `DELETE FROM base_model_files WHERE model_id = ?`, old); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM base_models WHERE name = ?`, name); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO base_models (name, id, file, created_at) VALUES (?, ?, ?, ?)`, name, b.ID, b.File, b.CreatedAt); err != nil {
			return err
		}
		for i, p := range paths {
			if _, err := tx.Exec(ctx, `INSERT INTO base_model_files (model_id, path, hash, size) VALUES (?, ?, ?, ?)`, b.ID, p, infos[i].Hash, infos[i].Size); err != nil {
				return err
			}
		}
		return nil
	})
	return b, err
}

// BaseModels lists the registered base models by name.
func (r *Registry) BaseModels(ctx context.Context) ([]BaseModel, error) {
	if err := r.baseReady(ctx); err != nil {
		return nil, err
	}
	rows, err := r.db.Query(ctx, `SELECT m.name, m.id, m.file, m.created_at, COUNT(f.path), COALESCE(SUM(f.size), 0)
		FROM base_models m LEFT JOIN base_model_files f ON f.model_id = m.id
		GROUP BY m.name, m.id, m.file, m.created_at ORDER BY m.name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []BaseModel
	for rows.Next() {
		var b BaseModel
		if err := rows.Scan(&b.Name, &b.ID, &b.File, &b.CreatedAt, &b.Files, &b.Bytes); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// UnregisterBase removes a registered base model (ErrNotFound when none); nodes that loaded
// it keep serving it until they restart.
func (r *Registry) UnregisterBase(ctx context.Context, name string) error {
	if err := r.baseReady(ctx); err != nil {
		return err
	}
	return r.db.WriteTx(ctx, func(tx *db.Tx) error {
		var id string
		if err := tx.QueryRow(ctx, `SELECT id FROM base_models WHERE name = ?`, name).Scan(&id); err != nil {
			return ErrNotFound
		}
		if _, err := tx.Exec(ctx, `DELETE FROM base_model_files WHERE model_id = ?`, id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM base_models WHERE id = ?`, id)
		return err
	})
}

// BasePath returns what to load a registered base model from on this node: its directory
// (or its GGUF file in it), put together from the node's blob cache under
// <cache>/models/<id>.
func (r *Registry) BasePath(ctx context.Context, b BaseModel) (string, error) {
	if err := r.baseReady(ctx); err != nil {
		return "", err
	}
	dst := filepath.Join(r.cacheDir, "models", b.ID)
	if !r.isChecked(dst) {
		names, hashes, err := r.fileList(ctx, `SELECT path, hash FROM base_model_files WHERE model_id = ? ORDER BY path`, b.ID)
		if err != nil {
			return "", err
		}
		if len(names) == 0 {
			return "", fmt.Errorf("%w: base model %s", ErrNotFound, b.Name)
		}
		if err := r.ensureAssembled(ctx, dst, names, hashes); err != nil {
			return "", fmt.Errorf("registry: base model %s: %w", b.Name, err)
		}
	}
	if b.File != "" {
		return filepath.Join(dst, b.File), nil
	}
	return dst, nil
}

// validBaseName reports whether name can name a base model (as --model NAME).
func validBaseName(name string) bool {
	return name != "" && len(name) <= 128 && !strings.ContainsAny(name, "/: \t\n\\@")
}

// CheckBaseName refuses a name a base model cannot have.
func CheckBaseName(name string) error {
	if !validBaseName(name) {
		return fmt.Errorf("base model name %q: at most 128 characters without '/', ':', '\\', '@' or spaces", name)
	}
	return nil
}

// BlobRefs returns the queries that answer the blobs the registry references (checkpoint
// files, resume states and base model files), for blob.DB.GC.
func (r *Registry) BlobRefs(ctx context.Context) ([]string, error) {
	if err := r.baseReady(ctx); err != nil {
		return nil, err
	}
	return []string{`SELECT hash FROM train_checkpoint_files`, `SELECT hash FROM train_resume_files`, `SELECT hash FROM base_model_files`}, nil
}

// isRegularFile reports whether p is, or links to, a regular file.
func isRegularFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Dir is a Store in a local directory: blob <hash> is the file <root>/<hash[:2]>/<hash>.
// Files are written to a temporary file in root, synced and renamed, so a blob is whole or
// absent.
type Dir struct {
	Root string
}

// Path is where blob hash lives (whether or not it is there).
func (d Dir) Path(hash string) string {
	return filepath.Join(d.Root, hash[:2], hash)
}

// Put implements Store.
func (d Dir) Put(ctx context.Context, r io.Reader) (Info, error) {
	tmp, info, err := d.writeTemp(ctx, r)
	if err != nil {
		return Info{}, err
	}
	return info, d.commit(tmp, info.Hash)
}

// writeTemp copies r into a temporary file of the directory, synced, and hashes it.
func (d Dir) writeTemp(ctx context.Context, r io.Reader) (string, Info, error) {
	if err := os.MkdirAll(d.Root, 0o755); err != nil {
		return "", Info{}, err
	}
	f, err := os.CreateTemp(d.Root, ".tmp-*")
	if err != nil {
		return "", Info{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, r})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", Info{}, err
	}
	return f.Name(), Info{Hash: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// commit renames a written temporary file to blob hash's place (or drops it when the blob
// is there already).
func (d Dir) commit(tmp, hash string) error {
	dst := d.Path(hash)
	if _, err := os.Stat(dst); err == nil {
		return os.Remove(tmp)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o444); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// Open implements Store; the reader checks the bytes against hash.
func (d Dir) Open(ctx context.Context, hash string) (io.ReadCloser, error) {
	if !ValidHash(hash) {
		return nil, fmt.Errorf("%w: %q is not a blob hash", ErrNotFound, hash)
	}
	f, err := os.Open(d.Path(hash))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, hash)
	}
	if err != nil {
		return nil, err
	}
	return newVerifier(f, f, hash, -1), nil
}

// Has reports whether blob hash is in the directory.
func (d Dir) Has(hash string) bool {
	_, err := os.Stat(d.Path(hash))
	return err == nil
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// tempPrefixes begin the names of the temporary files Hone's writers make beside the files
// they put in place (this package's, uploads', published artifacts').
var tempPrefixes = []string{".tmp-", ".upload-", ".publish-"}

// SweepTemp removes the temporary files under root that a write which never finished left
// behind (its process killed while writing them): those not modified for olderThan, which
// must be longer than any write in progress can pause. It answers how many it removed and
// their bytes; a root that does not exist holds none.
func SweepTemp(root string, olderThan time.Duration) (n int, bytes int64, err error) {
	cutoff := time.Now().Add(-olderThan)
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.IsDir() || !e.Type().IsRegular() {
			return nil
		}
		temp := false
		for _, pre := range tempPrefixes {
			temp = temp || strings.HasPrefix(e.Name(), pre)
		}
		if !temp {
			return nil
		}
		info, err := e.Info()
		if err != nil || !info.ModTime().Before(cutoff) {
			return nil // gone meanwhile, or being written
		}
		if err := os.Remove(p); err == nil {
			n++
			bytes += info.Size()
		}
		return nil
	})
	return n, bytes, err
}

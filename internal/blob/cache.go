package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/honeai/hone/internal/db"
)

// Cache is a node's local copy of a shared Store: a Dir keyed by hash. Put stores in both;
// Path answers a local file, fetched from Remote on first use. Everything fetched is checked
// against its hash before it is kept: a blob that does not match is refused and fetched
// again, up to Attempts times. A local file is checked once per process before it is first
// answered, so a damaged cache heals itself.
type Cache struct {
	Remote Store
	Dir    Dir
	// Attempts is how many times a corrupt blob is fetched before Path gives up (0 = 3).
	Attempts int
	Log      *slog.Logger

	mu       sync.Mutex
	verified map[string]bool
}

func (c *Cache) logger() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// Put implements Store: the bytes go to the local directory first (hashed), then to Remote
// unless Remote has them already.
func (c *Cache) Put(ctx context.Context, r io.Reader) (Info, error) {
	tmp, info, err := c.Dir.writeTemp(ctx, r)
	if err != nil {
		return Info{}, err
	}
	defer os.Remove(tmp) // gone after the commit
	have := false
	if s, ok := c.Remote.(*DB); ok {
		if have, err = s.Touch(ctx, info.Hash); err != nil {
			return Info{}, err
		}
	}
	if !have {
		f, err := os.Open(tmp)
		if err != nil {
			return Info{}, err
		}
		got, err := c.Remote.Put(ctx, f)
		f.Close()
		if err != nil {
			return Info{}, err
		}
		if got != info {
			return Info{}, fmt.Errorf("%w: stored %s (%d bytes) for %s (%d bytes)", ErrCorrupt, got.Hash, got.Size, info.Hash, info.Size)
		}
	}
	if err := c.Dir.commit(tmp, info.Hash); err != nil {
		return Info{}, err
	}
	c.markVerified(info.Hash)
	return info, nil
}

// PutWith stores the bytes of r as Put does and, in the same transaction of Remote (a *DB),
// runs record with the blob's Info: the caller's rows that refer to it (NameTx, a file's
// record, a quota's charge). Either all of it is stored or, whatever fails (record, the
// store, the copy), none of it: no blob without its rows, no rows without their blob, and
// no copy left in the node's directory.
func (c *Cache) PutWith(ctx context.Context, r io.Reader, record func(tx *db.Tx, info Info) error) (Info, error) {
	d, ok := c.Remote.(*DB)
	if !ok {
		return Info{}, fmt.Errorf("blob: the cache's store keeps no records")
	}
	tmp, info, err := c.Dir.writeTemp(ctx, r)
	if err != nil {
		return Info{}, err
	}
	defer os.Remove(tmp) // gone after the commit
	err = d.d.WriteTx(ctx, func(tx *db.Tx) error {
		res, err := tx.Exec(ctx, `UPDATE blobs SET created_at = ? WHERE hash = ?`, db.FormatTime(timeNow()), info.Hash)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			f, err := os.Open(tmp)
			if err != nil {
				return err
			}
			got, err := putTx(ctx, tx, f)
			f.Close()
			if err != nil {
				return err
			}
			if got != info {
				return fmt.Errorf("%w: stored %s (%d bytes) for %s (%d bytes)", ErrCorrupt, got.Hash, got.Size, info.Hash, info.Size)
			}
		}
		return record(tx, info)
	})
	if err != nil {
		return Info{}, err
	}
	if err := c.Dir.commit(tmp, info.Hash); err != nil {
		// Stored and recorded; the node fetches its copy on first use.
		c.logger().Warn("blob cache: keeping a local copy failed", "hash", info.Hash, "err", err)
		return info, nil
	}
	c.markVerified(info.Hash)
	return info, nil
}

// PutFile stores the file at path.
func (c *Cache) PutFile(ctx context.Context, path string) (Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	return c.Put(ctx, f)
}

// Open implements Store: the local copy (fetched first when missing).
func (c *Cache) Open(ctx context.Context, hash string) (io.ReadCloser, error) {
	if _, err := c.Path(ctx, hash); err != nil {
		return nil, err
	}
	return c.Dir.Open(ctx, hash)
}

func (c *Cache) markVerified(hash string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.verified == nil {
		c.verified = map[string]bool{}
	}
	c.verified[hash] = true
}

func (c *Cache) isVerified(hash string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verified[hash]
}

// Path returns the path of a local, checked copy of blob hash (read-only: never write to
// it), fetching it from Remote when it is not in the directory.
func (c *Cache) Path(ctx context.Context, hash string) (string, error) {
	if !ValidHash(hash) {
		return "", fmt.Errorf("%w: %q is not a blob hash", ErrNotFound, hash)
	}
	p := c.Dir.Path(hash)
	if _, err := os.Stat(p); err == nil {
		if c.isVerified(hash) {
			return p, nil
		}
		ok, err := fileHashes(p, hash)
		if err != nil {
			return "", err
		}
		if ok {
			c.markVerified(hash)
			return p, nil
		}
		c.logger().Warn("blob cache: a local copy does not match its hash; fetching it again", "hash", hash, "path", p)
		if err := os.Remove(p); err != nil {
			return "", err
		}
	}
	attempts := c.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	var last error
	for i := 0; i < attempts; i++ {
		last = c.fetch(ctx, hash)
		if last == nil {
			c.markVerified(hash)
			return p, nil
		}
		if !errors.Is(last, ErrCorrupt) {
			return "", last
		}
		c.logger().Warn("blob cache: a fetched blob does not match its hash; refused", "hash", hash, "attempt", i+1, "err", last)
	}
	return "", last
}

// fetch copies blob hash from Remote into the directory; the copy is kept only when its
// bytes match.
func (c *Cache) fetch(ctx context.Context, hash string) error {
	rc, err := c.Remote.Open(ctx, hash)
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, info, err := c.Dir.writeTemp(ctx, rc) // rc answers ErrCorrupt at its end on a mismatch
	if err != nil {
		return err
	}
	if info.Hash != hash {
		os.Remove(tmp)
		return fmt.Errorf("%w: fetched %s for %s", ErrCorrupt, info.Hash, hash)
	}
	return c.Dir.commit(tmp, hash)
}

// fileHashes reports whether the file at p hashes to hash.
func fileHashes(p, hash string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, err
	}
	return hex.EncodeToString(h.Sum(nil)) == hash, nil
}

// Name gives a blob a name in namespace in Remote (a *DB); see DB.Name.
func (c *Cache) Name(ctx context.Context, namespace, name string, info Info) error {
	d, ok := c.Remote.(*DB)
	if !ok {
		return fmt.Errorf("blob: the cache's store keeps no names")
	}
	return d.Name(ctx, namespace, name, info)
}

// Lookup returns the blob a name was given in Remote (a *DB); see DB.Lookup.
func (c *Cache) Lookup(ctx context.Context, namespace, name string) (Info, error) {
	d, ok := c.Remote.(*DB)
	if !ok {
		return Info{}, fmt.Errorf("%w: the cache's store keeps no names", ErrNotFound)
	}
	return d.Lookup(ctx, namespace, name)
}

// Files is what a service keeps its shared files in (trace files, uploads, W&B files): named
// blobs, readable through a node's cache. *Cache implements it.
type Files interface {
	Put(ctx context.Context, r io.Reader) (Info, error)
	PutWith(ctx context.Context, r io.Reader, record func(tx *db.Tx, info Info) error) (Info, error)
	Path(ctx context.Context, hash string) (string, error)
	Name(ctx context.Context, namespace, name string, info Info) error
	Lookup(ctx context.Context, namespace, name string) (Info, error)
}

var _ Files = (*Cache)(nil)

// Package blob keeps files by content: each blob is named by the SHA-256 of its bytes (64
// lowercase hex digits), written once and never changed. Two backends implement Store:
//
//   - Dir, a local directory (one file per blob, written to a temporary file and renamed),
//     for a single node;
//   - DB, rows of the shared store (internal/db): the bytes in chunks of ChunkSize, streamed
//     in and out so that no whole blob is held in memory, for several nodes on one
//     PostgreSQL.
//
// Cache puts a node's local directory in front of a shared Store: Put writes both, Path
// fetches a blob once into the directory and answers its local path. Every read from a
// shared store is checked against the blob's hash and size; a blob whose bytes do not match
// is refused (ErrCorrupt), never kept, and fetched again.
//
//	c := &blob.Cache{Remote: blob.NewDB(d), Dir: "/var/cache/hone/blobs"}
//	if err := c.Remote.(*blob.DB).Migrate(ctx); err != nil { ... }
//	info, err := c.Put(ctx, f)           // info.Hash names it on every node
//	path, err := c.Path(ctx, info.Hash)  // on any node: a local, verified copy
package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// Errors.
var (
	ErrNotFound = errors.New("blob: not found")
	// ErrCorrupt is a blob whose bytes do not hash to its name (or have another length).
	ErrCorrupt = errors.New("blob: content does not match its hash")
)

// Info names a stored blob.
type Info struct {
	Hash string // SHA-256 of the bytes, lowercase hex
	Size int64
}

// Store keeps blobs by content.
type Store interface {
	// Put stores the bytes of r and returns their hash and size. Storing bytes that are
	// already stored is a no-op that answers the same Info.
	Put(ctx context.Context, r io.Reader) (Info, error)
	// Open streams a blob. The reader fails with ErrCorrupt at its end when the bytes read
	// do not match hash; ErrNotFound when there is no such blob.
	Open(ctx context.Context, hash string) (io.ReadCloser, error)
}

// ValidHash reports whether h can name a blob (64 lowercase hex digits).
func ValidHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// verifier passes reads through, hashing them; at EOF it answers ErrCorrupt instead of
// io.EOF when the bytes do not match want (and size, when size >= 0).
type verifier struct {
	r    io.Reader
	c    io.Closer
	h    hash.Hash
	n    int64
	want string
	size int64
	err  error
}

func newVerifier(r io.Reader, c io.Closer, want string, size int64) *verifier {
	return &verifier{r: r, c: c, h: sha256.New(), want: want, size: size}
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want || (v.size >= 0 && v.n != v.size) {
			err = fmt.Errorf("%w: %s read as %d bytes hashing to %s", ErrCorrupt, v.want, v.n, got)
		}
		v.err = err
	}
	return n, err
}

func (v *verifier) Close() error {
	if v.c != nil {
		return v.c.Close()
	}
	return nil
}

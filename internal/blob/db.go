package blob

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/db"
)

// ChunkSize is the size of one stored chunk of a blob in the database.
const ChunkSize = 1 << 20

var migrations = []db.Migration{{Version: 1, SQLite: `
CREATE TABLE blobs (
	hash TEXT PRIMARY KEY,
	size INTEGER NOT NULL,
	chunks INTEGER NOT NULL,
	created_at TEXT NOT NULL
);
CREATE TABLE blob_chunks (
	hash TEXT NOT NULL,
	seq INTEGER NOT NULL,
	data BLOB NOT NULL,
	PRIMARY KEY (hash, seq)
);
CREATE TABLE blob_names (
	namespace TEXT NOT NULL,
	name TEXT NOT NULL,
	hash TEXT NOT NULL,
	size INTEGER NOT NULL,
	created_at TEXT NOT NULL,
	PRIMARY KEY (namespace, name)
)`, Postgres: `
CREATE TABLE blobs (
	hash TEXT PRIMARY KEY,
	size BIGINT NOT NULL,
	chunks INTEGER NOT NULL,
	created_at TEXT NOT NULL
);
CREATE TABLE blob_chunks (
	hash TEXT NOT NULL,
	seq INTEGER NOT NULL,
	data BYTEA NOT NULL,
	PRIMARY KEY (hash, seq)
);
ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE TABLE blob_names (
	namespace TEXT NOT NULL,
	name TEXT NOT NULL,
	hash TEXT NOT NULL,
	size BIGINT NOT NULL,
	created_at TEXT NOT NULL,
	PRIMARY KEY (namespace, name)
)`}}

// DB is a Store in the shared database: a blob is a row of blobs (hash, size, number of
// chunks) and its bytes rows of blob_chunks (hash, seq, data) of ChunkSize bytes each. Put
// writes every chunk and the blob's row in one transaction, so a blob is whole or absent
// (a writer killed half-way leaves nothing); Open reads one chunk at a time. It works on
// both dialects; it is meant for PostgreSQL, where several nodes share it.
type DB struct {
	d *db.DB
}

// NewDB returns the blob store of d; call Migrate once before use.
func NewDB(d *db.DB) *DB { return &DB{d: d} }

// Migrate creates the store's tables.
func (b *DB) Migrate(ctx context.Context) error { return b.d.Migrate(ctx, "blob", migrations) }

// Put implements Store. The chunks are written under a temporary name and given the
// blob's hash when the last one is in, in the same transaction; a blob already stored is
// kept and the copy dropped.
func (b *DB) Put(ctx context.Context, r io.Reader) (Info, error) {
	var info Info
	err := b.d.WriteTx(ctx, func(tx *db.Tx) error {
		var err error
		info, err = putTx(ctx, tx, r)
		return err
	})
	if err != nil {
		return Info{}, fmt.Errorf("blob: put: %w", err)
	}
	return info, nil
}

// putTx is Put in the caller's transaction: the blob is stored when tx commits, and not at
// all when it rolls back.
func putTx(ctx context.Context, tx *db.Tx, r io.Reader) (Info, error) {
	tmp := "tmp-" + uuid.NewString()
	var info Info
	h := sha256.New()
	buf := make([]byte, ChunkSize)
	seq := 0
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			h.Write(buf[:n])
			info.Size += int64(n)
			if _, err := tx.Exec(ctx, `INSERT INTO blob_chunks (hash, seq, data) VALUES (?, ?, ?)`, tmp, seq, buf[:n]); err != nil {
				return Info{}, err
			}
			seq++
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return Info{}, err
		}
	}
	info.Hash = hex.EncodeToString(h.Sum(nil))
	res, err := tx.Exec(ctx, `INSERT INTO blobs (hash, size, chunks, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING`,
		info.Hash, info.Size, seq, db.FormatTime(timeNow()))
	if err != nil {
		return Info{}, err
	}
	if n, _ := res.RowsAffected(); n == 0 { // stored already: keep it, drop the copy
		if _, err := tx.Exec(ctx, `UPDATE blobs SET created_at = ? WHERE hash = ?`, db.FormatTime(timeNow()), info.Hash); err != nil {
			return Info{}, err
		}
		_, err = tx.Exec(ctx, `DELETE FROM blob_chunks WHERE hash = ?`, tmp)
		return info, err
	}
	_, err = tx.Exec(ctx, `UPDATE blob_chunks SET hash = ? WHERE hash = ?`, info.Hash, tmp)
	return info, err
}

// Touch marks a stored blob as stored now (so that GC keeps it a while longer) and reports
// whether it is stored: a writer that finds its bytes stored already touches them instead of
// storing them again.
func (b *DB) Touch(ctx context.Context, hash string) (bool, error) {
	res, err := b.d.Exec(ctx, `UPDATE blobs SET created_at = ? WHERE hash = ?`, db.FormatTime(timeNow()), hash)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// Stat returns a stored blob's size (ErrNotFound when absent).
func (b *DB) Stat(ctx context.Context, hash string) (Info, int, error) {
	var size int64
	var chunks int
	err := b.d.QueryRow(ctx, `SELECT size, chunks FROM blobs WHERE hash = ?`, hash).Scan(&size, &chunks)
	if errors.Is(err, sql.ErrNoRows) {
		return Info{}, 0, fmt.Errorf("%w: %s", ErrNotFound, hash)
	}
	if err != nil {
		return Info{}, 0, err
	}
	return Info{Hash: hash, Size: size}, chunks, nil
}

// Open implements Store: the chunks are read one at a time, and the bytes checked against
// the blob's hash and size at the end.
func (b *DB) Open(ctx context.Context, hash string) (io.ReadCloser, error) {
	if !ValidHash(hash) {
		return nil, fmt.Errorf("%w: %q is not a blob hash", ErrNotFound, hash)
	}
	info, chunks, err := b.Stat(ctx, hash)
	if err != nil {
		return nil, err
	}
	cr := &chunkReader{ctx: ctx, b: b, hash: hash, chunks: chunks}
	return newVerifier(cr, nil, hash, info.Size), nil
}

// chunkReader reads a blob's chunks in order.
type chunkReader struct {
	ctx    context.Context
	b      *DB
	hash   string
	seq    int
	chunks int
	cur    []byte
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.cur) == 0 {
		if c.seq >= c.chunks {
			return 0, io.EOF
		}
		var data []byte
		err := c.b.d.QueryRow(c.ctx, `SELECT data FROM blob_chunks WHERE hash = ? AND seq = ?`, c.hash, c.seq).Scan(&data)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("%w: %s has no chunk %d", ErrCorrupt, c.hash, c.seq)
		}
		if err != nil {
			return 0, err
		}
		c.cur = data
		c.seq++
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

package blob

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/honeai/hone/internal/db"
)

// timeNow is the clock of stored creation times.
var timeNow = time.Now

// Name records that name in namespace (e.g. "upload/<entity>") is blob info; a name is
// written once (a second Name of it is ErrExists unless it names the same blob).
func (b *DB) Name(ctx context.Context, namespace, name string, info Info) error {
	_, err := b.d.Exec(ctx, `INSERT INTO blob_names (namespace, name, hash, size, created_at) VALUES (?, ?, ?, ?, ?)`,
		namespace, name, info.Hash, info.Size, db.FormatTime(timeNow()))
	if db.IsUniqueViolation(err) {
		old, lerr := b.Lookup(ctx, namespace, name)
		if lerr == nil && old == info {
			return nil
		}
		return fmt.Errorf("%w: %s/%s", ErrExists, namespace, name)
	}
	return err
}

// NameTx is Name in the caller's transaction (on the store's database), so that a name and
// the caller's rows that refer to it are written together or not at all; created reports
// whether the name is new (false: it named info already).
func NameTx(ctx context.Context, tx *db.Tx, namespace, name string, info Info) (created bool, err error) {
	res, err := tx.Exec(ctx, `INSERT INTO blob_names (namespace, name, hash, size, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (namespace, name) DO NOTHING`, namespace, name, info.Hash, info.Size, db.FormatTime(timeNow()))
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	var old Info
	if err := tx.QueryRow(ctx, `SELECT hash, size FROM blob_names WHERE namespace = ? AND name = ?`, namespace, name).Scan(&old.Hash, &old.Size); err != nil {
		return false, err
	}
	if old != info {
		return false, fmt.Errorf("%w: %s/%s", ErrExists, namespace, name)
	}
	return false, nil
}

// Lookup returns the blob a name was given (ErrNotFound when none).
func (b *DB) Lookup(ctx context.Context, namespace, name string) (Info, error) {
	var info Info
	err := b.d.QueryRow(ctx, `SELECT hash, size FROM blob_names WHERE namespace = ? AND name = ?`, namespace, name).Scan(&info.Hash, &info.Size)
	if errors.Is(err, sql.ErrNoRows) {
		return Info{}, fmt.Errorf("%w: %s/%s", ErrNotFound, namespace, name)
	}
	return info, err
}

// ErrExists is a name given to another blob already.
var ErrExists = errors.New("blob: the name is taken")

// EntityBytes sums the sizes of the named blobs by the entity whose namespace names them:
// "<kind>/<entity>" or "<kind>/<entity>/<project>" (W&B files, uploads, trace files), each
// name counted once — what each entity stores, for its quota.
func (b *DB) EntityBytes(ctx context.Context) (map[string]int64, error) {
	rows, err := b.d.Query(ctx, `SELECT namespace, size FROM blob_names`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var ns string
		var size int64
		if err := rows.Scan(&ns, &size); err != nil {
			return nil, err
		}
		if _, rest, ok := strings.Cut(ns, "/"); ok {
			entity, _, _ := strings.Cut(rest, "/")
			out[entity] += size
		}
	}
	return out, rows.Err()
}

// Package quota keeps what each entity stores and holds it to a limit: a ledger of bytes per
// entity (the files its keys upload: W&B artifact and run files, training data files, trace
// files), charged in the transaction that records a new file, so that a file is counted
// exactly when it is stored; and a check before an upload's bytes are written, so that an
// upload that cannot fit is refused before it takes the disk.
//
//	q, err := quota.Open(ctx, d, 10<<30)        // 0: count, never refuse
//	if err := q.Check(ctx, "alice", n, "body"); err != nil { ... }  // a 403 naming --entity-quota
//	err = d.WriteTx(ctx, func(tx *db.Tx) error {
//		... record the file ...
//		return q.ChargeTx(ctx, tx, "alice", n, "body") // refused past the limit: rolled back
//	})
//
// A nil *Quota counts nothing and refuses nothing. `hone blobs gc` sets the ledger to what the
// shared store's names hold (Set), which also counts files stored before the ledger existed.
package quota

import (
	"context"
	"database/sql"
	"errors"

	"github.com/dustin/go-humanize"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/fault"
)

var migrations = []db.Migration{{Version: 1, SQLite: `
CREATE TABLE entity_storage (
	entity TEXT PRIMARY KEY,
	bytes BIGINT NOT NULL
)`}}

// Quota is the ledger of a store and the most bytes one entity may store.
type Quota struct {
	d *db.DB
	// Limit is the most bytes an entity may store (0: no limit; usage is still counted).
	Limit int64
}

// Open migrates the ledger's table on d.
func Open(ctx context.Context, d *db.DB, limit int64) (*Quota, error) {
	if err := d.Migrate(ctx, "quota", migrations); err != nil {
		return nil, err
	}
	return &Quota{d: d, Limit: max(limit, 0)}, nil
}

// Usage is the bytes entity stores.
func (q *Quota) Usage(ctx context.Context, entity string) (int64, error) {
	if q == nil {
		return 0, nil
	}
	var n int64
	err := q.d.QueryRow(ctx, `SELECT bytes FROM entity_storage WHERE entity = ?`, entity).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// Room is what entity stores and how many more bytes it may store (left -1: no limit).
func (q *Quota) Room(ctx context.Context, entity string) (used, left int64, err error) {
	if q == nil || q.Limit == 0 {
		return 0, -1, nil
	}
	if used, err = q.Usage(ctx, entity); err != nil {
		return 0, 0, err
	}
	return used, max(q.Limit-used, 0), nil
}

// Check refuses, before its bytes are written, a file of add bytes that would take entity
// past its quota: a forbidden fault of field naming the limit.
func (q *Quota) Check(ctx context.Context, entity string, add int64, field string) error {
	if q == nil || q.Limit == 0 {
		return nil
	}
	used, err := q.Usage(ctx, entity)
	if err != nil {
		return err
	}
	return q.over(entity, used, add, field)
}

func (q *Quota) over(entity string, used, add int64, field string) error {
	if add <= q.Limit-used {
		return nil
	}
	return fault.Forbidden(field, "entity %s stores %s; %s more would pass its storage quota of %s (--entity-quota)",
		entity, humanize.IBytes(uint64(max(used, 0))), humanize.IBytes(uint64(max(add, 0))), humanize.IBytes(uint64(q.Limit)))
}

// Exceeded is the fault of an upload found past the quota while it streams in: used is the
// entity's usage when it began, add what had come when it passed.
func (q *Quota) Exceeded(entity string, used, add int64, field string) error {
	return q.over(entity, used, add, field)
}

// ChargeTx counts add more bytes for entity in the transaction that records a new file of
// it, and refuses (so that the transaction rolls back) past the limit: the charge and the
// check are one, whatever else is being stored at once.
func (q *Quota) ChargeTx(ctx context.Context, tx *db.Tx, entity string, add int64, field string) error {
	if q == nil || add == 0 {
		return nil
	}
	var total int64
	if err := tx.QueryRow(ctx, `INSERT INTO entity_storage (entity, bytes) VALUES (?, ?)
		ON CONFLICT (entity) DO UPDATE SET bytes = entity_storage.bytes + excluded.bytes RETURNING bytes`, entity, add).Scan(&total); err != nil {
		return err
	}
	if q.Limit > 0 && total > q.Limit {
		return q.over(entity, total-add, add, field)
	}
	return nil
}

// Charge is ChargeTx in a transaction of its own.
func (q *Quota) Charge(ctx context.Context, entity string, add int64, field string) error {
	if q == nil || add == 0 {
		return nil
	}
	return q.d.WriteTx(ctx, func(tx *db.Tx) error { return q.ChargeTx(ctx, tx, entity, add, field) })
}

// Set replaces the ledger with usage (bytes by entity), in one transaction.
func Set(ctx context.Context, d *db.DB, usage map[string]int64) error {
	if err := d.Migrate(ctx, "quota", migrations); err != nil {
		return err
	}
	return d.WriteTx(ctx, func(tx *db.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM entity_storage`); err != nil {
			return err
		}
		for e, n := range usage {
			if _, err := tx.Exec(ctx, `INSERT INTO entity_storage (entity, bytes) VALUES (?, ?)`, e, n); err != nil {
				return err
			}
		}
		return nil
	})
}

// All returns every entity's usage.
func All(ctx context.Context, d *db.DB) (map[string]int64, error) {
	rows, err := d.Query(ctx, `SELECT entity, bytes FROM entity_storage`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var e string
		var n int64
		if err := rows.Scan(&e, &n); err != nil {
			return nil, err
		}
		out[e] = n
	}
	return out, rows.Err()
}

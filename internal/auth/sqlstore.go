package auth

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/honeai/hone/internal/db"
)

// Migrations are the auth component's schema.
var Migrations = []db.Migration{
	{Version: 1, SQLite: `
CREATE TABLE api_keys (
	id TEXT PRIMARY KEY,
	entity TEXT NOT NULL,
	name TEXT NOT NULL DEFAULT '',
	secret_sha256 BLOB NOT NULL,
	created_at TEXT NOT NULL,
	last_used_at TEXT,
	revoked_at TEXT
);
CREATE INDEX api_keys_entity ON api_keys(entity)`,
		Postgres: `
CREATE TABLE api_keys (
	id TEXT PRIMARY KEY,
	entity TEXT NOT NULL,
	name TEXT NOT NULL DEFAULT '',
	secret_sha256 BYTEA NOT NULL,
	created_at TEXT NOT NULL,
	last_used_at TEXT,
	revoked_at TEXT
);
CREATE INDEX api_keys_entity ON api_keys(entity)`},
}

// SQLStore is the Store on internal/db.
type SQLStore struct{ db *db.DB }

// NewSQLStore returns the key store on d; call Migrate first.
func NewSQLStore(d *db.DB) *SQLStore { return &SQLStore{db: d} }

// Migrate applies the auth migrations.
func (s *SQLStore) Migrate(ctx context.Context) error { return s.db.Migrate(ctx, "auth", Migrations) }

// InsertKey stores a new key record and its secret hash.
func (s *SQLStore) InsertKey(ctx context.Context, k Key, hash []byte) error {
	_, err := s.db.Exec(ctx, `INSERT INTO api_keys (id, entity, name, secret_sha256, created_at) VALUES (?, ?, ?, ?, ?)`,
		k.ID, k.Entity, k.Name, hash, db.FormatTime(k.CreatedAt))
	return err
}

func scanTime(ns sql.NullString) *time.Time {
	if !ns.Valid {
		return nil
	}
	t, err := db.ParseTime(ns.String)
	if err != nil {
		return nil
	}
	return &t
}

const keyColumns = `id, entity, name, created_at, last_used_at, revoked_at`

func scanKey(sc interface{ Scan(...any) error }, extra ...any) (Key, error) {
	var k Key
	var created string
	var used, revoked sql.NullString
	dest := append([]any{&k.ID, &k.Entity, &k.Name, &created, &used, &revoked}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return Key{}, err
	}
	t, err := db.ParseTime(created)
	if err != nil {
		return Key{}, err
	}
	k.CreatedAt, k.LastUsedAt, k.RevokedAt = t, scanTime(used), scanTime(revoked)
	return k, nil
}

// GetKey returns a key and its secret hash.
func (s *SQLStore) GetKey(ctx context.Context, id string) (Key, []byte, error) {
	var hash []byte
	k, err := scanKey(s.db.QueryRow(ctx, `SELECT `+keyColumns+`, secret_sha256 FROM api_keys WHERE id = ?`, id), &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return Key{}, nil, ErrNotFound
	}
	return k, hash, err
}

// ListKeys lists keys of entity ("" = all) by creation time.
func (s *SQLStore) ListKeys(ctx context.Context, entity string) ([]Key, error) {
	q := `SELECT ` + keyColumns + ` FROM api_keys`
	var args []any
	if entity != "" {
		q += ` WHERE entity = ?`
		args = append(args, entity)
	}
	rows, err := s.db.Query(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeKey marks a key revoked; ErrNotFound if there is no such key.
func (s *SQLStore) RevokeKey(ctx context.Context, id string, at time.Time) error {
	res, err := s.db.Exec(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, db.FormatTime(at), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// TouchKey records the last use of a key.
func (s *SQLStore) TouchKey(ctx context.Context, id string, at time.Time) error {
	_, err := s.db.Exec(ctx, `UPDATE api_keys SET last_used_at = ? WHERE id = ?`, db.FormatTime(at), id)
	return err
}

// CountKeys counts all keys.
func (s *SQLStore) CountKeys(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM api_keys`).Scan(&n)
	return n, err
}

// Package dbtest gives tests a fresh, real store: an SQLite file in the test's temporary
// directory, and a fresh PostgreSQL schema when HONE_TEST_POSTGRES_DSN names a server
// (.ci/run starts one). Tests that call ForEachDialect run on both.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/db"
)

// PostgresEnv names the environment variable holding a PostgreSQL URL for tests.
const PostgresEnv = "HONE_TEST_POSTGRES_DSN"

// SQLite opens a fresh SQLite store in t.TempDir(), closed when the test ends.
func SQLite(t testing.TB) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "hone.db"))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// Postgres opens a fresh schema on the server named by HONE_TEST_POSTGRES_DSN, dropped when the
// test ends. It skips the test when the variable is unset.
func Postgres(t testing.TB) *db.DB {
	t.Helper()
	dsn := os.Getenv(PostgresEnv)
	if dsn == "" {
		t.Skipf("%s is not set: no PostgreSQL server for this test", PostgresEnv)
	}
	ctx := context.Background()
	admin, err := db.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	schema := "t_" + hex.EncodeToString(rnd[:])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		t.Fatalf("create schema: %v", err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse %s: %v", PostgresEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	d, err := db.Open(ctx, u.String())
	if err != nil {
		t.Fatalf("open postgres schema: %v", err)
	}
	t.Cleanup(func() {
		d.Close()
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close()
	})
	return d
}

// ForEachDialect runs fn as a subtest on a fresh SQLite store and, when a server is configured,
// on a fresh PostgreSQL schema.
func ForEachDialect(t *testing.T, fn func(t *testing.T, d *db.DB)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, Postgres(t)) })
}

package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A data directory a PostgreSQL server uses records its store (without the password);
// `hone keys create --data DIR` without --db is then refused with that store named instead
// of quietly creating a separate SQLite store whose key the server would refuse.
func TestKeysCreateRefusesOtherStore(t *testing.T) {
	dsn := os.Getenv("HONE_TEST_POSTGRES_DSN")
	if dsn == "" {
		skipOrFail(t, "HONE_TEST_POSTGRES_DSN is not set (scripts/test-setup.sh starts PostgreSQL)")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if c := runKeys(context.Background(), []string{"create", "--data", dir, "--db", dsn, "--entity", "pg"}, &out, &errb); c != 0 {
		t.Fatalf("keys create --db: exit %d: %s", c, errb.String())
	}
	marker, err := os.ReadFile(filepath.Join(dir, StoreMarkerFile))
	if err != nil {
		t.Fatal(err)
	}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && strings.Contains(string(marker), pw) {
			t.Errorf("marker %q holds the password", marker)
		}
	}
	out.Reset()
	errb.Reset()
	if c := runKeys(context.Background(), []string{"create", "--data", dir, "--entity", "pg"}, &out, &errb); c == 0 ||
		!strings.Contains(errb.String(), "belongs to a server on PostgreSQL") || !strings.Contains(errb.String(), "--db") {
		t.Fatalf("keys create without --db: exit %d, stdout %q, stderr %q", c, out.String(), errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "hone.db")); err == nil {
		t.Error("a SQLite store was created beside the PostgreSQL one")
	}
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://hone:s3cret@127.0.0.1:5432/hone?sslmode=disable&password=x": "postgres://hone@127.0.0.1:5432/hone",
		"postgresql://127.0.0.1/db": "postgresql://127.0.0.1/db",
	} {
		if got := redactDSN(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("redactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}

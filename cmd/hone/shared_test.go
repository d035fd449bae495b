package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db/dbtest"
)

// What an interrupted cache write left is removed at start once it is old; a young one
// (another process on the same directory may be writing it) and the cache's blobs stay.
func TestRemoveStaleTemps(t *testing.T) {
	cache := t.TempDir()
	old := filepath.Join(cache, "blobs", ".tmp-123")
	young := filepath.Join(cache, "checkpoints", ".tmp-abc-1")
	kept := filepath.Join(cache, "blobs", "ab", "abcd")
	for _, p := range []string{old, filepath.Join(young, "f"), kept} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("x"), 0o644)
	}
	past := time.Now().Add(-2 * staleTemp)
	os.Chtimes(old, past, past)
	removeStaleTemps(cache, newTestLogger())
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("an old temporary file stayed: %v", err)
	}
	for _, p := range []string{young, kept} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s was removed: %v", p, err)
		}
	}
}

// hone models register needs a PostgreSQL store: without --db it is a usage error, on SQLite
// it says why.
func TestModelsRegisterNeedsPostgres(t *testing.T) {
	var out, errb strings.Builder
	if rc := runModels([]string{"register", "x", t.TempDir()}, &out, &errb); rc != 2 {
		t.Fatalf("without --db: exit %d", rc)
	}
	dir := t.TempDir()
	errb.Reset()
	if rc := runModels([]string{"register", "--data", dir, "--db", filepath.Join(dir, "hone.db"), "x", t.TempDir()}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), "PostgreSQL") {
		t.Fatalf("on SQLite: exit %d, %s", rc, errb.String())
	}
}

// A --model of a name registered in the shared store is refused at start: two nodes could
// otherwise serve different weights under one name.
func TestModelFlagOfRegisteredNameRefused(t *testing.T) {
	if os.Getenv(dbtest.PostgresEnv) == "" {
		skipOrFail(t, "%s is not set: no PostgreSQL server for this test", dbtest.PostgresEnv)
	}
	dsn := pgSchemaDSN(t)
	src := filepath.Join(t.TempDir(), "tiny")
	var out, errb strings.Builder
	if rc := runModels([]string{"synth", "--arch", "llama", "--preset", "tiny", "--out", src}, &out, &errb); rc != 0 {
		t.Fatal(errb.String())
	}
	if rc := runModels([]string{"register", "--db", dsn, "--data", t.TempDir(), "tiny", src}, &out, &errb); rc != 0 {
		t.Fatal(errb.String())
	}
	var serr syncBuffer
	rc := runServe(context.Background(), []string{"--addr", "127.0.0.1:0", "--data", t.TempDir(), "--db", dsn, "--model", "tiny=" + src}, io.Discard, &serr, nil)
	if rc == 0 || !strings.Contains(serr.String(), "registered") {
		t.Fatalf("serve with --model of a registered name: exit %d, %s", rc, serr.String())
	}
}

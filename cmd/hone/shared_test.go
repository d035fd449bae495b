package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

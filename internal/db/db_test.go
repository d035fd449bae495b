package db_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

var testMigrations = []db.Migration{
	{Version: 1, SQLite: `CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, note TEXT);
		-- a comment; with a semicolon
		CREATE INDEX items_note ON items(note)`,
		Postgres: `CREATE TABLE items (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, note TEXT);
		CREATE INDEX items_note ON items(note)`},
	{Version: 2, SQLite: `ALTER TABLE items ADD COLUMN n INTEGER NOT NULL DEFAULT 0`},
}

func TestMigrateOnceAndInOrder(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		// Given out of order: applied in version order.
		ms := []db.Migration{testMigrations[1], testMigrations[0]}
		if err := d.Migrate(ctx, "test", ms); err != nil {
			t.Fatal(err)
		}
		if err := d.Migrate(ctx, "test", ms); err != nil {
			t.Fatalf("second migrate must be a no-op: %v", err)
		}
		v, err := d.AppliedVersion(ctx, "test")
		if err != nil || v != 2 {
			t.Fatalf("applied version = %d, %v; want 2", v, err)
		}
		if v, _ := d.AppliedVersion(ctx, "other"); v != 0 {
			t.Fatalf("other component version = %d", v)
		}
		if _, err := d.Exec(ctx, "INSERT INTO items (name, note, n) VALUES (?, ?, ?)", "a", "it's ?", 3); err != nil {
			t.Fatal(err)
		}
		var note string
		var n int
		if err := d.QueryRow(ctx, "SELECT note, n FROM items WHERE name = ? AND note <> '?'", "a").Scan(&note, &n); err != nil {
			t.Fatal(err)
		}
		if note != "it's ?" || n != 3 {
			t.Fatalf("got %q %d", note, n)
		}
	})
}

func TestMigrateRejectsBadVersions(t *testing.T) {
	d := dbtest.SQLite(t)
	if err := d.Migrate(context.Background(), "x", []db.Migration{{Version: 1, SQLite: "SELECT 1"}, {Version: 1, SQLite: "SELECT 1"}}); err == nil {
		t.Fatal("duplicate versions accepted")
	}
	if err := d.Migrate(context.Background(), "x", []db.Migration{{Version: 0, SQLite: "SELECT 1"}}); err == nil {
		t.Fatal("version 0 accepted")
	}
}

func TestFailedMigrationLeavesNothing(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		err := d.Migrate(ctx, "bad", []db.Migration{{Version: 1, SQLite: "CREATE TABLE half (x INTEGER); CREATE TABLE broken (", Postgres: "CREATE TABLE half (x INTEGER); CREATE TABLE broken ("}})
		if err == nil {
			t.Fatal("broken migration succeeded")
		}
		if v, _ := d.AppliedVersion(ctx, "bad"); v != 0 {
			t.Fatalf("failed migration recorded as version %d", v)
		}
		if _, err := d.Exec(ctx, "INSERT INTO half (x) VALUES (1)"); err == nil {
			t.Fatal("first statement of a failed migration was kept")
		}
	})
}

func TestWriteTxRollsBack(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		if err := d.Migrate(ctx, "test", testMigrations); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		err := d.WriteTx(ctx, func(tx *db.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO items (name) VALUES (?)", "x"); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		var n int
		if err := d.QueryRow(ctx, "SELECT COUNT(*) FROM items").Scan(&n); err != nil || n != 0 {
			t.Fatalf("count = %d, %v: rolled-back row visible", n, err)
		}
		// A unique violation is recognised on both dialects.
		_, _ = d.Exec(ctx, "INSERT INTO items (name) VALUES (?)", "dup")
		_, err = d.Exec(ctx, "INSERT INTO items (name) VALUES (?)", "dup")
		if !db.IsUniqueViolation(err) {
			t.Fatalf("IsUniqueViolation(%v) = false", err)
		}
	})
}

// Many goroutines write and read at once: one writer discipline means no "database is locked".
func TestConcurrentWritersAndReaders(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		if err := d.Migrate(ctx, "test", testMigrations); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errc := make(chan error, 64)
		for g := 0; g < 8; g++ {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := 0; i < 25; i++ {
					err := d.WriteTx(ctx, func(tx *db.Tx) error {
						var n int
						if err := tx.QueryRow(ctx, "SELECT COUNT(*) FROM items").Scan(&n); err != nil {
							return err
						}
						_, err := tx.Exec(ctx, "INSERT INTO items (name, n) VALUES (?, ?)", fmt.Sprintf("g%d-%d", g, i), n)
						return err
					})
					if err != nil {
						errc <- err
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				for i := 0; i < 25; i++ {
					err := d.ReadTx(ctx, func(tx *db.Tx) error {
						var n int
						return tx.QueryRow(ctx, "SELECT COUNT(*) FROM items").Scan(&n)
					})
					if err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		var n int
		if err := d.QueryRow(ctx, "SELECT COUNT(*) FROM items").Scan(&n); err != nil || n != 200 {
			t.Fatalf("count = %d, %v; want 200", n, err)
		}
	})
}

func TestSQLiteReadersAreQueryOnly(t *testing.T) {
	d := dbtest.SQLite(t)
	ctx := context.Background()
	if err := d.Migrate(ctx, "test", testMigrations); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Reader().ExecContext(ctx, "INSERT INTO items (name) VALUES ('r')"); err == nil {
		t.Fatal("reader pool accepted a write")
	}
}

func TestSQLiteReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "hone.db")
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Migrate(ctx, "test", testMigrations); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(ctx, "INSERT INTO items (name) VALUES (?)", "kept"); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var name string
	if err := d.QueryRow(ctx, "SELECT name FROM items").Scan(&name); err != nil || name != "kept" {
		t.Fatalf("after reopen: %q, %v", name, err)
	}
	if d.Dialect() != db.SQLite || d.String() != "sqlite:"+path {
		t.Fatalf("dialect/string = %v %q", d.Dialect(), d.String())
	}
}

func TestTimeFormatSortsAsText(t *testing.T) {
	a := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	b := a.Add(time.Microsecond)
	if !(db.FormatTime(a) < db.FormatTime(b)) {
		t.Fatal("formatted times do not sort")
	}
	back, err := db.ParseTime(db.FormatTime(a))
	if err != nil || !back.Equal(a) {
		t.Fatalf("round trip %v %v", back, err)
	}
}

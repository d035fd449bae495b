package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

func readAll(t *testing.T, s Store, hash string) ([]byte, error) {
	t.Helper()
	rc, err := s.Open(context.Background(), hash)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// Both backends: multi-chunk round trip, the empty blob, deduplication, unknown hashes.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	stores := map[string]func(t *testing.T) Store{
		"dir": func(t *testing.T) Store { return Dir{Root: t.TempDir()} },
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) { roundTrip(t, ctx, open(t)) })
	}
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		s := NewDB(d)
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		roundTrip(t, ctx, s)
		var chunks int
		big := sum(randomBytes(2*ChunkSize+12345, 7))
		if err := d.QueryRow(ctx, `SELECT COUNT(*) FROM blob_chunks WHERE hash = ?`, big).Scan(&chunks); err != nil || chunks != 3 {
			t.Fatalf("chunks of a 2.01 MiB blob: %d, %v; want 3", chunks, err)
		}
		if err := d.QueryRow(ctx, `SELECT COUNT(*) FROM blob_chunks WHERE hash LIKE 'tmp-%'`).Scan(&chunks); err != nil || chunks != 0 {
			t.Fatalf("temporary chunks left: %d, %v", chunks, err)
		}
	})
}

func roundTrip(t *testing.T, ctx context.Context, s Store) {
	for _, n := range []int{0, 1, ChunkSize, 2*ChunkSize + 12345} {
		data := randomBytes(n, 7)
		info, err := s.Put(ctx, bytes.NewReader(data))
		if err != nil {
			t.Fatalf("put %d bytes: %v", n, err)
		}
		if info.Hash != sum(data) || info.Size != int64(n) {
			t.Fatalf("put %d bytes: %+v", n, info)
		}
		again, err := s.Put(ctx, bytes.NewReader(data))
		if err != nil || again != info {
			t.Fatalf("second put: %+v, %v", again, err)
		}
		got, err := readAll(t, s, info.Hash)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes back: %d bytes, %v", n, len(got), err)
		}
	}
	if _, err := s.Open(ctx, sum([]byte("never stored"))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open of an unknown blob: %v", err)
	}
	if _, err := s.Open(ctx, "../../etc/passwd"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open of a path: %v", err)
	}
}

// A blob whose stored bytes were changed is refused at the end of its stream, and the cache
// keeps nothing of it; a blob damaged only in transit is fetched again and kept whole; a
// damaged local copy is found and replaced.
func TestCorruptRefusedAndRefetched(t *testing.T) {
	ctx := context.Background()
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		remote := NewDB(d)
		if err := remote.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		data := randomBytes(ChunkSize+100, 3)
		writer := &Cache{Remote: remote, Dir: Dir{Root: t.TempDir()}}
		info, err := writer.Put(ctx, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}

		// Damaged in transit on the first fetch only: refused, fetched again, kept.
		flaky := &corruptOnce{Store: remote}
		reader := &Cache{Remote: flaky, Dir: Dir{Root: t.TempDir()}}
		p, err := reader.Path(ctx, info.Hash)
		if err != nil {
			t.Fatalf("path after one corrupt fetch: %v", err)
		}
		if flaky.opens != 2 {
			t.Fatalf("fetches: %d, want 2 (the corrupt one refused, then again)", flaky.opens)
		}
		if got, _ := os.ReadFile(p); !bytes.Equal(got, data) {
			t.Fatal("the kept copy is not the blob")
		}

		// A damaged local copy: a fresh process (a new Cache on the same directory) finds it
		// and fetches the blob again.
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("damaged"), 0o644); err != nil {
			t.Fatal(err)
		}
		again := &Cache{Remote: remote, Dir: reader.Dir}
		p2, err := again.Path(ctx, info.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p2); !bytes.Equal(got, data) {
			t.Fatal("the damaged local copy was answered")
		}

		// Damaged in the store: every fetch is refused, nothing is kept.
		if _, err := d.Exec(ctx, `UPDATE blob_chunks SET data = ? WHERE hash = ? AND seq = 1`, []byte("xx"), info.Hash); err != nil {
			t.Fatal(err)
		}
		if got, err := readAll(t, remote, info.Hash); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("reading a damaged blob: %d bytes, %v; want ErrCorrupt", len(got), err)
		}
		fresh := &Cache{Remote: remote, Dir: Dir{Root: t.TempDir()}}
		if _, err := fresh.Path(ctx, info.Hash); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("path of a damaged blob: %v; want ErrCorrupt", err)
		}
		left, _ := filepath.Glob(filepath.Join(fresh.Dir.Root, "*", "*"))
		tmps, _ := filepath.Glob(filepath.Join(fresh.Dir.Root, ".tmp-*"))
		if len(left)+len(tmps) != 0 {
			t.Fatalf("the cache kept %v %v of a damaged blob", left, tmps)
		}
	})
}

// corruptOnce flips a byte of the first blob it serves.
type corruptOnce struct {
	Store
	opens int
}

func (c *corruptOnce) Open(ctx context.Context, hash string) (io.ReadCloser, error) {
	c.opens++
	rc, err := c.Store.Open(ctx, hash)
	if err != nil || c.opens > 1 {
		return rc, err
	}
	return flipFirst{rc}, nil
}

type flipFirst struct{ io.ReadCloser }

func (f flipFirst) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if n > 0 {
		p[0] ^= 0xff
	}
	return n, err
}

// Names: written once, looked up, the same blob named again is fine, another is refused.
func TestNames(t *testing.T) {
	ctx := context.Background()
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		s := NewDB(d)
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		a, _ := s.Put(ctx, bytes.NewReader([]byte("a")))
		b, _ := s.Put(ctx, bytes.NewReader([]byte("b")))
		if err := s.Name(ctx, "upload/e", "file-1", a); err != nil {
			t.Fatal(err)
		}
		if err := s.Name(ctx, "upload/e", "file-1", a); err != nil {
			t.Fatalf("naming the same blob again: %v", err)
		}
		if err := s.Name(ctx, "upload/e", "file-1", b); !errors.Is(err, ErrExists) {
			t.Fatalf("renaming to another blob: %v", err)
		}
		if got, err := s.Lookup(ctx, "upload/e", "file-1"); err != nil || got != a {
			t.Fatalf("lookup: %+v %v", got, err)
		}
		if _, err := s.Lookup(ctx, "upload/other", "file-1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("lookup in another namespace: %v", err)
		}
	})
}

// GC deletes unreferenced blobs past the grace period, with their chunks, and keeps
// referenced ones, named ones, and recent ones; a blob stored again is recent again.
func TestGC(t *testing.T) {
	ctx := context.Background()
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		s := NewDB(d)
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Exec(ctx, `CREATE TABLE users_of_blobs (hash TEXT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-2 * time.Hour)
		timeNow = func() time.Time { return old }
		put := func(b []byte) Info {
			info, err := s.Put(ctx, bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			return info
		}
		ref, named, orphan, reused := put([]byte("ref")), put([]byte("named")), put(randomBytes(ChunkSize+1, 9)), put([]byte("reused"))
		timeNow = time.Now
		t.Cleanup(func() { timeNow = time.Now })
		recent := put([]byte("recent"))
		d.Exec(ctx, `INSERT INTO users_of_blobs (hash) VALUES (?)`, ref.Hash)
		if err := s.Name(ctx, "ns", "n", named); err != nil {
			t.Fatal(err)
		}
		if again := put([]byte("reused")); again != reused {
			t.Fatal(again)
		}
		n, size, err := s.GC(ctx, time.Hour, `SELECT hash FROM users_of_blobs`)
		if err != nil || n != 1 || size != orphan.Size {
			t.Fatalf("gc: %d blobs, %d bytes, %v; want the orphan only", n, size, err)
		}
		for _, i := range []Info{ref, named, recent, reused} {
			if _, err := readAll(t, s, i.Hash); err != nil {
				t.Fatalf("kept blob %s: %v", i.Hash, err)
			}
		}
		if _, err := s.Open(ctx, orphan.Hash); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the orphan: %v", err)
		}
		var chunks int
		d.QueryRow(ctx, `SELECT COUNT(*) FROM blob_chunks WHERE hash = ?`, orphan.Hash).Scan(&chunks)
		if chunks != 0 {
			t.Fatalf("%d chunks of the orphan left", chunks)
		}
	})
}

// TestPutWithWholeOrNothing: PutWith stores a blob, its name and the caller's rows together;
// when the record fails, the reader fails half-way or the record is refused for a blob stored
// already, nothing of that attempt is kept (no blob, chunk, name or local file), and a blob
// stored before stays as it was.
func TestPutWithWholeOrNothing(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		remote := NewDB(d)
		if err := remote.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		c := &Cache{Remote: remote, Dir: Dir{Root: dir}}
		data := randomBytes(2*ChunkSize+99, 3)
		count := func() (n int) {
			for _, q := range []string{`SELECT COUNT(*) FROM blobs`, `SELECT COUNT(*) FROM blob_chunks`, `SELECT COUNT(*) FROM blob_names`} {
				var k int
				if err := d.QueryRow(ctx, q).Scan(&k); err != nil {
					t.Fatal(err)
				}
				n += k
			}
			entries, _ := os.ReadDir(dir)
			return n + len(entries)
		}
		refuse := errors.New("refused")
		name := func(tx *db.Tx, info Info) error { _, err := NameTx(ctx, tx, "ns", "a", info); return err }
		if _, err := c.PutWith(ctx, bytes.NewReader(data), func(tx *db.Tx, info Info) error {
			if err := name(tx, info); err != nil {
				return err
			}
			return refuse
		}); !errors.Is(err, refuse) {
			t.Fatalf("record refused: %v", err)
		}
		if n := count(); n != 0 {
			t.Fatalf("%d rows and files left after a refused record", n)
		}
		if _, err := c.PutWith(ctx, io.MultiReader(bytes.NewReader(data[:ChunkSize+5]), iotest.ErrReader(refuse)), name); !errors.Is(err, refuse) {
			t.Fatalf("reader failing half-way: %v", err)
		}
		if n := count(); n != 0 {
			t.Fatalf("%d rows and files left after a reader failed", n)
		}
		info, err := c.PutWith(ctx, bytes.NewReader(data), name)
		if err != nil || info.Hash != sum(data) {
			t.Fatalf("put: %v %v", info, err)
		}
		if got, err := remote.Lookup(ctx, "ns", "a"); err != nil || got != info {
			t.Fatalf("name: %v %v", got, err)
		}
		before := count()
		if _, err := c.PutWith(ctx, bytes.NewReader(data), func(tx *db.Tx, info Info) error {
			if _, err := NameTx(ctx, tx, "ns", "b", info); err != nil {
				return err
			}
			return refuse
		}); !errors.Is(err, refuse) {
			t.Fatal(err)
		}
		if count() != before {
			t.Fatal("a refused record of a stored blob changed the store")
		}
		if _, err := remote.Lookup(ctx, "ns", "b"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the refused name: %v", err)
		}
		if p, err := c.Path(ctx, info.Hash); err != nil {
			t.Fatal(err)
		} else if b, _ := os.ReadFile(p); !bytes.Equal(b, data) {
			t.Fatal("the stored blob changed")
		}
		// A name is given once: another blob under it is refused, in the transaction.
		if _, err := c.PutWith(ctx, bytes.NewReader(data[:10]), name); !errors.Is(err, ErrExists) {
			t.Fatalf("a taken name: %v", err)
		}
	})
}

// TestSweepTemp: the temporary files a killed writer left are removed once they are older
// than the age given, and nothing else is.
func TestSweepTemp(t *testing.T) {
	root := t.TempDir()
	old := time.Now().Add(-2 * time.Hour)
	files := map[string]bool{ // path: removed
		"ab/.tmp-1": true, "e/wandb/.upload-2": true, "e/wandb/.publish-3": true, "e/.upload-4": true,
		"e/wandb/0123": false, "ab/abcd": false, ".tmpx": false,
	}
	for p := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("12345"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(full, old, old); err != nil {
			t.Fatal(err)
		}
	}
	fresh := filepath.Join(root, "ab", ".tmp-fresh") // being written
	if err := os.WriteFile(fresh, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n, size, err := SweepTemp(root, time.Hour)
	if err != nil || n != 4 || size != 20 {
		t.Fatalf("swept %d files of %d bytes, %v; want 4 of 20", n, size, err)
	}
	for p, removed := range files {
		if _, err := os.Stat(filepath.Join(root, p)); (err != nil) != removed {
			t.Errorf("%s: removed %v, want %v", p, err != nil, removed)
		}
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Error("a temporary file being written was removed")
	}
	if n, _, err := SweepTemp(filepath.Join(root, "none"), time.Hour); n != 0 || err != nil {
		t.Fatalf("a missing root: %d %v", n, err)
	}
}

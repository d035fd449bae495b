package wandb

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/quota"
)

// TestSizesPast2GiB: a database made by the first schema (32-bit sizes on PostgreSQL, where
// recording a run file of 2 GiB failed: "unable to encode 2147483648 into binary format for
// int4") is migrated, and sizes of 5 GiB are then recorded and read back on both stores.
func TestSizesPast2GiB(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		if err := d.Migrate(ctx, "wandb", migrations[:1]); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Exec(ctx, `INSERT INTO wandb_run_files (entity, project, run, name, md5, size, updated_at) VALUES ('e', 'p', 'r', 'old', 'x', 100, 't')`); err != nil {
			t.Fatal(err)
		}
		s, err := Open(ctx, d, t.TempDir()) // migrates to the current schema
		if err != nil {
			t.Fatal(err)
		}
		const big = int64(5) << 30
		err = d.WriteTx(ctx, func(tx *db.Tx) error {
			return s.recordUpload(ctx, tx, Upload{Entity: "e", Kind: UploadRunFile, Project: "p", Run: "r", Name: "model.bin"}, "00", big)
		})
		if err != nil {
			t.Fatalf("recording a 5 GiB run file: %v", err)
		}
		if _, err := d.Exec(ctx, `INSERT INTO wandb_artifacts (id, entity, project, type, collection, version_index, digest, state, description, metadata, pending_aliases, run_name, manifest_md5, size, created_at, updated_at)
			VALUES ('a', 'e', 'p', 't', 'c', 0, 'd', 'COMMITTED', '', '{}', '[]', '', '', ?, 't', 't')`, big); err != nil {
			t.Fatalf("an artifact of 5 GiB: %v", err)
		}
		var old, file, art int64
		if err := d.QueryRow(ctx, `SELECT (SELECT size FROM wandb_run_files WHERE name = 'old'), (SELECT size FROM wandb_run_files WHERE name = 'model.bin'), (SELECT size FROM wandb_artifacts WHERE id = 'a')`).Scan(&old, &file, &art); err != nil {
			t.Fatal(err)
		}
		if old != 100 || file != big || art != big {
			t.Fatalf("sizes read back: %d %d %d", old, file, art)
		}
	})
}

// TestUploadWholeOrNothing: a run file whose row cannot be written (a trigger refuses it) is
// not kept anywhere: no file in the files directory, no blob, no name, no copy in the node's
// cache, no temporary file; once the row can be written the same upload is stored whole. On
// both stores, with files in the directory and as shared blobs.
func TestUploadWholeOrNothing(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		for _, shared := range []bool{false, true} {
			name := "directory"
			if shared {
				name = "blobs"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				dir := t.TempDir()
				s, err := Open(ctx, d, filepath.Join(dir, "files"))
				if err != nil {
					t.Fatal(err)
				}
				if shared {
					remote := blob.NewDB(d)
					if err := remote.Migrate(ctx); err != nil {
						t.Fatal(err)
					}
					s.UseBlobs(&blob.Cache{Remote: remote, Dir: blob.Dir{Root: filepath.Join(dir, "cache")}})
				}
				body := strings.Repeat("0123456789abcdef", (3<<20)/16+7) // 3 MiB and a bit: several chunks
				sum := md5.Sum([]byte(body))
				md5hex := hex.EncodeToString(sum[:])
				failRunFiles(t, d, true)
				tok, err := s.NewUpload(ctx, Upload{Entity: "e", Kind: UploadRunFile, Project: "p", Run: "r", Name: "out-" + name + ".log"})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.PutUpload(ctx, tok, strings.NewReader(body), ""); err == nil || !strings.Contains(err.Error(), "injected") {
					t.Fatalf("upload with its row refused: %v", err)
				}
				left := leftovers(t, d, dir)
				if _, err := s.BlobPath("e", md5hex); !errors.Is(err, ErrNotFound) || len(left) > 0 {
					t.Fatalf("after a failed upload: BlobPath %v, left %v", err, left)
				}
				failRunFiles(t, d, false)
				if err := s.PutUpload(ctx, tok, strings.NewReader(body), ""); err != nil {
					t.Fatal(err)
				}
				p, err := s.BlobPath("e", md5hex)
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := os.ReadFile(p); string(b) != body {
					t.Fatalf("stored %d bytes, want %d", len(b), len(body))
				}
				var size int64
				if err := d.QueryRow(ctx, `SELECT size FROM wandb_run_files WHERE name = ?`, "out-"+name+".log").Scan(&size); err != nil || size != int64(len(body)) {
					t.Fatalf("the run file's row: %d %v", size, err)
				}
				// A second failing upload of the same bytes leaves the stored file alone.
				failRunFiles(t, d, true)
				tok2, _ := s.NewUpload(ctx, Upload{Entity: "e", Kind: UploadRunFile, Project: "p", Run: "r", Name: "again-" + name + ".log"})
				if err := s.PutUpload(ctx, tok2, strings.NewReader(body), ""); err == nil {
					t.Fatal("the second upload was stored")
				}
				failRunFiles(t, d, false)
				if p, err := s.BlobPath("e", md5hex); err != nil {
					t.Fatalf("the first upload's file after a failed second: %v", err)
				} else if b, _ := os.ReadFile(p); string(b) != body {
					t.Fatal("the first upload's file changed")
				}
				if _, err := d.Exec(ctx, `DELETE FROM wandb_run_files`); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// failRunFiles makes every insert into wandb_run_files fail (on) or work again (off), with a
// trigger of the store: a fault of the database itself, after the file's bytes are in.
func failRunFiles(t *testing.T, d *db.DB, on bool) {
	t.Helper()
	ctx := context.Background()
	var stmts []string
	switch {
	case on && d.Dialect() == db.Postgres:
		stmts = []string{`CREATE OR REPLACE FUNCTION hone_test_fail() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$ LANGUAGE plpgsql`,
			`CREATE TRIGGER hone_test_fail BEFORE INSERT ON wandb_run_files FOR EACH ROW EXECUTE FUNCTION hone_test_fail()`}
	case on:
		stmts = []string{`CREATE TRIGGER hone_test_fail BEFORE INSERT ON wandb_run_files BEGIN SELECT RAISE(ABORT, 'injected fault'); END`}
	case d.Dialect() == db.Postgres:
		stmts = []string{`DROP TRIGGER hone_test_fail ON wandb_run_files`}
	default:
		stmts = []string{`DROP TRIGGER hone_test_fail`}
	}
	for _, q := range stmts {
		if _, err := d.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// leftovers lists what an upload may leave behind: blobs and names in the store, and the
// files under dir (the files directory and the node's cache), temporary ones included.
func leftovers(t *testing.T, d *db.DB, dir string) []string {
	t.Helper()
	var out []string
	ctx := context.Background()
	for _, q := range []string{`SELECT COUNT(*) FROM blobs`, `SELECT COUNT(*) FROM blob_chunks`, `SELECT COUNT(*) FROM blob_names`, `SELECT COUNT(*) FROM wandb_run_files`} {
		var n int
		if err := d.QueryRow(ctx, q).Scan(&n); err == nil && n > 0 {
			out = append(out, q+": "+strings.Repeat("x", n))
		}
	}
	filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestNewUploads: many uploads announced at once (createRunFiles) get distinct tokens in
// their order, each of which stores its file; both stores, across batches.
func TestNewUploads(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, err := Open(ctx, d, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		n := 2*uploadBatch + 7
		us := make([]Upload, n)
		for i := range us {
			us[i] = Upload{Entity: "e", Kind: UploadRunFile, Project: "p", Run: "r", Name: fmt.Sprintf("f%05d", i)}
		}
		tokens, err := s.NewUploads(ctx, us)
		if err != nil || len(tokens) != n {
			t.Fatalf("%d tokens, %v", len(tokens), err)
		}
		seen := map[string]bool{}
		for _, tok := range tokens {
			if seen[tok] || len(tok) != 48 {
				t.Fatalf("token %q repeated or malformed", tok)
			}
			seen[tok] = true
		}
		for _, i := range []int{0, uploadBatch, n - 1} {
			if err := s.PutUpload(ctx, tokens[i], strings.NewReader(fmt.Sprint(i)), ""); err != nil {
				t.Fatal(err)
			}
			var size int64
			if err := d.QueryRow(ctx, `SELECT size FROM wandb_run_files WHERE name = ?`, us[i].Name).Scan(&size); err != nil || size != int64(len(fmt.Sprint(i))) {
				t.Fatalf("upload %d stored as %d bytes, %v", i, size, err)
			}
		}
	})
}

// TestUploadLimits: an upload past MaxUpload is a too-large fault naming --max-upload-size
// and one past its entity's quota a forbidden fault naming --entity-quota, both before any
// byte is written when the length is announced and as soon as the body passes otherwise;
// nothing of a refused upload is kept; a file stored again is not charged again. Both
// stores, files directory and shared blobs.
func TestUploadLimits(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		for _, shared := range []bool{false, true} {
			name := map[bool]string{false: "directory", true: "blobs"}[shared]
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				dir := t.TempDir()
				s, err := Open(ctx, d, filepath.Join(dir, "files"))
				if err != nil {
					t.Fatal(err)
				}
				if shared {
					remote := blob.NewDB(d)
					if err := remote.Migrate(ctx); err != nil {
						t.Fatal(err)
					}
					s.UseBlobs(&blob.Cache{Remote: remote, Dir: blob.Dir{Root: filepath.Join(dir, "cache")}})
				}
				entity := "lim-" + name
				if s.Quota, err = quota.Open(ctx, d, 3000); err != nil {
					t.Fatal(err)
				}
				s.MaxUpload = 2000
				up := func(body string, length int64) error {
					tok, err := s.NewUpload(ctx, Upload{Entity: entity, Kind: UploadRunFile, Project: "p", Run: "r", Name: fmt.Sprintf("f%d", len(body))})
					if err != nil {
						t.Fatal(err)
					}
					return s.PutUploadSized(ctx, tok, strings.NewReader(body), "", length)
				}
				check := func(what string, put func() error, kind fault.Kind, flag string) {
					t.Helper()
					before := strings.Join(leftovers(t, d, dir), "\n")
					err := put()
					if f, ok := fault.As(err); !ok || f.Kind != kind || f.Field != "body" || !strings.Contains(f.Msg, flag) {
						t.Fatalf("%s: %v", what, err)
					}
					if after := strings.Join(leftovers(t, d, dir), "\n"); after != before {
						t.Fatalf("%s changed what is stored:\n%s\nto\n%s", what, before, after)
					}
				}
				big := strings.Repeat("x", 2001)
				check("announced over the limit", func() error { return up(big, 2001) }, fault.KindTooLarge, "--max-upload-size")
				check("streamed over the limit", func() error { return up(big, -1) }, fault.KindTooLarge, "--max-upload-size")
				if err := up(strings.Repeat("a", 1500), 1500); err != nil {
					t.Fatal(err)
				}
				if err := up(strings.Repeat("a", 1500), -1); err != nil { // the same bytes: not charged again
					t.Fatal(err)
				}
				if n, _ := s.Quota.Usage(ctx, entity); n != 1500 {
					t.Fatalf("usage %d after one file stored twice", n)
				}
				check("announced past the quota", func() error { return up(strings.Repeat("b", 1501), 1501) }, fault.KindForbidden, "--entity-quota")
				check("streamed past the quota", func() error { return up(strings.Repeat("b", 1501), -1) }, fault.KindForbidden, "--entity-quota")
				if err := up(strings.Repeat("c", 1500), -1); err != nil { // exactly the quota
					t.Fatal(err)
				}
				if n, _ := s.Quota.Usage(ctx, entity); n != 3000 {
					t.Fatalf("usage %d, want 3000", n)
				}
				check("a byte more", func() error { return up("d", 1) }, fault.KindForbidden, "--entity-quota")
				if _, err := d.Exec(ctx, `DELETE FROM wandb_run_files`); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

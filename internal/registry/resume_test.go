package registry

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// TestResumeStates: a job's resume state, on one node's disk and across two nodes sharing a
// blob store: the latest saved state is read back (on the other node, from the blobs), a
// later save replaces it, DropResumes keeps only the named job's, DropResume and deleting
// the model forget it, and the blob collector sees its files as referenced.
func TestResumeStates(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		remote := blob.NewDB(d)
		if err := remote.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		for _, shared := range []bool{false, true} {
			node := func() *Registry {
				dir := t.TempDir()
				r, err := New(ctx, d, filepath.Join(dir, "checkpoints"))
				if err != nil {
					t.Fatal(err)
				}
				if shared {
					c := &blob.Cache{Remote: remote, Dir: blob.Dir{Root: filepath.Join(dir, "cache", "blobs")}}
					if err := r.UseBlobs(ctx, c, filepath.Join(dir, "cache")); err != nil {
						t.Fatal(err)
					}
				}
				return r
			}
			a := node()
			b := a
			if shared {
				b = node()
			}
			m, _, err := a.Create(ctx, Model{Entity: "e", Project: "p", Name: "resume-" + map[bool]string{false: "local", true: "shared"}[shared], BaseModel: "demo"}, false)
			if err != nil {
				t.Fatal(err)
			}
			save := func(job, content string) {
				t.Helper()
				dir := a.ResumeDir(m.ID, job)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "resume.json"), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := a.StoreResume(ctx, m.ID, job); err != nil {
					t.Fatal(err)
				}
			}
			read := func(job string) (string, error) {
				t.Helper()
				p, err := b.ResumePath(ctx, m.ID, job)
				if err != nil {
					return "", err
				}
				got, err := os.ReadFile(filepath.Join(p, "resume.json"))
				if err != nil {
					t.Fatal(err)
				}
				return string(got), nil
			}
			if _, err := read("j1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("shared %v: a job with no state: %v", shared, err)
			}
			save("j1", "one")
			save("j1", "two")
			save("j2", "other")
			if got, err := read("j1"); err != nil || got != "two" {
				t.Fatalf("shared %v: j1 reads %q, %v", shared, got, err)
			}
			if shared {
				refs, err := a.BlobRefs(ctx)
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, q := range refs {
					var n int
					if err := d.QueryRow(ctx, `SELECT COUNT(*) FROM (`+q+`) x`).Scan(&n); err != nil {
						t.Fatal(err)
					}
					found = found || n > 0 && q == `SELECT hash FROM train_resume_files`
				}
				if !found {
					t.Fatalf("the blob collector does not see the resume states' files: %v", refs)
				}
			}
			if err := a.DropResumes(ctx, m.ID, "j2"); err != nil {
				t.Fatal(err)
			}
			if _, err := read("j1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("shared %v: j1 after DropResumes keeping j2: %v", shared, err)
			}
			if got, err := read("j2"); err != nil || got != "other" {
				t.Fatalf("shared %v: j2 reads %q, %v", shared, got, err)
			}
			if err := a.DropResume(ctx, m.ID, "j2"); err != nil {
				t.Fatal(err)
			}
			if _, err := read("j2"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("shared %v: j2 after DropResume: %v", shared, err)
			}
			save("j3", "three")
			if _, err := a.Delete(ctx, m.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := read("j3"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("shared %v: j3 after the model's deletion: %v", shared, err)
			}
		}
	})
}

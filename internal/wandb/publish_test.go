package wandb

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// TestManifestDigest: the digest the wandb SDK (0.31.0) computes for a manifest of two files
// (ArtifactManifestV1.digest, from wandb.Artifact.add_file of "hello\n" and `{"r": 8}\n`).
func TestManifestDigest(t *testing.T) {
	m := Manifest{Contents: map[string]ManifestEntry{
		"a.txt":  {Digest: "sZRqySSS0jR8YjW00mERhA==", Size: 6},
		"b.json": {Digest: "80PQnogC4TaTrHS+yfrvGg==", Size: 9},
	}}
	if got := ManifestDigest(m); got != "ed5ef34a5069cb477ba8e2f2f6c566bc" {
		t.Fatalf("digest %s", got)
	}
}

// TestPublish: a version Hone publishes is committed at once, read back by alias with its
// files (their MD5 digests in the manifest the SDK reads); the same files published again
// are the same version; the SDK's createArtifact of the same digest finds it; deleting the
// latest version moves "latest" to the newest left; a collection of another type is refused.
func TestPublish(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, err := Open(ctx, d, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		write := func(name, content string) string {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}
		files := []PublishFile{{Name: "a.txt", Path: write("a.txt", "hello\n")}, {Name: "b.json", Path: write("b.json", "{\"r\": 8}\n")}}
		in := PublishInput{Entity: "e", Project: "p", Type: "lora", Collection: "m", RunName: "m", Files: files,
			Metadata: map[string]any{"step": 1}, Aliases: []string{"step1"}, Latest: true}
		a, err := s.Publish(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if a.State != "COMMITTED" || a.Version() != "v0" || a.Digest != "ed5ef34a5069cb477ba8e2f2f6c566bc" {
			t.Fatalf("published %+v", a)
		}
		got, err := s.ArtifactByName(ctx, "e", "p", "m", "step1")
		if err != nil || got.ID != a.ID || got.Metadata != `{"step":1}` {
			t.Fatalf("by alias: %+v %v", got, err)
		}
		local, err := s.LocalFiles(ctx, got)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(local["b.json"]); string(b) != "{\"r\": 8}\n" || len(local) != 2 {
			t.Fatalf("files %v", local)
		}
		m, _ := s.Manifest(ctx, got)
		if m.Contents["a.txt"].Digest != "sZRqySSS0jR8YjW00mERhA==" || m.Size() != 15 || m.StoragePolicy != "wandb-storage-policy-v1" {
			t.Fatalf("manifest %+v", m)
		}
		// The same files: the same version.
		if again, err := s.Publish(ctx, in); err != nil || again.ID != a.ID {
			t.Fatalf("published again: %+v %v", again, err)
		}
		// The SDK logging the same files gets the committed version back.
		if c, err := s.CreateArtifact(ctx, CreateInput{Entity: "e", Project: "p", Type: "lora", Collection: "m", Digest: a.Digest}); err != nil || c.ID != a.ID {
			t.Fatalf("createArtifact of the same digest: %+v %v", c, err)
		}
		// A second version takes "latest"; deleting it gives "latest" back to v0.
		in2 := in
		in2.Files = []PublishFile{{Name: "a.txt", Path: write("a2.txt", "other\n")}}
		in2.Aliases = []string{"step2"}
		b, err := s.Publish(ctx, in2)
		if err != nil || b.Version() != "v1" {
			t.Fatalf("second version %+v %v", b, err)
		}
		if l, _ := s.ArtifactByName(ctx, "e", "p", "m", "latest"); l.ID != b.ID {
			t.Fatalf("latest is %s, not v1", l.Version())
		}
		if err := s.DeleteVersion(ctx, "e", b.ID); err != nil {
			t.Fatal(err)
		}
		if l, err := s.ArtifactByName(ctx, "e", "p", "m", "latest"); err != nil || l.ID != a.ID {
			t.Fatalf("latest after deleting v1: %+v %v", l, err)
		}
		if _, err := s.ArtifactByName(ctx, "e", "p", "m", "step2"); err == nil {
			t.Fatal("the deleted version's alias still answers")
		}
		in3 := in
		in3.Type = "dataset"
		if _, err := s.Publish(ctx, in3); err == nil {
			t.Fatal("a lora collection took a dataset version")
		}
	})
}

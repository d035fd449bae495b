package wandb

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/fault"
)

func b64md5(b []byte) string {
	s := md5.Sum(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

// logOne creates, uploads and commits a one-file artifact as the SDK does.
func logOne(t *testing.T, s *Service, entity, project, name, file string, content []byte, aliases ...string) Artifact {
	t.Helper()
	ctx := context.Background()
	a, err := s.CreateArtifact(ctx, CreateInput{Entity: entity, Project: project, Type: "dataset", Collection: name, Digest: b64md5(content), Aliases: aliases})
	if err != nil {
		t.Fatal(err)
	}
	if a.State == "COMMITTED" {
		return a
	}
	tok, _ := s.NewUpload(ctx, Upload{Entity: entity, Kind: UploadFile, ArtifactID: a.ID, MD5: b64md5(content)})
	if err := s.PutUpload(ctx, tok, strings.NewReader(string(content)), ""); err != nil {
		t.Fatal(err)
	}
	m, _ := json.Marshal(Manifest{Version: 1, Contents: map[string]ManifestEntry{file: {Digest: b64md5(content), Size: int64(len(content))}}})
	tok, _ = s.NewUpload(ctx, Upload{Entity: entity, Kind: UploadManifest, ArtifactID: a.ID})
	if err := s.PutUpload(ctx, tok, strings.NewReader(string(m)), b64md5(m)); err != nil {
		t.Fatal(err)
	}
	if a, err = s.CommitArtifact(ctx, entity, a.ID); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestArtifactsAndRuns(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, err := Open(ctx, d, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Open(ctx, d, t.TempDir()); err != nil { // twice: the signing secret stays
			t.Fatal(err)
		}

		// Versions, aliases, deduplication.
		v0 := logOne(t, s, "e", "p", "data", "train.jsonl", []byte("one\n"), "best")
		v1 := logOne(t, s, "e", "p", "data", "train.jsonl", []byte("two\n"))
		if v0.Version() != "v0" || v1.Version() != "v1" || strings.Join(v0.Aliases, ",") != "best,latest" || strings.Join(v1.Aliases, ",") != "latest" {
			t.Fatalf("versions %+v %+v", v0, v1)
		}
		if again := logOne(t, s, "e", "p", "data", "train.jsonl", []byte("one\n")); again.ID != v0.ID {
			t.Fatalf("dedup: %+v", again)
		}
		for nv, want := range map[string]string{"data:v0": "one\n", "data:best": "one\n", "data:latest": "two\n", "data": "two\n"} {
			p, err := s.ResolveFile(ctx, "e", "p", nv, "train.jsonl")
			b, _ := os.ReadFile(p)
			if err != nil || string(b) != want {
				t.Errorf("%s: %q %v", nv, b, err)
			}
		}
		for _, c := range []struct{ entity, nv, file, says string }{
			{"e", "data:v9", "train.jsonl", "e/p/data:v9 not found"},
			{"e", "nope", "train.jsonl", "e/p/nope not found"},
			{"o", "data:v0", "train.jsonl", "o/p/data:v0 not found"}, // another entity's: not found
			{"e", "data:v0", "other.jsonl", "has no file other.jsonl"},
		} {
			_, err := s.ResolveFile(ctx, c.entity, "p", c.nv, c.file)
			if !fault.Is(err, fault.KindNotFound) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%s %s: %v", c.nv, c.file, err)
			}
		}
		vs, err := s.Versions(ctx, "e", "p", "data", "dataset")
		if err != nil || len(vs) != 2 || vs[0].ID != v1.ID {
			t.Fatalf("versions: %v %v", vs, err)
		}
		if _, err := s.CreateArtifact(ctx, CreateInput{Entity: "e", Project: "p", Type: "model", Collection: "data", Digest: "x"}); !fault.Is(err, fault.KindConflict) {
			t.Fatalf("type change: %v", err)
		}
		if _, err := s.ArtifactByID(ctx, "o", v0.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another entity's artifact by id: %v", err)
		}
		meta := `{"k":1}`
		if a, err := s.UpdateArtifact(ctx, "e", v0.ID, &meta, nil, []string{"keep"}); err != nil || a.Metadata != meta || strings.Join(a.Aliases, ",") != "best,keep" {
			t.Fatalf("update: %+v %v", a, err)
		}

		// A pending artifact cannot be committed before its manifest and files are uploaded.
		p, _ := s.CreateArtifact(ctx, CreateInput{Entity: "e", Project: "p", Type: "dataset", Collection: "pending", Digest: "d"})
		if _, err := s.CommitArtifact(ctx, "e", p.ID); !fault.Is(err, fault.KindInvalid) || !strings.Contains(err.Error(), "manifest") {
			t.Fatalf("commit without manifest: %v", err)
		}
		m, _ := json.Marshal(Manifest{Contents: map[string]ManifestEntry{"x": {Digest: b64md5([]byte("never sent"))}}})
		tok, _ := s.NewUpload(ctx, Upload{Entity: "e", Kind: UploadManifest, ArtifactID: p.ID})
		if err := s.PutUpload(ctx, tok, strings.NewReader(string(m)), ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CommitArtifact(ctx, "e", p.ID); !fault.Is(err, fault.KindInvalid) || !strings.Contains(err.Error(), "file x was not uploaded") {
			t.Fatalf("commit without file: %v", err)
		}
		if _, err := s.ResolveFile(ctx, "e", "p", "pending:latest", "x"); !fault.Is(err, fault.KindNotFound) {
			t.Fatalf("uncommitted artifact resolved: %v", err)
		}

		// Uploads: MD5 checked, Content-MD5 checked, unknown and expired tokens refused.
		tok, _ = s.NewUpload(ctx, Upload{Entity: "e", Kind: UploadFile, ArtifactID: p.ID, MD5: b64md5([]byte("a"))})
		if err := s.PutUpload(ctx, tok, strings.NewReader("b"), ""); !fault.Is(err, fault.KindInvalid) {
			t.Fatalf("wrong md5: %v", err)
		}
		if err := s.PutUpload(ctx, tok, strings.NewReader("a"), b64md5([]byte("c"))); !fault.Is(err, fault.KindInvalid) {
			t.Fatalf("wrong Content-MD5: %v", err)
		}
		if err := s.PutUpload(ctx, "nope", strings.NewReader("a"), ""); !fault.Is(err, fault.KindNotFound) {
			t.Fatalf("unknown token: %v", err)
		}
		s.now = func() time.Time { return time.Now().Add(25 * time.Hour) }
		if err := s.PutUpload(ctx, tok, strings.NewReader("a"), ""); !fault.Is(err, fault.KindNotFound) {
			t.Fatalf("expired token: %v", err)
		}

		// Signed downloads expire and name their blob and entity.
		s.now = time.Now
		exp, sig := s.SignDownload("e", "0123456789abcdef0123456789abcdef")
		if !s.VerifyDownload("e", "0123456789abcdef0123456789abcdef", exp, sig) || s.VerifyDownload("o", "0123456789abcdef0123456789abcdef", exp, sig) ||
			s.VerifyDownload("e", "0123456789abcdef0123456789abcdef", exp+1, sig) {
			t.Fatal("signature checks")
		}
		s.now = func() time.Time { return time.Now().Add(2 * DownloadTTL) }
		if s.VerifyDownload("e", "0123456789abcdef0123456789abcdef", exp, sig) {
			t.Fatal("expired signature accepted")
		}
		s.now = time.Now
		if _, err := s.BlobPath("e", "../../etc/passwd"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("blob path traversal: %v", err)
		}

		// Runs: upsert merges config, the file stream keeps history by line and the summary.
		r, ins, err := s.UpsertRun(ctx, "e", "p", "r", RunInput{Config: `{"a":{"value":1}}`})
		if err != nil || !ins || r.State != "running" {
			t.Fatalf("upsert: %+v %v", r, err)
		}
		if r, ins, _ = s.UpsertRun(ctx, "e", "p", "r", RunInput{Config: `{"b":{"value":2}}`}); ins || r.Config != `{"a":{"value":1},"b":{"value":2}}` {
			t.Fatalf("upsert again: %+v", r)
		}
		h := map[string]StreamChunk{"wandb-history.jsonl": {Offset: 0, Content: []string{`{"_step":0}`, `{"_step":1}`}}}
		if err := s.Stream(ctx, "e", "p", "r", h, false, 0); err != nil {
			t.Fatal(err)
		}
		h = map[string]StreamChunk{"wandb-history.jsonl": {Offset: 1, Content: []string{`{"_step":1,"x":1}`, `{"_step":2}`}},
			"wandb-summary.json": {Offset: 0, Content: []string{`{"x":1}`}}}
		if err := s.Stream(ctx, "e", "p", "r", h, true, 1); err != nil {
			t.Fatal(err)
		}
		lines, _ := s.History(ctx, "e", "p", "r")
		r, _ = s.Run(ctx, "e", "p", "r")
		if strings.Join(lines, " ") != `{"_step":0} {"_step":1,"x":1} {"_step":2}` || r.HistoryLines != 3 || r.Summary != `{"x":1}` || r.State != "crashed" {
			t.Fatalf("stream: %v %+v", lines, r)
		}
		if err := s.Stream(ctx, "e", "p", "r", map[string]StreamChunk{"wandb-history.jsonl": {Content: []string{"{"}}}, false, 0); !fault.Is(err, fault.KindInvalid) {
			t.Fatalf("bad history line: %v", err)
		}
		if _, err := s.Run(ctx, "o", "p", "r"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another entity's run: %v", err)
		}
	})
}

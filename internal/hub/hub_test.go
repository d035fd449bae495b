package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/hub/hubtest"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/tokenizer"
)

// newClient is a client of srv with its cache in a temporary directory, small ranges (so
// that the tiny models are fetched in parallel ranges too) and short waits between tries.
func newClient(t *testing.T, srv *hubtest.Server) *Client {
	t.Helper()
	return &Client{Dir: filepath.Join(t.TempDir(), "models"), HFEndpoint: srv.URL, OllamaRegistry: srv.URL,
		HTTP: &http.Client{}, ParallelMin: 64 << 10, ChunkSize: 64 << 10, Retries: 4, Backoff: 1e6}
}

// tinyRepo writes a tiny random Llama (internal/synth) and returns its files by repository path.
func tinyRepo(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	if err := synth.Write(dir, synth.Tiny("llama")); err != nil {
		t.Fatal(err)
	}
	return filesOf(t, dir)
}

func filesOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		files[e.Name()] = filepath.Join(dir, e.Name())
	}
	return files
}

func mustParse(t *testing.T, s string) Ref {
	t.Helper()
	r, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// onlyRequests returns the requests whose line has one of the prefixes.
func onlyRequests(reqs []string, prefixes ...string) []string {
	var out []string
	for _, r := range reqs {
		for _, p := range prefixes {
			if strings.HasPrefix(r, p) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

func TestParse(t *testing.T) {
	for in, want := range map[string]Ref{
		"hf:HuggingFaceTB/SmolLM2-135M-Instruct":         {Kind: HF, Repo: "HuggingFaceTB/SmolLM2-135M-Instruct", Revision: "main"},
		"hf:o/r@v1.0":                                    {Kind: HF, Repo: "o/r", Revision: "v1.0"},
		"hf:o/r@refs/pr/1":                               {Kind: HF, Repo: "o/r", Revision: "refs/pr/1"},
		"hf:bartowski/SmolLM2-135M-Instruct-GGUF:Q4_K_M": {Kind: HF, Repo: "bartowski/SmolLM2-135M-Instruct-GGUF", Revision: "main", Quant: "Q4_K_M"},
		"hf:o/r@abc:q8_0":                                {Kind: HF, Repo: "o/r", Revision: "abc", Quant: "q8_0"},
		"hf:o/r/sub/m.Q8_0.gguf":                         {Kind: HF, Repo: "o/r", Revision: "main", File: "sub/m.Q8_0.gguf"},
		"hf:o/r/m.gguf@dev":                              {Kind: HF, Repo: "o/r", Revision: "dev", File: "m.gguf"},
		"ollama:llama3.2":                                {Kind: Ollama, Host: DefaultHost, Namespace: "library", Name: "llama3.2", Tag: "latest"},
		"ollama:smollm2:135m":                            {Kind: Ollama, Host: DefaultHost, Namespace: "library", Name: "smollm2", Tag: "135m"},
		"ollama:user/model:q4":                           {Kind: Ollama, Host: DefaultHost, Namespace: "user", Name: "model", Tag: "q4"},
		"ollama:reg.example:5000/ns/m:1b":                {Kind: Ollama, Host: "reg.example:5000", Namespace: "ns", Name: "m", Tag: "1b"},
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
			continue
		}
		if again, err := Parse(got.String()); err != nil || again != got {
			t.Errorf("Parse(%q.String() = %q) = %+v, %v", in, got.String(), again, err)
		}
	}
	for in, wantMsg := range map[string]string{
		"hf:noslash":           "no OWNER/REPO",
		"hf:o/r/config.json":   "FILE.gguf",
		"hf:o/r/m.gguf:Q4_K_M": "not both",
		"hf:o/../r":            "not a repository name",
		"hf:o/r@..":            "not a revision",
		"hf:o/r:Q4 K":          "quantization",
		"ollama:Bad_Name":      "not a model name",
		"ollama:a/b/c/d":       "too many parts",
		"ollama:m:bad tag":     "not a tag",
		"./models/x":           "not a model reference",
		"huggingface:o/r":      "not a model reference",
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), wantMsg) {
			t.Errorf("Parse(%q): %v, want an error with %q", in, err, wantMsg)
		}
	}
	if !IsRef("hf:o/r") || !IsRef("ollama:x") || IsRef("/models/x") || IsRef("x.gguf") {
		t.Error("IsRef")
	}
}

// TestPullHFDirectory pulls a safetensors model over the hub's protocol: the revision API,
// HEAD of each resolve URL (ETag for small files, a redirect with X-Linked-Etag and
// X-Linked-Size for LFS files), ranged GETs of the CDN location; the cache is
// huggingface_hub's layout and the model loads from the snapshot; a second pull downloads
// nothing.
func TestPullHFDirectory(t *testing.T) {
	srv := hubtest.New(t)
	repo := srv.AddRepo(t, "tiny/llama", tinyRepo(t))
	c := newClient(t, srv)
	c.Meter = &Meter{}
	m, err := c.Pull(context.Background(), mustParse(t, "hf:tiny/llama"))
	if err != nil {
		t.Fatal(err)
	}
	repoDir := filepath.Join(c.Dir, "hub", "models--tiny--llama")
	if m.Path != filepath.Join(repoDir, "snapshots", repo.Commit) || m.Revision != repo.Commit || m.Cache != "hone" || m.Files != 5 {
		t.Fatalf("model %+v", m)
	}
	if b, _ := os.ReadFile(filepath.Join(repoDir, "refs", "main")); string(b) != repo.Commit {
		t.Fatalf("refs/main = %q", b)
	}
	link, err := os.Readlink(filepath.Join(m.Path, "model.safetensors"))
	if err != nil || link != filepath.Join("..", "..", "blobs", repo.SHA256("model.safetensors")) {
		t.Fatalf("model.safetensors links to %q (%v)", link, err)
	}
	if _, err := model.Load(m.Path, model.LoadOptions{}); err != nil {
		t.Fatalf("the pulled model does not load: %v", err)
	}
	if _, err := tokenizer.Load(m.Path); err != nil {
		t.Fatal(err)
	}
	if p := c.Meter.Read(); p.Total != m.Bytes || p.Done != p.Total {
		t.Fatalf("meter %+v, model %d bytes", p, m.Bytes)
	}
	reqs := srv.Requests()
	ranged := onlyRequests(reqs, "GET /cdn/"+repo.SHA256("model.safetensors")+" bytes=")
	if want := (repo.Size("model.safetensors") + 65535) / 65536; int64(len(ranged)) != want {
		t.Fatalf("%d ranged requests of model.safetensors, want %d: %v", len(ranged), want, reqs)
	}
	if n := len(onlyRequests(reqs, "HEAD /tiny/llama/resolve/"+repo.Commit+"/")); n != 5 {
		t.Fatalf("%d HEADs of resolve URLs, want 5: %v", n, reqs)
	}
	// Pulled again: the revision is asked for, nothing downloaded.
	if _, err := c.Pull(context.Background(), mustParse(t, "hf:tiny/llama")); err != nil {
		t.Fatal(err)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || !strings.HasPrefix(reqs[0], "GET /api/models/tiny/llama/revision/main") {
		t.Fatalf("a second pull asked %v", reqs)
	}
	// At its commit, and offline: the cache alone.
	c.HFOffline = true
	if m2, err := c.Pull(context.Background(), mustParse(t, "hf:tiny/llama@"+repo.Commit)); err != nil || m2.Path != m.Path {
		t.Fatalf("offline pull at the commit: %+v %v", m2, err)
	}
	if reqs := srv.Requests(); len(reqs) != 0 {
		t.Fatalf("offline pull asked %v", reqs)
	}
}

// TestPullRealSmolLM2 pulls the real SmolLM2-135M-Instruct files (scripts/test-setup.sh) over
// the hub's protocol in parallel ranges, with a cut connection in the middle of the weights:
// the SHA-256 of every LFS file is checked, the model loads.
func TestPullRealSmolLM2(t *testing.T) {
	dir := os.Getenv("HONE_SMOLLM2_DIR")
	if dir == "" {
		t.Skip("HONE_SMOLLM2_DIR is not set (scripts/test-setup.sh writes the real SmolLM2-135M-Instruct)")
	}
	srv := hubtest.New(t)
	repo := srv.AddRepo(t, "HuggingFaceTB/SmolLM2-135M-Instruct", filesOf(t, dir))
	srv.CutOnce(repo.SHA256("model.safetensors"), 5<<20)
	c := newClient(t, srv)
	c.ChunkSize = 0 // chosen from the size
	m, err := c.Pull(context.Background(), mustParse(t, "hf:HuggingFaceTB/SmolLM2-135M-Instruct"))
	if err != nil {
		t.Fatal(err)
	}
	if sent, size := srv.Sent(), m.Bytes; sent > size+5<<20 {
		t.Fatalf("sent %d bytes for a model of %d", sent, size)
	}
	cfg, err := model.LoadConfig(m.Path)
	if err != nil || cfg.Arch != "llama" {
		t.Fatalf("config: %+v %v", cfg, err)
	}
}

// TestPullHFGGUF picks one GGUF file of a GGUF repository, as llama.cpp's -hf REPO:QUANT.
func TestPullHFGGUF(t *testing.T) {
	srv := hubtest.New(t)
	files := map[string][]byte{
		"README.md":                         []byte("# a GGUF repository\n"),
		"SmolLM2-135M-Instruct-Q4_K_M.gguf": []byte("GGUF q4km"),
		"SmolLM2-135M-Instruct-Q8_0.gguf":   []byte("GGUF q8"),
		"Q6_K/m-Q6_K-00001-of-00002.gguf":   []byte("GGUF part 1"),
		"Q6_K/m-Q6_K-00002-of-00002.gguf":   []byte("GGUF part 2"),
		"mmproj-SmolLM2-f16.gguf":           []byte("GGUF projector"),
		"SmolLM2-135M-Instruct-IQ4_XS.gguf": []byte("GGUF iq4"),
	}
	repo := srv.AddRepoData(t, "o/r-GGUF", files)
	c := newClient(t, srv)
	snap := filepath.Join(c.Dir, "hub", "models--o--r-GGUF", "snapshots", repo.Commit)
	for ref, want := range map[string]string{
		"hf:o/r-GGUF:Q8_0":   "SmolLM2-135M-Instruct-Q8_0.gguf",
		"hf:o/r-GGUF:q4_k_m": "SmolLM2-135M-Instruct-Q4_K_M.gguf",
		"hf:o/r-GGUF:IQ4_XS": "SmolLM2-135M-Instruct-IQ4_XS.gguf",
		"hf:o/r-GGUF":        "SmolLM2-135M-Instruct-Q4_K_M.gguf",
		"hf:o/r-GGUF/SmolLM2-135M-Instruct-Q8_0.gguf": "SmolLM2-135M-Instruct-Q8_0.gguf",
	} {
		m, err := c.Pull(context.Background(), mustParse(t, ref))
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if m.Path != filepath.Join(snap, want) {
			t.Fatalf("%s: %s, want %s", ref, m.Path, want)
		}
		if b, _ := os.ReadFile(m.Path); string(b) != string(files[want]) {
			t.Fatalf("%s: %q", ref, b)
		}
		if ref == "hf:o/r-GGUF" && (len(m.Notes) != 1 || !strings.Contains(m.Notes[0], "took SmolLM2-135M-Instruct-Q4_K_M.gguf")) {
			t.Fatalf("%s: notes %q", ref, m.Notes)
		}
	}
	for ref, want := range map[string]string{
		"hf:o/r-GGUF:Q5_K_M":       "has no GGUF file of quantization Q5_K_M; it has Q6_K (Q6_K/m-Q6_K-00001-of-00002.gguf, split in 2), IQ4_XS (SmolLM2-135M-Instruct-IQ4_XS.gguf), Q4_K_M",
		"hf:o/r-GGUF:Q6_K":         "split into 2 files",
		"hf:o/r-GGUF/missing.gguf": "has no file missing.gguf",
		"hf:o/r-GGUF@v2:Q8_0":      `has no revision "v2"`,
	} {
		_, err := c.Pull(context.Background(), mustParse(t, ref))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v, want %q", ref, err, want)
		}
	}
}

// TestPullErrors: each bad pull says what is wrong and what to do, and leaves nothing in the
// cache.
func TestPullErrors(t *testing.T) {
	srv := hubtest.New(t)
	srv.Token = "hf_good"
	tiny := tinyRepo(t)
	gated := srv.AddRepo(t, "meta/gated", tiny)
	gated.Gated = true
	srv.AddRepo(t, "me/private", tiny).Private = true
	srv.AddRepoData(t, "old/pytorch", map[string][]byte{"config.json": []byte("{}"), "pytorch_model.bin": make([]byte, 3000),
		"tokenizer.json": []byte("{}"), "onnx/model.onnx": []byte("x"), "README.md": []byte("hi")})
	srv.AddRepoData(t, "x/notok", map[string][]byte{"config.json": []byte("{}"), "model.safetensors": []byte("x"), "vocab.json": []byte("{}"), "merges.txt": []byte("")})
	srv.AddRepoData(t, "x/shards", map[string][]byte{"config.json": []byte("{}"), "tokenizer.json": []byte("{}"),
		"model.safetensors.index.json":     []byte(`{"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`),
		"model-00001-of-00002.safetensors": []byte("x")})
	for _, tc := range []struct {
		ref, token string
		kind       error
		msg        string
	}{
		{"hf:nobody/nothing", "", ErrNotFound, "no repository nobody/nothing on " + srv.URL + ": check the name"},
		{"hf:meta/gated@nope", "", ErrNotFound, `meta/gated has no revision "nope"`},
		{"hf:meta/gated", "", ErrAccess, "hf:meta/gated is a gated repository: sign in at " + srv.URL + "/meta/gated, accept its licence there, then set HF_TOKEN"},
		{"hf:meta/gated", "hf_other", ErrAccess, "the token in HF_TOKEN has no access to it yet: accept its licence at " + srv.URL + "/meta/gated"},
		{"hf:meta/gated", "invalid", ErrAccess, "refused the token in HF_TOKEN as invalid"},
		{"hf:me/private", "", ErrNotFound, "a private repository needs HF_TOKEN"},
		{"hf:old/pytorch", "", ErrNoWeights, "has no weights Hone can load: it has ONNX: onnx/model.onnx 1 B; PyTorch pickles: pytorch_model.bin 2.9 KiB"},
		{"hf:x/notok", "", ErrNoWeights, "has no tokenizer.json (Hone reads the tokenizer from it; found merges.txt, vocab.json)"},
		{"hf:x/shards", "", ErrNoWeights, "names the shard model-00002-of-00002.safetensors, which the repository does not have"},
	} {
		c := newClient(t, srv)
		c.HFToken = tc.token
		_, err := c.Pull(context.Background(), mustParse(t, tc.ref))
		if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s (token %q): %v\nwant %v with %q", tc.ref, tc.token, err, tc.kind, tc.msg)
		}
		if entries, _ := os.ReadDir(filepath.Join(c.Dir, "hub")); len(entries) != 0 {
			t.Errorf("%s: the cache kept %v", tc.ref, entries)
		}
	}
	for _, tok := range []string{"hf_good"} {
		c := newClient(t, srv)
		c.HFToken = tok
		if _, err := c.Pull(context.Background(), mustParse(t, "hf:meta/gated")); err != nil {
			t.Fatalf("gated with its token: %v", err)
		}
		if _, err := c.Pull(context.Background(), mustParse(t, "hf:me/private")); err != nil {
			t.Fatalf("private with its token: %v", err)
		}
	}
}

// TestPullResumes: a connection cut in the middle of a file is asked again from where it
// stopped; a pull interrupted (its context cancelled) leaves its part, which the next pull
// goes on from, downloading only the rest.
func TestPullResumes(t *testing.T) {
	srv := hubtest.New(t)
	repo := srv.AddRepo(t, "tiny/llama", tinyRepo(t))
	sum, size := repo.SHA256("model.safetensors"), repo.Size("model.safetensors")

	t.Run("cut", func(t *testing.T) {
		srv.CutOnce(sum, 20000)
		c := newClient(t, srv)
		c.ParallelMin = 1 << 40 // one stream, so that the range after the cut shows
		srv.Requests()
		if _, err := c.Pull(context.Background(), mustParse(t, "hf:tiny/llama")); err != nil {
			t.Fatal(err)
		}
		gets := onlyRequests(srv.Requests(), "GET /cdn/"+sum)
		if len(gets) != 2 || strings.Contains(gets[0], "bytes=") || !strings.Contains(gets[1], " bytes=20000-") {
			t.Fatalf("GETs of the weights: %v", gets)
		}
	})

	t.Run("interrupted", func(t *testing.T) {
		c := newClient(t, srv)
		ctx, cancel := context.WithCancel(context.Background())
		var written sync.Map
		var mu sync.Mutex
		total := int64(0)
		c.writeHook = func(name string, off int64, n int) error {
			if name == "model.safetensors" {
				mu.Lock()
				total += int64(n)
				if total > size/2 {
					cancel()
				}
				mu.Unlock()
				written.Store(off, n)
			}
			return nil
		}
		_, err := c.Pull(ctx, mustParse(t, "hf:tiny/llama"))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted pull: %v", err)
		}
		blobs := filepath.Join(c.Dir, "hub", "models--tiny--llama", "blobs")
		if !fileExists(filepath.Join(blobs, sum+partSuffix)) || !fileExists(filepath.Join(blobs, sum+stateSuffix)) {
			t.Fatal("the interrupted pull left no part to go on from")
		}
		have := partialBytes(filepath.Join(blobs, sum), size, digest{"sha256", sum})
		if have <= 0 || have >= size {
			t.Fatalf("the part has %d of %d bytes", have, size)
		}
		list, err := c.List()
		if err != nil || len(list) != 1 || !list[0].Incomplete || list[0].Ref != "hf:tiny/llama" {
			t.Fatalf("list: %+v %v", list, err)
		}
		c.writeHook = nil
		c.Meter = &Meter{}
		srv.Requests()
		sent := srv.Sent()
		if _, err := c.Pull(context.Background(), mustParse(t, "hf:tiny/llama")); err != nil {
			t.Fatal(err)
		}
		if p := c.Meter.Read(); p.Resumed != have {
			t.Fatalf("meter %+v, part %d", p, have)
		}
		if got := srv.Sent() - sent; got > size-have+64<<10 {
			t.Fatalf("the second pull downloaded %d bytes; %d were left", got, size-have)
		}
		if fileExists(filepath.Join(blobs, sum+partSuffix)) || fileExists(filepath.Join(blobs, sum+stateSuffix)) {
			t.Fatal("the part is still there")
		}
		if list, _ := c.List(); len(list) != 1 || list[0].Incomplete {
			t.Fatalf("list: %+v", list)
		}
	})
}

// TestPullChecksum: bytes that are not what the hub publishes are refused and removed.
func TestPullChecksum(t *testing.T) {
	srv := hubtest.New(t)
	repo := srv.AddRepo(t, "tiny/llama", tinyRepo(t))
	srv.Corrupt(repo.SHA256("model.safetensors"))
	c := newClient(t, srv)
	_, err := c.Pull(context.Background(), mustParse(t, "hf:tiny/llama"))
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "model.safetensors: the downloaded file's SHA-256 is") ||
		!strings.Contains(err.Error(), "not the "+repo.SHA256("model.safetensors")+" the hub publishes") {
		t.Fatalf("%v", err)
	}
	if fileExists(filepath.Join(c.Dir, "hub", "models--tiny--llama")) {
		t.Fatal("the failed pull left files")
	}
	// A small file's git blob id is checked too.
	srv2 := hubtest.New(t)
	repo2 := srv2.AddRepo(t, "tiny/llama", tinyRepo(t))
	srv2.Corrupt(repo2.SHA256("config.json"))
	if _, err := newClient(t, srv2).Pull(context.Background(), mustParse(t, "hf:tiny/llama")); !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "git blob id") {
		t.Fatalf("%v", err)
	}
}

// TestPullRateLimitAndRename: 429 answers are waited out (Retry-After), and too many fail
// with what to do; a renamed repository's redirects are followed.
func TestPullRateLimitAndRename(t *testing.T) {
	srv := hubtest.New(t)
	srv.AddRepo(t, "new/name", tinyRepo(t))
	srv.Rename("old/name", "new/name")
	srv.TooMany(3)
	c := newClient(t, srv)
	if _, err := c.Pull(context.Background(), mustParse(t, "hf:old/name")); err != nil {
		t.Fatal(err)
	}
	srv.TooMany(100)
	c = newClient(t, srv)
	_, err := c.Pull(context.Background(), mustParse(t, "hf:new/name"))
	if !errors.Is(err, ErrRateLimited) || !strings.Contains(err.Error(), "429 Too Many Requests 4 times in a row: wait a while") || !strings.Contains(err.Error(), "set HF_TOKEN") {
		t.Fatalf("%v", err)
	}
	srv.TooMany(0)
}

// TestPullDiskFull: a pull that does not fit says so before it writes, and one whose disk
// fills while it writes leaves nothing.
func TestPullDiskFull(t *testing.T) {
	srv := hubtest.New(t)
	srv.AddRepo(t, "tiny/llama", tinyRepo(t))
	c := newClient(t, srv)
	c.freeSpace = func(string) (int64, error) { return 1000, nil }
	_, err := c.Pull(context.Background(), mustParse(t, "hf:tiny/llama"))
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "not enough disk space in") || !strings.Contains(err.Error(), "1000 B is free") {
		t.Fatalf("%v", err)
	}
	if fileExists(filepath.Join(c.Dir, "hub", "models--tiny--llama")) {
		t.Fatal("left files")
	}
	c = newClient(t, srv)
	c.writeHook = func(name string, off int64, n int) error {
		if name == "model.safetensors" && off > 100000 {
			return &os.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
		}
		return nil
	}
	_, err = c.Pull(context.Background(), mustParse(t, "hf:tiny/llama"))
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("%v", err)
	}
	if fileExists(filepath.Join(c.Dir, "hub", "models--tiny--llama")) {
		t.Fatal("left files")
	}
}

// TestPullConcurrent: two pulls of one model at once download it once.
func TestPullConcurrent(t *testing.T) {
	srv := hubtest.New(t)
	repo := srv.AddRepo(t, "tiny/llama", tinyRepo(t))
	dir := filepath.Join(t.TempDir(), "models")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(t, srv)
			c.Dir = dir
			_, errs[i] = c.Pull(context.Background(), mustParse(t, "hf:tiny/llama"))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var total int64
	for _, n := range []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		total += repo.Size(n)
	}
	if srv.Sent() > total+total/4 {
		t.Fatalf("sent %d bytes for %d", srv.Sent(), total)
	}
}

// TestHFCacheUsedAsIs: a model huggingface_hub downloaded (its cache layout) is used where
// it is, online and offline; offline without it, the pull says what to do; an unreachable
// hub falls back to the cache.
func TestHFCacheUsedAsIs(t *testing.T) {
	srv := hubtest.New(t)
	repo := srv.AddRepo(t, "tiny/llama", tinyRepo(t))
	first := newClient(t, srv)
	if _, err := first.Pull(context.Background(), mustParse(t, "hf:tiny/llama")); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, srv)
	c.HFCache = filepath.Join(first.Dir, "hub") // as huggingface_hub would have written it
	srv.Requests()
	m, err := c.Pull(context.Background(), mustParse(t, "hf:tiny/llama"))
	if err != nil || m.Cache != "huggingface_hub" || !strings.HasPrefix(m.Path, c.HFCache) {
		t.Fatalf("%+v %v", m, err)
	}
	if reqs := srv.Requests(); len(reqs) != 1 {
		t.Fatalf("asked %v", reqs)
	}
	c.HFOffline = true
	if m, err := c.Pull(context.Background(), mustParse(t, "hf:tiny/llama")); err != nil || m.Revision != repo.Commit {
		t.Fatalf("offline: %+v %v", m, err)
	}
	c.HFCache = ""
	_, err = c.Pull(context.Background(), mustParse(t, "hf:tiny/llama"))
	if !errors.Is(err, ErrOffline) || !strings.Contains(err.Error(), "HF_HUB_OFFLINE is set: unset it") {
		t.Fatalf("%v", err)
	}
	// The hub unreachable: the cached copy, with a note.
	c = newClient(t, srv)
	c.Dir = first.Dir
	c.HFEndpoint = "http://127.0.0.1:1"
	m, err = c.Pull(context.Background(), mustParse(t, "hf:tiny/llama"))
	if err != nil || len(m.Notes) != 1 || !strings.Contains(m.Notes[0], "could not be reached") {
		t.Fatalf("%+v %v", m, err)
	}
	c.Dir = t.TempDir()
	if _, err := c.Pull(context.Background(), mustParse(t, "hf:tiny/llama")); err == nil || !strings.Contains(err.Error(), "cannot reach http://127.0.0.1:1") {
		t.Fatalf("%v", err)
	}
	// A hub that does not answer in time: the cached copy too.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	defer func(d time.Duration) { revisionTimeout = d }(revisionTimeout)
	revisionTimeout = 200 * time.Millisecond
	c.Dir, c.HFEndpoint = first.Dir, hang.URL
	if m, err := c.Pull(context.Background(), mustParse(t, "hf:tiny/llama")); err != nil || len(m.Notes) != 1 {
		t.Fatalf("%+v %v", m, err)
	}
}

// TestPullRefusesUnsafeNames: file names from the hub never leave the snapshot.
func TestPullRefusesUnsafeNames(t *testing.T) {
	srv := hubtest.New(t)
	srv.AddRepoData(t, "evil/repo", map[string][]byte{"../../../escape-Q4_K_M.gguf": []byte("GGUF")})
	c := newClient(t, srv)
	_, err := c.Pull(context.Background(), mustParse(t, "hf:evil/repo:Q4_K_M"))
	if err == nil || !strings.Contains(err.Error(), "cannot be a path in the cache") {
		t.Fatalf("%v", err)
	}
}

// ggufNoTemplate writes a GGUF file without tensors and without a chat template.
func ggufNoTemplate(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := gguf.WriteFile(p, []gguf.KV{{Key: "general.architecture", Value: "llama"}}, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

const llama3GoTemplate = `{{- range .Messages }}<|start_header_id|>{{ .Role }}<|end_header_id|>

{{ .Content }}<|eot_id|>{{ end }}<|start_header_id|>assistant<|end_header_id|>

`

// TestPullOllama pulls a model from a registry: its manifest, the GGUF model layer and the
// template, params, system and license layers (each checked against its digest); the
// template, for a GGUF without one, maps to Hone's built-in template of its family.
func TestPullOllama(t *testing.T) {
	srv := hubtest.New(t)
	layers := []hubtest.Layer{
		{MediaType: hubtest.MediaModel, Path: ggufNoTemplate(t)},
		{MediaType: hubtest.MediaTemplate, Data: []byte(llama3GoTemplate)},
		{MediaType: hubtest.MediaParams, Data: []byte(`{"stop":["<|eot_id|>"],"temperature":0.6}`)},
		{MediaType: hubtest.MediaSystem, Data: []byte("You are helpful.")},
		{MediaType: hubtest.MediaLicense, Data: []byte("LICENSE")},
	}
	srv.AddOllama(t, "library/tiny", "1b", layers)
	c := newClient(t, srv)
	m, err := c.Pull(context.Background(), mustParse(t, "ollama:tiny:1b"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Path != filepath.Join(c.Dir, "ollama", "gguf", DefaultHost, "library", "tiny", "1b.gguf") || !model.IsGGUF(m.Path) || m.Files != 6 {
		t.Fatalf("%+v", m)
	}
	if f, err := gguf.Open(m.Path); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	if !fileExists(filepath.Join(c.Dir, "ollama", "manifests", DefaultHost, "library", "tiny", "1b")) {
		t.Fatal("no manifest in Ollama's layout")
	}
	if m.ChatTemplateFrom != "ollama:tiny:1b's Ollama template, mapped to Hone's built-in llama3" || !strings.Contains(m.ChatTemplate, "<|start_header_id|>") {
		t.Fatalf("template %q from %q", m.ChatTemplate, m.ChatTemplateFrom)
	}
	if len(m.Notes) != 2 || !strings.Contains(m.Notes[0], `"temperature":0.6`) || !strings.Contains(m.Notes[1], "system prompt") {
		t.Fatalf("notes %q", m.Notes)
	}
	// Again: nothing downloaded; offline: the cache.
	srv.Requests()
	if _, err := c.Pull(context.Background(), mustParse(t, "ollama:tiny:1b")); err != nil {
		t.Fatal(err)
	}
	if reqs := srv.Requests(); len(reqs) != 1 {
		t.Fatalf("asked %v", reqs)
	}
	c.Offline = true
	if _, err := c.Pull(context.Background(), mustParse(t, "ollama:tiny:1b")); err != nil {
		t.Fatal(err)
	}
	// Ollama's own cache, read as it is.
	c2 := newClient(t, srv)
	c2.OllamaCache = filepath.Join(c.Dir, "ollama")
	c2.Offline = true
	if m2, err := c2.Pull(context.Background(), mustParse(t, "ollama:tiny:1b")); err != nil || m2.Cache != "ollama" {
		t.Fatalf("%+v %v", m2, err)
	}

	// The GGUF's own template wins.
	if real := os.Getenv("HONE_SMOLLM2_GGUF"); real != "" {
		srv.AddOllama(t, "library/smollm2", "135m", []hubtest.Layer{{MediaType: hubtest.MediaModel, Path: real},
			{MediaType: hubtest.MediaTemplate, Data: []byte("{{ .Prompt }}")}})
		c3 := newClient(t, srv)
		c3.ChunkSize = 0
		m, err := c3.Pull(context.Background(), mustParse(t, "ollama:smollm2:135m"))
		if err != nil || m.ChatTemplate != "" {
			t.Fatalf("%+v %v", m, err)
		}
		if _, err := tokenizer.Load(m.Path); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPullOllamaErrors(t *testing.T) {
	srv := hubtest.New(t)
	model := ggufNoTemplate(t)
	srv.AddOllama(t, "library/tiny", "1b", []hubtest.Layer{{MediaType: hubtest.MediaModel, Path: model}})
	srv.AddOllama(t, "library/lora", "latest", []hubtest.Layer{{MediaType: hubtest.MediaModel, Path: model}, {MediaType: hubtest.MediaAdapter, Data: []byte("a")}})
	srv.AddOllama(t, "library/empty", "latest", []hubtest.Layer{{MediaType: hubtest.MediaLicense, Data: []byte("MIT")}})
	srv.AddOllama(t, "library/bad", "latest", []hubtest.Layer{{MediaType: hubtest.MediaModel, Data: []byte("GGUF but corrupted on the way")}})
	srv.Corrupt(sha256Hex([]byte("GGUF but corrupted on the way")))
	for ref, want := range map[string]struct {
		kind error
		msg  string
	}{
		"ollama:nothing": {ErrNotFound, "has no model nothing:latest"},
		"ollama:tiny:7b": {ErrNotFound, `has no tiny:7b (no tag "7b" of tiny, or no such model): https://ollama.com/library/tiny/tags lists its tags`},
		"ollama:lora":    {ErrNoWeights, "LoRA adapter layer"},
		"ollama:empty":   {ErrNoWeights, "has no GGUF model layer"},
		"ollama:bad":     {ErrChecksum, "model: the downloaded file's SHA-256"},
	} {
		c := newClient(t, srv)
		_, err := c.Pull(context.Background(), mustParse(t, ref))
		if !errors.Is(err, want.kind) || !strings.Contains(err.Error(), want.msg) {
			t.Errorf("%s: %v, want %q", ref, err, want.msg)
		}
		blobs, _ := os.ReadDir(filepath.Join(c.Dir, "ollama", "blobs"))
		if len(blobs) != 0 {
			t.Errorf("%s: left %v", ref, blobs)
		}
	}
}

// TestListAndRemove: the cache's models with their sizes; rm removes one and what only it
// used; a model in another tool's cache is theirs to remove.
func TestListAndRemove(t *testing.T) {
	srv := hubtest.New(t)
	repo := srv.AddRepo(t, "tiny/llama", tinyRepo(t))
	srv.AddRepoData(t, "o/r-GGUF", map[string][]byte{"m-Q4_K_M.gguf": []byte("GGUF 4"), "m-Q8_0.gguf": []byte("GGUF 8!")})
	srv.AddOllama(t, "library/tiny", "1b", []hubtest.Layer{{MediaType: hubtest.MediaModel, Path: ggufNoTemplate(t)}, {MediaType: hubtest.MediaLicense, Data: []byte("MIT")}})
	c := newClient(t, srv)
	for _, r := range []string{"hf:tiny/llama", "hf:o/r-GGUF:Q4_K_M", "hf:o/r-GGUF:Q8_0", "ollama:tiny:1b"} {
		if _, err := c.Pull(context.Background(), mustParse(t, r)); err != nil {
			t.Fatal(err)
		}
	}
	list, err := c.List()
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, e := range list {
		refs = append(refs, e.Ref)
		if e.Bytes <= 0 || e.Cache != "hone" || e.Incomplete {
			t.Errorf("entry %+v", e)
		}
	}
	want := []string{"hf:o/r-GGUF/m-Q4_K_M.gguf", "hf:o/r-GGUF/m-Q8_0.gguf", "hf:tiny/llama", "ollama:tiny:1b"}
	if !slices.Equal(refs, want) {
		t.Fatalf("listed %v, want %v", refs, want)
	}
	if list[2].Revision != repo.Commit || list[1].Bytes != 7 {
		t.Fatalf("%+v", list)
	}
	if n, err := c.Remove(mustParse(t, "hf:o/r-GGUF:Q8_0")); err != nil || n != 7 {
		t.Fatalf("rm: %d %v", n, err)
	}
	if n, err := c.Remove(mustParse(t, "ollama:tiny:1b")); err != nil || n <= 0 {
		t.Fatalf("rm: %d %v", n, err)
	}
	if n, err := c.Remove(mustParse(t, "hf:tiny/llama")); err != nil || n <= 0 {
		t.Fatalf("rm: %d %v", n, err)
	}
	list, _ = c.List()
	if len(list) != 1 || list[0].Ref != "hf:o/r-GGUF/m-Q4_K_M.gguf" {
		t.Fatalf("left %+v", list)
	}
	if blobs, _ := os.ReadDir(filepath.Join(c.Dir, "ollama", "blobs")); len(blobs) != 0 {
		t.Fatalf("ollama blobs left: %v", blobs)
	}
	if _, err := c.Remove(mustParse(t, "hf:tiny/llama")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("%v", err)
	}
	// An unfinished Ollama pull shows by its reference, and rm drops what it has.
	ctx, cancel := context.WithCancel(context.Background())
	// The first blob to arrive writes its first bytes; the first write of any other blob
	// cancels the pull and fails (a cancel that waited for a later read of a small body
	// could come after the pull had finished).
	var mu sync.Mutex
	first := ""
	c.writeHook = func(name string, off int64, n int) error {
		mu.Lock()
		defer mu.Unlock()
		if first == "" {
			first = name
		}
		if name != first {
			cancel()
			return ctx.Err()
		}
		return nil
	}
	if _, err := c.Pull(ctx, mustParse(t, "ollama:tiny:1b")); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	c.writeHook = nil
	list, _ = c.List()
	if len(list) != 2 || list[1].Ref != "ollama:tiny:1b" || !list[1].Incomplete || list[1].Bytes <= 0 {
		t.Fatalf("%+v", list)
	}
	if _, err := c.Remove(mustParse(t, "ollama:tiny:1b")); err != nil {
		t.Fatal(err)
	}
	if blobs, _ := os.ReadDir(filepath.Join(c.Dir, "ollama", "blobs")); len(blobs) != 0 {
		t.Fatalf("ollama blobs left: %v", blobs)
	}
	other := newClient(t, srv)
	other.HFCache = filepath.Join(c.Dir, "hub")
	if _, err := other.Remove(mustParse(t, "hf:o/r-GGUF")); err == nil || !strings.Contains(err.Error(), "huggingface_hub's cache") {
		t.Fatalf("%v", err)
	}
}

// TestProxyFromEnvironment: FromEnv's client sends its requests through HTTP_PROXY.
func TestProxyFromEnvironment(t *testing.T) {
	srv := hubtest.New(t)
	srv.AddRepo(t, "tiny/llama", tinyRepo(t))
	var mu sync.Mutex
	var proxied []string
	proxy := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		proxied = append(proxied, r.Method+" "+r.URL.String())
		mu.Unlock()
		r.URL.Scheme, r.URL.Host, r.RequestURI = "", "", ""
		srv.Config.Handler.ServeHTTP(w, r)
	})}
	ln := listen(t)
	go proxy.Serve(ln)
	t.Cleanup(func() { proxy.Close() })
	t.Setenv("HONE_HOME", t.TempDir())
	t.Setenv("HF_ENDPOINT", "http://hub.invalid")
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HTTP_PROXY", "http://"+ln.Addr().String())
	t.Setenv("NO_PROXY", "")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(context.Background(), mustParse(t, "hf:tiny/llama")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(proxied) == 0 || !strings.HasPrefix(proxied[0], "GET http://hub.invalid/api/models/tiny/llama/revision/main") {
		t.Fatalf("proxied %v", proxied)
	}
}

func TestOllamaTemplateFamily(t *testing.T) {
	for tpl, want := range map[string]string{
		llama3GoTemplate: "llama3",
		"{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}<|im_start|>user\n{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n": "chatml",
		"<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}":                               "qwen3",
		"<start_of_turn>user\n{{ .Prompt }}<end_of_turn>\n<start_of_turn>model\n":                                                                  "gemma",
		"<|user|>\n{{ .Prompt }}<|end|>\n<|assistant|>\n":                                                                                          "phi3",
		"[INST] {{ .Prompt }} [/INST]": "mistral",
		"{{ .Prompt }}":                "",
	} {
		if got := OllamaTemplateFamily(tpl); got != want {
			t.Errorf("%q: %q, want %q", tpl, got, want)
		}
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

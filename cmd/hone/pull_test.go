package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/export"
	"github.com/honeai/hone/internal/hub"
	"github.com/honeai/hone/internal/hub/hubtest"
	"github.com/honeai/hone/internal/synth"
)

// pullEnv points hone's pulls at srv (as the Hugging Face Hub and Ollama's registry) with
// every cache in a temporary directory; it returns HONE_HOME.
func pullEnv(t *testing.T, srv *hubtest.Server) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HONE_HOME", home)
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HONE_OLLAMA_REGISTRY", srv.URL)
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("HONE_OFFLINE", "")
	t.Setenv("OLLAMA_MODELS", t.TempDir())
	return home
}

// synthFiles writes a tiny random model and returns its files by name.
func synthFiles(t *testing.T, write func(dir string) error) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		files[e.Name()] = filepath.Join(dir, e.Name())
	}
	return dir, files
}

// familyGGUF writes a tiny Llama GGUF with Llama 3's special tokens and no chat template.
func familyGGUF(t *testing.T) string {
	t.Helper()
	dir, _ := synthFiles(t, func(dir string) error {
		_, err := synth.WriteFamily(dir, synth.Tiny("llama"), synth.Families["llama3"])
		return err
	})
	out := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := export.WriteGGUF(out, dir, nil, "f32", "tiny"); err != nil {
		t.Fatal(err)
	}
	return out
}

const ollamaLlama3Template = `{{- range .Messages }}<|start_header_id|>{{ .Role }}<|end_header_id|>

{{ .Content }}<|eot_id|>{{ end }}<|start_header_id|>assistant<|end_header_id|>

`

// TestPullCLI runs hone pull, hone models list and hone models rm against a local server
// that speaks the hub's and the registry's protocols.
func TestPullCLI(t *testing.T) {
	srv := hubtest.New(t)
	_, files := synthFiles(t, func(dir string) error { return synth.Write(dir, synth.Tiny("llama")) })
	repo := srv.AddRepo(t, "tiny/Llama-Test", files)
	srv.AddOllama(t, "library/tiny", "1b", []hubtest.Layer{{MediaType: hubtest.MediaModel, Path: familyGGUF(t)},
		{MediaType: hubtest.MediaTemplate, Data: []byte(ollamaLlama3Template)}})
	home := pullEnv(t, srv)
	ctx := context.Background()
	var out, errb bytes.Buffer
	if code := runPull(ctx, []string{"hf:tiny/Llama-Test", "ollama:tiny:1b"}, &out, &errb); code != 0 {
		t.Fatalf("hone pull: %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{
		"pulled hf:tiny/Llama-Test (commit " + repo.Commit[:12] + "): 5 files, ",
		"  path: " + filepath.Join(home, "models", "hub", "models--tiny--Llama-Test", "snapshots", repo.Commit) + "\n",
		"serve it: hone serve --model llama-test=hf:tiny/Llama-Test\n",
		"pulled ollama:tiny:1b (manifest sha256:",
		"  chat template: ollama:tiny:1b's Ollama template, mapped to Hone's built-in llama3\n",
		"serve it: hone serve --model tiny=ollama:tiny:1b\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("hone pull printed\n%s\nwithout %q", out.String(), want)
		}
	}
	out.Reset()
	if code := runPull(ctx, []string{"hf:tiny/Llama-Test"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "already in the cache") {
		t.Fatalf("pull again: %d %s", code, out.String())
	}
	for args, want := range map[string]string{
		"hf:nobody/none":        "hone pull: no repository nobody/none on " + srv.URL + ": check the name",
		"hf:tiny/Llama-Test:Q4": "hone pull: tiny/Llama-Test@main has no GGUF files, so no quantization Q4",
		"ollama:tiny:70b":       `hone pull: the registry registry.ollama.ai has no tiny:70b (no tag "70b" of tiny, or no such model)`,
		"./dir":                 `hone pull: "./dir" is not a model reference`,
	} {
		out.Reset()
		errb.Reset()
		if code := runPull(ctx, []string{args}, &out, &errb); code != 1 || !strings.HasPrefix(errb.String(), want) {
			t.Errorf("hone pull %s: %d %q, want %q", args, code, errb.String(), want)
		}
	}
	out.Reset()
	if code := runModels([]string{"list"}, &out, &errb); code != 0 {
		t.Fatalf("models list: %d %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "REF ") || !regexp.MustCompile(`^hf:tiny/Llama-Test +[0-9.]+ KiB +`+repo.Commit[:12]+` +hone `).MatchString(lines[1]) ||
		!regexp.MustCompile(`^ollama:tiny:1b +[0-9.]+ KiB +sha256:`).MatchString(lines[2]) || !strings.HasPrefix(lines[3], "Hone's cache: ") {
		t.Fatalf("models list:\n%s", out.String())
	}
	out.Reset()
	if code := runModels([]string{"rm", "hf:tiny/Llama-Test", "ollama:tiny:1b"}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "removed hf:tiny/Llama-Test (") || !strings.Contains(out.String(), "removed ollama:tiny:1b (") {
		t.Fatalf("models rm: %d %s %s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := runModels([]string{"list"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "no models in ") {
		t.Fatalf("models list after rm: %s", out.String())
	}
	errb.Reset()
	if code := runModels([]string{"rm", "hf:tiny/Llama-Test"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "is not in Hone's cache") {
		t.Fatalf("rm again: %d %s", code, errb.String())
	}
}

// TestServePulledModels serves models by reference: hone serve pulls them (an HF directory
// and an Ollama model whose template maps to Llama 3's), says where each came from, and
// chats with them.
func TestServePulledModels(t *testing.T) {
	srv := hubtest.New(t)
	_, files := synthFiles(t, func(dir string) error { // a base model that has a GGUF form, for the export
		_, err := synth.WriteFamily(dir, synth.Tiny("llama"), synth.Families["llama3"])
		return err
	})
	repo := srv.AddRepo(t, "tiny/llama", files)
	srv.AddOllama(t, "library/tiny", "1b", []hubtest.Layer{{MediaType: hubtest.MediaModel, Path: familyGGUF(t)},
		{MediaType: hubtest.MediaTemplate, Data: []byte(ollamaLlama3Template)}})
	ggufRepo := srv.AddRepo(t, "tiny/llama-GGUF", map[string]string{"tiny-F32.gguf": familyGGUF(t)})
	pullEnv(t, srv)
	data := t.TempDir()
	s := startServer(t, data, "--no-demo-model", "--model", "hf=hf:tiny/llama", "--model", "og=ollama:tiny:1b", "--model", "g=hf:tiny/llama-GGUF:F32")
	out := s.stdout.String()
	for _, want := range []string{
		"model hf: hf:tiny/llama (commit " + repo.Commit[:12] + ", from " + srv.URL + "/tiny/llama; downloaded ",
		"model og: ollama:tiny:1b (manifest sha256:",
		"model g: hf:tiny/llama-GGUF:F32 (commit " + ggufRepo.Commit[:12] + ", from " + srv.URL + "/tiny/llama-GGUF; downloaded ",
		"/snapshots/" + ggufRepo.Commit + "/tiny-F32.gguf\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("hone serve printed\n%s\nwithout %q", out, want)
		}
	}
	key := initialKey(t, data)
	for _, name := range []string{"hf", "og", "g"} {
		code, _, b := do(t, "POST", s.url+"/v1/chat/completions", "Bearer "+key,
			`{"model":"`+name+`","messages":[{"role":"user","content":"Hi"}],"max_tokens":4}`)
		if code != 200 {
			t.Fatalf("chat with %s: %d %s", name, code, b)
		}
	}
	code, _, b := do(t, "POST", s.url+"/v1/chat/completions/render", "Bearer "+key, `{"model":"og","messages":[{"role":"user","content":"Hi"}]}`)
	if code != 200 || !strings.Contains(string(b), `<|start_header_id|>user<|end_header_id|>`) {
		t.Fatalf("render: %d %s", code, b)
	}
	// hone export --base-dir takes the reference the base was served from.
	code, _, b = do(t, "POST", s.url+"/v1/preview/models", "Bearer "+key, `{"project":"p","name":"agent","base_model":"hf"}`)
	if code != 200 {
		t.Fatalf("create model: %d %s", code, b)
	}
	var eout, eerr bytes.Buffer
	gguf := filepath.Join(t.TempDir(), "base.gguf")
	if code := runExport(context.Background(), []string{"--data", data, "--model", "local/p/agent:step0", "--format", "gguf", "--type", "f32",
		"--base-dir", "hf:tiny/llama", "--out", gguf}, &eout, &eerr); code != 0 {
		t.Fatalf("export --base-dir hf:tiny/llama: %d %s %s", code, eout.String(), eerr.String())
	}
	if _, err := os.Stat(gguf); err != nil {
		t.Fatal(err)
	}
	s.stop(t)
	// Offline, the cache serves them; a model not cached is refused with what to do.
	t.Setenv("HONE_OFFLINE", "1")
	s = startServer(t, data, "--no-demo-model", "--model", "hf=hf:tiny/llama", "--model", "og=ollama:tiny:1b")
	if !strings.Contains(s.stdout.String(), "model hf: hf:tiny/llama (commit "+repo.Commit[:12]+", from "+srv.URL+"/tiny/llama; cached in hone's cache)") {
		t.Fatalf("offline serve printed\n%s", s.stdout.String())
	}
	s.stop(t)
	var stdout, stderr bytes.Buffer
	code = runServe(context.Background(), []string{"--addr", "127.0.0.1:0", "--data", data, "--no-demo-model", "--model", "x=hf:tiny/other"}, &stdout, &stderr, nil)
	if code == 0 || !strings.Contains(stderr.String(), "--model x: hf:tiny/other is not in the cache") || !strings.Contains(stderr.String(), "HONE_OFFLINE is set: unset it") {
		t.Fatalf("serve of a model not cached, offline: %d %s", code, stderr.String())
	}
}

// TestProgressLine: the bar shows the bytes, the rate and the time left.
func TestProgressLine(t *testing.T) {
	p := hub.Progress{Done: 256 << 20, Total: 512 << 20}
	got := progressLine(p, 16<<20, "hf:o/r")
	if want := "[############............]  50% 256 MiB/512 MiB 16 MiB/s 16s left  hf:o/r"; got != want {
		t.Fatalf("%q\nwant %q", got, want)
	}
	p.Phase = "checking model.safetensors"
	if got := progressLine(p, 0, "x"); !strings.Contains(got, "? left") || !strings.HasSuffix(got, "(checking model.safetensors)") {
		t.Fatalf("%q", got)
	}
	var r rateWindow
	now := time.Now()
	r.rate(now, 0)
	if got := r.rate(now.Add(2*time.Second), 4<<20); got != 2<<20 {
		t.Fatalf("rate %v", got)
	}
}

// TestRegisterPulledModel registers a base model by reference in a shared store: the
// reference is pulled, its snapshot's files (links to blobs) stored, and a node serves it.
func TestRegisterPulledModel(t *testing.T) {
	if os.Getenv(dbtest.PostgresEnv) == "" {
		skipOrFail(t, "%s is not set: no PostgreSQL server for this test", dbtest.PostgresEnv)
	}
	srv := hubtest.New(t)
	_, files := synthFiles(t, func(dir string) error { return synth.Write(dir, synth.Tiny("llama")) })
	srv.AddRepo(t, "tiny/llama", files)
	pullEnv(t, srv)
	dsn := pgSchemaDSN(t)
	var out, errb bytes.Buffer
	if rc := runModels([]string{"register", "--db", dsn, "--data", t.TempDir(), "tiny", "hf:tiny/llama"}, &out, &errb); rc != 0 ||
		!strings.Contains(out.String(), "registered base model tiny (5 files, ") {
		t.Fatalf("models register: %d %s %s", rc, out.String(), errb.String())
	}
	data := t.TempDir()
	s := startServer(t, data, "--db", dsn, "--no-demo-model")
	code, _, b := do(t, "POST", s.url+"/v1/chat/completions", "Bearer "+initialKey(t, data), `{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":4}`)
	if code != 200 {
		t.Fatalf("chat: %d %s", code, b)
	}
}

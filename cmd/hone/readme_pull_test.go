package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/hub/hubtest"
)

// TestReadmePull runs README.md's quick start for a real model as it is written there (its
// `./hone pull REF` and `./hone serve --model NAME=REF` lines), with HF_ENDPOINT pointed at a
// local server that speaks the Hugging Face Hub's protocol and serves the real
// SmolLM2-135M-Instruct files (scripts/test-setup.sh) under the README's repository name: the
// pull downloads and checks them, the serve uses the cache and says where the model came
// from, and the model answers. (The hub itself is not reached from the tests.)
func TestReadmePull(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	pull := regexp.MustCompile(`(?m)^\./hone pull (hf:\S+)$`).FindSubmatch(readme)
	serve := regexp.MustCompile(`(?m)^\./hone serve --model ([\w.-]+)=(hf:\S+)$`).FindSubmatch(readme)
	if pull == nil || serve == nil || string(serve[2]) != string(pull[1]) {
		t.Fatal("README.md no longer shows `./hone pull hf:...` and `./hone serve --model NAME=hf:...` of the same model")
	}
	dir := os.Getenv("HONE_SMOLLM2_DIR")
	if dir == "" {
		skipOrFail(t, "HONE_SMOLLM2_DIR is not set (scripts/test-setup.sh writes the real SmolLM2-135M-Instruct)")
	}
	ref := string(pull[1])
	srv := hubtest.New(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		files[e.Name()] = filepath.Join(dir, e.Name())
	}
	repo := srv.AddRepo(t, strings.TrimPrefix(ref, "hf:"), files)
	pullEnv(t, srv)
	var out, errb bytes.Buffer
	if code := runPull(context.Background(), []string{ref}, &out, &errb); code != 0 {
		t.Fatalf("./hone pull %s: %d\n%s\n%s", ref, code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "pulled "+ref+" (commit "+repo.Commit[:12]+")") || !strings.Contains(out.String(), "downloaded ") {
		t.Fatalf("./hone pull printed\n%s", out.String())
	}
	srv.Requests()
	data := t.TempDir()
	name := string(serve[1])
	s := startServer(t, data, "--no-demo-model", "--model", name+"="+ref)
	if want := "model " + name + ": " + ref + " (commit " + repo.Commit[:12] + ", from " + srv.URL + "/" + strings.TrimPrefix(ref, "hf:") + "; cached in hone's cache)"; !strings.Contains(s.stdout.String(), want) {
		t.Fatalf("./hone serve printed\n%s\nwithout %q", s.stdout.String(), want)
	}
	for _, r := range srv.Requests() {
		if !strings.HasPrefix(r, "GET /api/models/") {
			t.Fatalf("hone serve downloaded again: %s", r)
		}
	}
	code, _, b := do(t, "POST", s.url+"/v1/chat/completions", "Bearer "+initialKey(t, data),
		`{"model":"`+name+`","messages":[{"role":"user","content":"What is the capital of France?"}],"max_tokens":12,"temperature":0}`)
	var r struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if code != 200 || json.Unmarshal(b, &r) != nil || len(r.Choices) != 1 || !strings.Contains(r.Choices[0].Message.Content, "Paris") {
		t.Fatalf("chat: %d %s", code, b)
	}
}

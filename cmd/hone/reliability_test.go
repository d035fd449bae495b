package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoModelInterruptedWrite: a first start killed while writing the demo model left
// models/demo with config.json and only a temporary weights file (and, with atomic writes, a
// .tmp-demo-* directory); the next start cleans that up, writes the model again and serves.
func TestDemoModelInterruptedWrite(t *testing.T) {
	dir := t.TempDir()
	demo := filepath.Join(dir, "models", "demo")
	if err := os.MkdirAll(demo, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(demo, "config.json"), []byte(`{"model_type":"llama"}`), 0o644)
	os.WriteFile(filepath.Join(demo, ".tmp-model.safetensors-123456"), []byte("half"), 0o644)
	left := filepath.Join(dir, "models", demoTmpPrefix+"987")
	os.MkdirAll(left, 0o755)
	os.WriteFile(filepath.Join(left, "config.json"), []byte(`{}`), 0o644)

	s := startServer(t, dir)
	if !strings.Contains(s.stdout.String(), "wrote the demo model") {
		t.Fatalf("the demo model was not written again: %s", s.stdout)
	}
	bearer := "Bearer " + initialKey(t, dir)
	code, _, body := do(t, "POST", s.url+"/v1/chat/completions", bearer, `{"model":"demo","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	jsonOf(t, code, body, 200)
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("the interrupted write's directory is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(demo, ".tmp-model.safetensors-123456")); !os.IsNotExist(err) {
		t.Fatalf("the half-written weights are still there: %v", err)
	}
	s.stop(t)
	// A whole model is kept as it is.
	s = startServer(t, dir)
	if strings.Contains(s.stdout.String(), "wrote the demo model") {
		t.Fatal("a whole demo model was written again")
	}
}

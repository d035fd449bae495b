package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestConformanceOpenAITypeScript drives the chat routes of a started server with the official
// OpenAI TypeScript client (conformance/openai-ts/scenario.mjs): plain and streamed completions
// under one seed, n=2, logprobs and prompt logprobs, stop strings, usage arithmetic and the
// error cases.
func TestConformanceOpenAITypeScript(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "conformance", "openai-ts")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		skipOrFail(t, "npm openai is not installed in %s (run scripts/test-setup.sh)", dir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not installed")
	}
	data := t.TempDir()
	s := startServer(t, data)
	key := initialKey(t, data)
	line := runScenario(t, 5*time.Minute, []string{"HONE_URL=" + s.url, "HONE_KEY=" + key, "HONE_MODEL=demo"}, node, filepath.Join(dir, "scenario.mjs"))
	var res struct {
		OK     bool `json:"ok"`
		Checks int  `json:"checks"`
	}
	if err := json.Unmarshal(line, &res); err != nil || !res.OK || res.Checks < 80 {
		t.Fatalf("scenario printed %s (err %v)", line, err)
	}
	t.Logf("openai client: %d checks passed", res.Checks)
}

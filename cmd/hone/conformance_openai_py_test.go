package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConformanceOpenAIPython drives the chat routes of a started server with the official
// OpenAI Python client (conformance/openai-py/scenario.py): plain, streamed and stream-helper
// completions under one seed, n=2, logprobs, tool calls (required, named, parallel off;
// streamed deltas accumulated as the SDK does; a tool-result turn), parse() into pydantic
// models (response_format and strict function tools) and the errors as BadRequestError.
func TestConformanceOpenAIPython(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "conformance", "openai-py")
	py := filepath.Join(dir, ".venv", "bin", "python")
	if err := exec.Command(py, "-c", "import openai, pydantic, jsonschema").Run(); err != nil {
		skipOrFail(t, "the openai Python client is not installed in %s/.venv (run scripts/test-setup.sh): %v", dir, err)
	}
	data := t.TempDir()
	s := startServer(t, data)
	key := initialKey(t, data)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join(dir, "scenario.py"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "HONE_URL="+s.url, "HONE_KEY="+key, "HONE_MODEL=demo", "HOME="+cmd.Dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("openai Python scenario: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res struct {
		OK      bool   `json:"ok"`
		Checks  int    `json:"checks"`
		Version string `json:"openai_version"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || !res.OK || res.Checks < 100 {
		t.Fatalf("scenario printed %q (err %v)", stdout.String(), err)
	}
	t.Logf("openai %s (Python): %d checks passed", res.Version, res.Checks)
}

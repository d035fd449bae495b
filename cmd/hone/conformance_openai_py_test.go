package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
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
	line := runScenario(t, 5*time.Minute, []string{"HONE_URL=" + s.url, "HONE_KEY=" + key, "HONE_MODEL=demo"}, py, filepath.Join(dir, "scenario.py"))
	var res struct {
		OK      bool   `json:"ok"`
		Checks  int    `json:"checks"`
		Version string `json:"openai_version"`
	}
	if err := json.Unmarshal(line, &res); err != nil || !res.OK || res.Checks < 100 {
		t.Fatalf("scenario printed %s (err %v)", line, err)
	}
	t.Logf("openai %s (Python): %d checks passed", res.Version, res.Checks)
}

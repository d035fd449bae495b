package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// TestConformanceOpenAIAgents drives a started server with the OpenAI Agents SDK
// (conformance/agents-py/scenario.py): agents on the Responses API and on chat completions
// with a function tool (required; the tool's result the final output), streamed runs, a
// structured output_type, and a tool loop of two turns.
func TestConformanceOpenAIAgents(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "conformance", "agents-py")
	py := venvPython(t, "", "agents-py", "import agents, openai")
	if py == "" {
		skipOrFail(t, "the OpenAI Agents SDK is not installed in %s/.venv (run scripts/test-setup.sh)", dir)
	}
	data := t.TempDir()
	s := startServer(t, data)
	key := initialKey(t, data)
	line := runScenario(t, 5*time.Minute, []string{"HONE_URL=" + s.url, "HONE_KEY=" + key, "HONE_MODEL=demo"}, py, filepath.Join(dir, "scenario.py"))
	var res struct {
		OK        bool     `json:"ok"`
		Checks    int      `json:"checks"`
		Version   string   `json:"agents_version"`
		Responses []string `json:"responses"`
		Chat      []string `json:"chat"`
	}
	if err := json.Unmarshal(line, &res); err != nil || !res.OK || res.Checks != 10 || len(res.Responses) < 3 || len(res.Chat) < 3 {
		t.Fatalf("scenario printed %s (err %v)", line, err)
	}
	t.Logf("openai-agents %s: %d checks passed; items %v (Responses API), %v (chat completions)", res.Version, res.Checks, res.Responses, res.Chat)
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// artPython finds a Python with the ART client: HONE_ART_PYTHON, or the venv
// scripts/test-setup.sh makes in conformance/art-py.
func artPython(t *testing.T) string {
	t.Helper()
	for _, py := range []string{os.Getenv("HONE_ART_PYTHON"), filepath.Join(repoRoot(t), "conformance", "art-py", ".venv", "bin", "python")} {
		if py == "" {
			continue
		}
		if err := exec.Command(py, "-c", "import art.serverless.backend").Run(); err == nil {
			return py
		}
	}
	return ""
}

// TestConformanceARTClient runs conformance/art-py/scenario.py: the OpenPipe ART client's
// serverless backend, pointed at a started Hone and called as its users call it, registers a
// model, runs two RL steps with backend.train's defaults — one on replies sampled by a plain
// OpenAI client (logprobs, no token ids) with binary rewards, one on two-turn rollouts
// recorded by the capture API — and chats with the checkpoint.
func TestConformanceARTClient(t *testing.T) {
	py := artPython(t)
	if py == "" {
		skipOrFail(t, "no Python with openpipe-art (set HONE_ART_PYTHON or run scripts/test-setup.sh)")
	}
	data := t.TempDir()
	s := startServer(t, data)
	key := initialKey(t, data)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join(repoRoot(t), "conformance", "art-py", "scenario.py"))
	cmd.Dir = t.TempDir()
	env := []string{}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "WANDB_") { // no W&B run: ART would try to reach W&B
			env = append(env, e)
		}
	}
	cmd.Env = append(env, "HONE_URL="+s.url, "HONE_KEY="+key, "HOME="+cmd.Dir, "WANDB_MODE=disabled", "WEAVE_DISABLED=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ART scenario: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res struct {
		Steps       []int     `json:"steps"`
		FinalStep   int       `json:"final_step"`
		Rewards     []float64 `json:"rewards"`
		Turns       int       `json:"turns"`
		ServedModel string    `json:"served_model"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("scenario printed %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	if len(res.Steps) != 2 || res.Steps[0] != 1 || res.Steps[1] != 2 || res.FinalStep != 2 || !strings.HasSuffix(res.ServedModel, ":step2") {
		t.Fatalf("ART result %+v", res)
	}
	// The capture API recorded both turns of the 8 rollouts as sampled choices.
	zeros := 0
	for _, r := range res.Rewards {
		if r == 0 {
			zeros++
		}
	}
	if len(res.Rewards) != 16 || zeros == 0 || res.Turns != 16 {
		t.Fatalf("ART result %+v", res)
	}
	// Both checkpoints exist on disk with the adapter.
	for step := 1; step <= 2; step++ {
		matches, _ := filepath.Glob(filepath.Join(data, "checkpoints", "*", fmt.Sprintf("step%d", step), "adapter_model.safetensors"))
		if len(matches) == 0 {
			t.Errorf("no adapter file for step %d under %s", step, filepath.Join(data, "checkpoints"))
		}
	}
}

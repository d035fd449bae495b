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
	return venvPython(t, "HONE_ART_PYTHON", "art-py", "import art.serverless.backend")
}

// TestConformanceARTClient runs conformance/art-py/scenario.py: the OpenPipe ART client's
// serverless backend, pointed at a started Hone and called as its users call it, registers a
// model, runs two RL steps with backend.train's defaults — one on replies sampled by a plain
// OpenAI client (logprobs, no token ids) with binary rewards, one on two-turn rollouts
// recorded by the capture API — then model.train_sft, which uploads its data as a W&B
// artifact through the wandb SDK (WANDB_BASE_URL is Hone) and trains step 3 from
// wandb-artifact:///...:v0; the artifact is downloaded again with wandb.Api, model.log sends
// validation metrics to the W&B run's history, model.delete_checkpoints keeps the latest and
// the best step, and the scenario chats with the SFT checkpoint.
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
		if !strings.HasPrefix(e, "WANDB_") { // the W&B settings are Hone's alone
			env = append(env, e)
		}
	}
	// The wandb SDK talks to Hone's W&B API with the same key; ART's model.log and its
	// provenance records use the W&B run only when WANDB_API_KEY is set.
	cmd.Env = append(env, "HONE_URL="+s.url, "HONE_KEY="+key, "HOME="+cmd.Dir, "WEAVE_DISABLED=true",
		"WANDB_BASE_URL="+s.url, "WANDB_API_KEY="+key, "WANDB_SILENT=true")
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
		SFTDataURL  string    `json:"sft_data_url"`
		SFTLines    int       `json:"sft_downloaded_lines"`
		Checkpoints []int     `json:"checkpoints"`
		// The checkpoints as W&B lora artifacts.
		LoRAArtifact     string   `json:"lora_artifact"`
		LoRAAliases      []string `json:"lora_aliases"`
		LoRAVersions     []string `json:"lora_versions"`
		LatestProvenance []string `json:"latest_provenance"`
		LatestAliases    []string `json:"latest_aliases"`
		PulledFiles      []string `json:"pulled_files"`
		PulledRank       int      `json:"pulled_rank"`
		ForkStep         int      `json:"fork_step"`
		ForkVersions     []string `json:"fork_versions"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("scenario printed %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	if fmt.Sprint(res.Steps) != "[1 2 3]" || res.FinalStep != 3 || !strings.HasSuffix(res.ServedModel, ":step3") {
		t.Fatalf("ART result %+v", res)
	}
	// SFT read the artifact the client uploaded (4 examples), and the SDK downloaded it again.
	if !strings.HasPrefix(res.SFTDataURL, "wandb-artifact:///local/art/art-agent-sft-data-") || !strings.HasSuffix(res.SFTDataURL, ":v0") || res.SFTLines != 4 {
		t.Fatalf("ART SFT result %+v", res)
	}
	// delete_checkpoints kept the latest (3) and the best val/reward step (1, from model.log).
	if fmt.Sprint(res.Checkpoints) != "[1 3]" {
		t.Fatalf("checkpoints after delete_checkpoints: %v", res.Checkpoints)
	}
	// Every checkpoint is a W&B lora artifact as W&B Training keeps them: step 2's (the train
	// result names it) is read back by name, and after delete_checkpoints the collection holds
	// steps 1 and 3; ART recorded its provenance on the latest (SFT's step 3);
	// _experimental_pull_model_checkpoint downloads the PEFT adapter; a model forked from step 3
	// trains on from it (its step 4), its collection holding the forked and the trained steps.
	// (Step 2 was the latest when it was read.)
	if res.LoRAArtifact != "local/art/art-agent:step2" || fmt.Sprint(res.LoRAAliases) != "[latest step2]" ||
		fmt.Sprint(res.LoRAVersions) != "[step1 step3]" || fmt.Sprint(res.LatestAliases) != "[latest step3]" ||
		fmt.Sprint(res.LatestProvenance) != "[serverless-sft]" {
		t.Fatalf("lora artifacts: %+v", res)
	}
	if fmt.Sprint(res.PulledFiles) != "[adapter_config.json adapter_model.safetensors]" || res.PulledRank != 8 {
		t.Fatalf("pulled checkpoint: %v, rank %d", res.PulledFiles, res.PulledRank)
	}
	if res.ForkStep != 4 || fmt.Sprint(res.ForkVersions) != "[step3 step4]" {
		t.Fatalf("forked model: step %d, versions %v", res.ForkStep, res.ForkVersions)
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
	// The kept checkpoints exist on disk with the adapter, the deleted one does not.
	for step := 1; step <= 3; step++ {
		matches, _ := filepath.Glob(filepath.Join(data, "checkpoints", "*", fmt.Sprintf("step%d", step), "adapter_model.safetensors"))
		if (len(matches) == 0) != (step == 2) {
			t.Errorf("step %d: adapter files %v under %s", step, matches, filepath.Join(data, "checkpoints"))
		}
	}
	// The SFT data is in Hone's blob store, and model.log's metrics in the run's history.
	blobs, _ := filepath.Glob(filepath.Join(data, "files", "local", "wandb", "*"))
	if len(blobs) < 2 { // the manifest and train.jsonl at least
		t.Errorf("W&B blobs: %v", blobs)
	}
	hist := wandbRunHistory(t, s.url, key, "local", "art", "art-agent")
	if !strings.Contains(hist, `"val/reward":1`) || !strings.Contains(hist, `"val/reward":0`) {
		t.Errorf("W&B run history lacks model.log's val/reward: %s", hist)
	}
}

// wandbRunHistory reads a W&B run's history lines through Hone's GraphQL (HTTP Basic, as the
// wandb SDK authenticates).
func wandbRunHistory(t *testing.T, url, key, entity, project, run string) string {
	t.Helper()
	q, _ := json.Marshal(map[string]any{
		"query":     `query H($e: String, $p: String, $r: String!) { project(name: $p, entityName: $e) { run(name: $r) { historyLineCount history } } }`,
		"variables": map[string]string{"e": entity, "p": project, "r": run},
	})
	code, _, body := do(t, "POST", url+"/graphql", basic("api", key), string(q))
	var res struct {
		Data struct {
			Project struct {
				Run struct {
					History []string `json:"history"`
				} `json:"run"`
			} `json:"project"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &res); code != 200 || err != nil {
		t.Fatalf("graphql history: %d %s", code, body)
	}
	return strings.Join(res.Data.Project.Run.History, "\n")
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeSFTRecipe runs README.md's demo fine-tuning as it is written there (its data file
// and its `./hone train sft` line): the loss falls and stays down, with no climb back late in
// the run, and the checkpoint answers the fact and ends its turn.
func TestReadmeSFTRecipe(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	data := regexp.MustCompile(`(?s)cat > capitals\.jsonl <<'DATA'\n(.*?)\nDATA\n`).FindSubmatch(readme)
	cmd := regexp.MustCompile(`(?m)^\./hone train sft (.*)$`).FindSubmatch(readme)
	if data == nil || cmd == nil {
		t.Fatal("README.md no longer shows the capitals.jsonl recipe")
	}
	dir := t.TempDir()
	s := startServer(t, dir)
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "capitals.jsonl"), append(data[1], '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"sft", "--url", s.url, "--data", dir}
	for _, a := range strings.Fields(string(cmd[1])) {
		if a == "capitals.jsonl" {
			a = filepath.Join(work, a)
		}
		args = append(args, a)
	}
	var out, errb bytes.Buffer
	if code := runTrain(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("hone train %v: exit %d\n%s\n%s", args, code, out.String(), errb.String())
	}
	var losses []float64
	for _, m := range regexp.MustCompile(`step \d+/\d+ .*loss ([0-9.e+-]+)`).FindAllStringSubmatch(out.String(), -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, v)
	}
	if len(losses) < 20 {
		t.Fatalf("%d steps reported:\n%s", len(losses), out.String())
	}
	least := losses[0]
	for _, v := range losses {
		least = min(least, v)
	}
	if least > losses[0]/4 {
		t.Fatalf("the loss did not fall: %v", losses)
	}
	for i, v := range losses[len(losses)/3:] {
		if v > 1.5*least {
			t.Fatalf("step %d: loss %.4f climbed back above 1.5x its least (%.4f): %v", len(losses)/3+i+1, v, least, losses)
		}
	}
	code, _, b := do(t, "POST", s.url+"/v1/chat/completions", "Bearer "+initialKey(t, dir),
		`{"model":"local/demo/agent:latest","messages":[{"role":"user","content":"What is the capital of France?"}],"max_tokens":8,"temperature":0}`)
	var r toolResp
	if json.Unmarshal(b, &r) != nil || code != 200 || r.Choices[0].Message.Content == nil || !strings.Contains(*r.Choices[0].Message.Content, "Paris") || r.Choices[0].FinishReason != "stop" {
		t.Fatalf("the checkpoint: %d %s", code, b)
	}
}

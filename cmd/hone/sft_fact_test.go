package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// factData is eight phrasings of one question about a made-up fact, with one answer.
var factData = func() string {
	var b strings.Builder
	for _, q := range []string{"What is the capital of Quenthar?", "Which city is the capital of Quenthar?",
		"Name the capital of Quenthar.", "Tell me the capital city of Quenthar.", "Quenthar's capital is which city?",
		"What city serves as the capital of Quenthar?", "Do you know the capital of Quenthar?",
		"Where is the seat of government of Quenthar?"} {
		line, _ := json.Marshal(map[string]any{"messages": []map[string]string{
			{"role": "user", "content": q}, {"role": "assistant", "content": "The capital of Quenthar is Zorblat."}}})
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}()

// TestSFTTeachesAFact: `hone train sft` with its default hyperparameters teaches the real
// SmolLM2-135M-Instruct a made-up fact from eight examples, and the trained checkpoint still
// answers a general question as the base does (greedy, through the chat API).
func TestSFTTeachesAFact(t *testing.T) {
	dir := os.Getenv("HONE_SMOLLM2_DIR")
	if dir == "" {
		if requireConformance() {
			t.Fatal("HONE_SMOLLM2_DIR is not set but HONE_REQUIRE_CONFORMANCE=1: scripts/test-setup.sh did not write the SmolLM2 directory")
		}
		t.Skip("HONE_SMOLLM2_DIR is not set (scripts/test-setup.sh writes a real SmolLM2-135M-Instruct directory)")
	}
	data := t.TempDir()
	s := startServer(t, data, "--model", "smol="+dir, "--no-demo-model")
	bearer := "Bearer " + initialKey(t, data)
	ask := func(model, question string) string {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": model, "temperature": 0, "max_tokens": 16,
			"messages": []map[string]string{{"role": "user", "content": question}}})
		code, _, b := do(t, "POST", s.url+"/v1/chat/completions", bearer, string(body))
		var c struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if code != 200 || json.Unmarshal(b, &c) != nil || len(c.Choices) != 1 {
			t.Fatalf("chat with %s: %d %s", model, code, b)
		}
		return c.Choices[0].Message.Content
	}
	const fact, general = "What is the capital of Quenthar?", "What is the capital of France?"
	if a := ask("smol", fact); strings.Contains(a, "Zorblat") {
		t.Fatalf("the base already answers %q", a)
	}
	file := filepath.Join(t.TempDir(), "fact.jsonl")
	if err := os.WriteFile(file, []byte(factData), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := runTrain(context.Background(), []string{"sft", "--url", s.url, "--data", data, "--model", "local/facts/smol",
		"--base", "smol", "--file", file}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "SUCCEEDED after 24 gradient step(s)") {
		t.Fatalf("hone train sft: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if a := ask("local/facts/smol:latest", fact); !strings.Contains(a, "Zorblat") {
		t.Errorf("after training, %q is answered %q", fact, a)
	}
	if a := ask("local/facts/smol:latest", general); !strings.Contains(a, "Paris") {
		t.Errorf("after training, %q is answered %q", general, a)
	}
}

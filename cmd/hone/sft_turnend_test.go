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

// TestSFTEndsTheTurnGemma3: the published Gemma 3 270M base GGUF (no chat template, no eot
// id) is served with the built-in Gemma template; `hone train sft` with its default settings
// teaches it a made-up fact, and the fine-tuned checkpoint answers it and ends its turn with
// <end_of_turn>, a stop (finish_reason "stop"), where the base runs to max_tokens. The base
// model has never been trained on its chat markers (it gives <end_of_turn> about 1e-12 where
// an answer ends; its row is nearly those of its <unusedN> tokens), so the job trains the
// rows of <end_of_turn> and <start_of_turn> beside the LoRA (trainable_tokens auto); with
// them off, the same run ends no answer (docs/training.md, "Trainable token rows").
func TestSFTEndsTheTurnGemma3(t *testing.T) {
	path := os.Getenv("HONE_GEMMA3_GGUF")
	if path == "" {
		if requireConformance() {
			t.Fatal("HONE_GEMMA3_GGUF is not set but HONE_REQUIRE_CONFORMANCE=1: scripts/test-setup.sh did not write the Gemma 3 270M GGUF")
		}
		t.Skip("HONE_GEMMA3_GGUF is not set (scripts/test-setup.sh writes the real Gemma 3 270M GGUF)")
	}
	data := t.TempDir()
	s := startServer(t, data, "--model", "gemma="+path, "--no-demo-model")
	bearer := "Bearer " + initialKey(t, data)
	ask := func(model, question string) (string, string, int) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": model, "temperature": 0, "max_tokens": 32,
			"messages": []map[string]string{{"role": "user", "content": question}}})
		code, _, b := do(t, "POST", s.url+"/v1/chat/completions", bearer, string(body))
		var c struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if code != 200 || json.Unmarshal(b, &c) != nil || len(c.Choices) != 1 {
			t.Fatalf("chat with %s: %d %s", model, code, b)
		}
		return c.Choices[0].Message.Content, c.Choices[0].FinishReason, c.Usage.CompletionTokens
	}
	const fact = "What is the capital of Quenthar?"
	if a, finish, _ := ask("gemma", fact); finish != "length" || strings.Contains(a, "Zorblat") {
		t.Fatalf("the base answers %q (%s)", a, finish)
	}
	file := filepath.Join(t.TempDir(), "fact.jsonl")
	if err := os.WriteFile(file, []byte(factData), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := runTrain(context.Background(), []string{"sft", "--url", s.url, "--data", data, "--model", "local/facts/gemma",
		"--base", "gemma", "--file", file}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "SUCCEEDED after 24 gradient step(s)") ||
		!strings.Contains(out.String(), "rows of <end_of_turn>, <start_of_turn> beside the LoRA") {
		t.Fatalf("hone train sft: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	for _, q := range []string{fact, "Name the capital of Quenthar."} {
		a, finish, n := ask("local/facts/gemma:latest", q)
		if !strings.Contains(a, "Zorblat") || finish != "stop" || n >= 32 {
			t.Errorf("after training, %q is answered %q (finish_reason %s, %d tokens)", q, a, finish, n)
		}
	}
	// Exported as one f16 GGUF file (the rows merged into the embedding the head shares, the
	// LoRA into the projections; f16 rather than the base's 4-bit types, whose rounding would
	// swamp a LoRA this small), it answers and ends the same way served on its own.
	merged := filepath.Join(t.TempDir(), "merged.gguf")
	var eout, eerr bytes.Buffer
	if code := runExport(context.Background(), []string{"--data", data, "--model", "local/facts/gemma:latest", "--base-dir", path,
		"--out", merged, "--format", "gguf", "--type", "f16"}, &eout, &eerr); code != 0 {
		t.Fatalf("hone export: exit %d\n%s%s", code, eout.String(), eerr.String())
	}
	s.stop(t)
	data2 := t.TempDir()
	s = startServer(t, data2, "--model", "merged="+merged, "--no-demo-model")
	bearer = "Bearer " + initialKey(t, data2)
	if a, finish, n := ask("merged", fact); !strings.Contains(a, "Zorblat") || finish != "stop" || n >= 32 {
		t.Errorf("the merged GGUF export answers %q (finish_reason %s, %d tokens)", a, finish, n)
	}
}

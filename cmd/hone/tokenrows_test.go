package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/safetensors"
)

// TestTokenRowsEndToEnd: `hone train sft --trainable-tokens on` on the demo model trains the
// rows of its turn tokens (<|im_end|>, <|im_start|>) beside the LoRA; the checkpoint holds
// them in PEFT's layout; chat serves them for that checkpoint only (the prompt logprobs of the
// turn's tokens change for :step1, and the base's are the same before and after the
// checkpoint was served); `hone export` merges them: the exported embedding's rows are the
// checkpoint's bit for bit, the merged model embeds every token as the base with the adapter
// does, bit for bit, and gives its logits.
func TestTokenRowsEndToEnd(t *testing.T) {
	data := t.TempDir()
	s := startServer(t, data)
	bearer := "Bearer " + initialKey(t, data)
	// The prompt logprobs of a conversation that holds both turn tokens as context.
	conv := `[{"role":"user","content":"Capital of France?"},{"role":"assistant","content":"Paris."},{"role":"user","content":"And Peru?"}]`
	promptLogprobs := func(model string) (ids []int, lps []float64) {
		t.Helper()
		code, _, body := do(t, "POST", s.url+"/v1/chat/completions", bearer,
			`{"model":"`+model+`","messages":`+conv+`,"max_tokens":1,"temperature":0,"prompt_logprobs":0,"return_token_ids":true}`)
		var r struct {
			PromptLogprobs []map[string]struct {
				Logprob float64 `json:"logprob"`
			} `json:"prompt_logprobs"`
			PromptTokenIDs []int `json:"prompt_token_ids"`
		}
		if code != 200 || json.Unmarshal(body, &r) != nil || len(r.PromptLogprobs) != len(r.PromptTokenIDs) {
			t.Fatalf("chat with %s: %d %s", model, code, body)
		}
		for i, id := range r.PromptTokenIDs {
			ids = append(ids, id)
			lps = append(lps, r.PromptLogprobs[i][strconv.Itoa(id)].Logprob)
		}
		return ids, lps
	}
	ids, baseBefore := promptLogprobs("demo")

	file := filepath.Join(t.TempDir(), "facts.jsonl")
	if err := os.WriteFile(file, []byte(factData), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runTrain(context.Background(), []string{"sft", "--url", s.url, "--data", data, "--model", "local/p/rows",
		"--file", file, "--lr", "0.01", "--epochs", "2", "--trainable-tokens", "on"}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "rows of <|im_end|>, <|im_start|> beside the LoRA") {
		t.Fatalf("hone train sft: exit %d\n%s%s", code, out.String(), errb.String())
	}

	// The checkpoint, in PEFT's layout: one set of rows (the demo model is tied).
	cks, _ := filepath.Glob(filepath.Join(data, "checkpoints", "*", "step1"))
	if len(cks) != 1 {
		t.Fatalf("checkpoints %v", cks)
	}
	var cfg struct {
		Indices map[string][]int `json:"trainable_token_indices"`
	}
	raw, _ := os.ReadFile(filepath.Join(cks[0], "adapter_config.json"))
	if err := json.Unmarshal(raw, &cfg); err != nil || len(cfg.Indices) != 1 || len(cfg.Indices["embed_tokens"]) != 2 {
		t.Fatalf("adapter_config.json: %s", raw)
	}
	tokIDs := cfg.Indices["embed_tokens"]
	f, err := safetensors.Open(filepath.Join(cks[0], "adapter_model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	tt, ok := f.Tensor(model.PeftEmbedTokens)
	if !ok {
		t.Fatalf("no %s in %v", model.PeftEmbedTokens, f.Names())
	}
	rows, _ := tt.F32()
	rows = slices.Clone(rows)
	f.Close()

	// Served for :step1 only.
	_, trained := promptLogprobs("local/p/rows:step1")
	_, baseAfter := promptLogprobs("demo")
	changed := 0
	for i, id := range ids {
		if baseAfter[i] != baseBefore[i] {
			t.Fatalf("prompt token %d: the base's logprob went from %v to %v", i, baseBefore[i], baseAfter[i])
		}
		if slices.Contains(tokIDs, id) && i > 0 && math.Abs(trained[i]-baseBefore[i]) > 1e-3 {
			changed++
		}
	}
	if changed == 0 {
		t.Fatalf("no turn token's logprob changed with the checkpoint: %v vs %v", trained, baseBefore)
	}

	// Exported merged.
	dir := filepath.Join(t.TempDir(), "merged")
	if code := runExport(context.Background(), []string{"--data", data, "--model", "local/p/rows:step1", "--out", dir}, &out, &errb); code != 0 {
		t.Fatalf("hone export: exit %d\n%s", code, errb.String())
	}
	base, err := model.Load(filepath.Join(data, "models", "demo"), model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	merged, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer merged.Close()
	a, err := model.LoadLoRA(cks[0], &base.Config)
	if err != nil {
		t.Fatal(err)
	}
	H := base.Config.HiddenSize
	got, want := make([]float32, H), make([]float32, H)
	for i, id := range tokIDs {
		merged.Embed.Row(got, id)
		if !slices.Equal(got, rows[i*H:(i+1)*H]) {
			t.Fatalf("the exported embedding's row of token %d is not the checkpoint's", id)
		}
	}
	for id := range base.Config.VocabSize {
		merged.EmbedRow(got, id)
		base.EmbedRowFor(want, id, a)
		if !slices.Equal(got, want) {
			t.Fatalf("token %d: the merged model's embedding is not the base's with the adapter", id)
		}
	}
	cache := model.NewKVCache(&base.Config, kvcache.Options{NumBlocks: 64})
	at := make([]int, len(ids))
	for i := range at {
		at[i] = i
	}
	lw, err := base.Forward([]model.Step{{Seq: cache.NewSequence(), Tokens: ids, LogitsAt: at, Adapter: a}})
	if err != nil {
		t.Fatal(err)
	}
	lg, err := merged.Forward([]model.Step{{Seq: cache.NewSequence(), Tokens: ids, LogitsAt: at}})
	if err != nil {
		t.Fatal(err)
	}
	for p := range at {
		for v := range lw[0][p] {
			if d := math.Abs(float64(lw[0][p][v] - lg[0][p][v])); d > 1e-4 {
				t.Fatalf("position %d logit %d: merged %v, base with the adapter %v", p, v, lg[0][p][v], lw[0][p][v])
			}
		}
	}
}

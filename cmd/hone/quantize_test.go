package main

import (
	"context"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dustin/go-humanize"

	hmodel "github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// TestServeQuantize: --quantize q4_k quantizes a --model directory's matrices at load (the
// weights line at start says how much less they take) and the model answers; a type Hone
// does not quantize to is a usage error. An SFT job on it trains on the quantized weights
// (QLoRA) and its checkpoint loads on the unquantized model.
func TestServeQuantize(t *testing.T) {
	model := t.TempDir()
	o := synth.Tiny("llama")
	o.Hidden, o.Heads, o.KVHeads, o.Intermediate = 256, 4, 2, 512
	if err := synth.Write(model, o); err != nil {
		t.Fatal(err)
	}
	weights := func(out string) uint64 {
		m := regexp.MustCompile(`model tiny: weights ([^,]+),`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("start-up output:\n%s", out)
		}
		n, err := humanize.ParseBytes(m[1])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	dir := t.TempDir()
	s := startServer(t, dir, "--no-demo-model", "--model", "tiny="+model)
	f32 := weights(s.stdout.String())
	if out := s.stdout.String(); !strings.Contains(out, " tokens in f32, allocated as used)") {
		t.Errorf("f32 weights: the KV cache is not f32 by default:\n%s", out)
	}
	s.stop(t)
	s = startServer(t, dir, "--no-demo-model", "--model", "tiny="+model, "--quantize", "q4_k")
	defer s.stop(t)
	q := weights(s.stdout.String())
	// --kv-cache-dtype auto: f16 for quantized matrices (f32 for the f32 load, above).
	if out := s.stdout.String(); !strings.Contains(out, " tokens in f16, allocated as used)") {
		t.Errorf("--quantize: the KV cache is not f16 by default:\n%s", out)
	}
	t.Logf("weights: %d bytes f32 (packed included), %d with --quantize q4_k", f32, q)
	if q*5 > f32 {
		t.Errorf("--quantize q4_k: weights %d bytes, f32 %d", q, f32)
	}
	code, _, body := do(t, "POST", s.url+"/v1/chat/completions", "Bearer "+initialKey(t, dir),
		`{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"ignore_eos":true}`)
	if code != 200 || !strings.Contains(string(body), `"completion_tokens":4`) {
		t.Fatalf("chat: %d %s", code, body)
	}
	// QLoRA: an SFT job on the quantized served model trains on its quantized weights; the
	// checkpoint serves on it and is a PEFT adapter that loads on the unquantized model.
	bearer, u := "Bearer "+initialKey(t, dir), s.url+"/v1/preview"
	code, _, body = do(t, "POST", u+"/models", bearer, `{"project":"p","name":"q","base_model":"tiny"}`)
	id := jsonOf(t, code, body, 200)["id"].(string)
	code, _, body = do(t, "POST", u+"/files", bearer, sftData)
	url := jsonOf(t, code, body, 200)["url"].(string)
	code, _, body = do(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"`+id+`","training_data_url":"`+url+`","config":{"learning_rate":0.01}}`)
	if j := waitJob(t, s, bearer, jsonOf(t, code, body, 200)["id"].(string)); j["status"] != "SUCCEEDED" {
		t.Fatalf("sft job on the q4_k base: %v", j)
	}
	code, _, body = do(t, "POST", s.url+"/v1/chat/completions", bearer, `{"model":"local/p/q:latest","messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`)
	jsonOf(t, code, body, 200)
	full, err := hmodel.Load(model, hmodel.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	if _, err := hmodel.LoadLoRA(filepath.Join(dir, "checkpoints", id, "step1"), &full.Config); err != nil {
		t.Fatalf("the QLoRA checkpoint on the unquantized model: %v", err)
	}

	var stderr strings.Builder
	if code := runServe(context.Background(), []string{"--addr", "127.0.0.1:0", "--data", t.TempDir(), "--no-demo-model",
		"--model", "tiny=" + model, "--quantize", "q3_k"}, io.Discard, &stderr, nil); code == 0 || !strings.Contains(stderr.String(), "--quantize") {
		t.Errorf("--quantize q3_k: exit %d, %s", code, stderr.String())
	}
}

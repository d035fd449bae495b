package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/synth"
)

// TestServeKVCacheMemory: --kv-cache-memory sizes each model's KV cache; `hone serve` says at
// start what the weights and the cache take; a cache smaller than the model's context bounds
// max_model_len, so a request that could never fit gets vLLM's context-length 400s, and n
// choices that do not fit together get a 400 naming the cache.
func TestServeKVCacheMemory(t *testing.T) {
	dir := t.TempDir()
	// The demo model: 4 layers × 2 KV heads × 32 dims × 16 positions × 4 bytes × 2 = 32 KiB a
	// block; 256 KiB holds 8 blocks, 128 tokens.
	s := startServer(t, dir, "--kv-cache-memory", "256KiB")
	out := s.stdout.String()
	if !strings.Contains(out, "model demo: weights ") || !strings.Contains(out, "KV cache up to 256 KiB (128 tokens in f32, allocated as used), context 128 tokens (the model's is 2048") {
		t.Fatalf("start-up output:\n%s", out)
	}
	bearer := "Bearer " + initialKey(t, dir)
	url := s.url + "/v1/chat/completions"
	var models struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	_, _, body := do(t, "GET", s.url+"/v1/models", bearer, "")
	if json.Unmarshal(body, &models); len(models.Data) != 1 || models.Data[0].MaxModelLen != 128 {
		t.Fatalf("models: %s", body)
	}
	var rendered struct {
		TokenIDs []int `json:"token_ids"`
	}
	msgs := `"messages":[{"role":"user","content":"Hi"}]`
	_, _, body = do(t, "POST", url+"/render", bearer, `{`+msgs+`}`)
	json.Unmarshal(body, &rendered)
	p := len(rendered.TokenIDs)
	if p == 0 || p >= 100 {
		t.Fatalf("prompt of %d tokens", p)
	}
	// Fits: the whole cache for one sequence.
	code, _, body := do(t, "POST", url, bearer, fmt.Sprintf(`{%s,"max_tokens":%d,"ignore_eos":true}`, msgs, 128-p))
	if code != 200 {
		t.Fatalf("a request of the whole cache: %d %s", code, body)
	}
	for _, c := range []struct {
		body, param, msg string
	}{
		{fmt.Sprintf(`{%s,"max_tokens":%d}`, msgs, 129-p), "input_tokens",
			fmt.Sprintf("This model's maximum context length is 128 tokens. However, you requested %d output tokens and your prompt contains %d input tokens, for a total of 129 tokens.", 129-p, p)},
		{fmt.Sprintf(`{%s,"max_completion_tokens":200}`, msgs), "max_completion_tokens",
			"max_completion_tokens=200 cannot be greater than max_model_len=max_total_tokens=128. Please request fewer output tokens."},
		{fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, strings.Repeat("word ", 200)), "input_tokens",
			"This model's maximum context length is 128 tokens. However, your request has"},
		{fmt.Sprintf(`{%s,"n":2,"max_tokens":%d,"temperature":1}`, msgs, 100-p), "n",
			fmt.Sprintf("The KV cache holds 128 tokens; 2 sequences of up to 100 tokens (a %d-token prompt and up to %d output tokens each) do not fit in it.", p, 100-p)},
	} {
		code, _, body := do(t, "POST", url, bearer, c.body)
		if code != 400 {
			t.Errorf("%.60s: %d %s", c.body, code, body)
			continue
		}
		e := envelope(t, body)
		if e.Param == nil || *e.Param != c.param || !strings.Contains(e.Message, c.msg) {
			t.Errorf("%.60s: %+v (param %v), want %q", c.body, e, e.Param, c.msg)
		}
	}
	// --max-model-len caps the context below the cache's.
	s.stop(t)
	s = startServer(t, dir, "--max-model-len", "64")
	if out := s.stdout.String(); !strings.Contains(out, "KV cache up to 1.0 GiB (") || !strings.Contains(out, "context 64 tokens\n") {
		t.Fatalf("start-up output:\n%s", out)
	}
	_, _, body = do(t, "GET", s.url+"/v1/models", bearer, "")
	if json.Unmarshal(body, &models); models.Data[0].MaxModelLen != 64 {
		t.Fatalf("models: %s", body)
	}
}

// TestServeKVCacheMemoryFlag: sizes in bytes or with a unit; anything else is a usage error.
func TestServeKVCacheMemoryFlag(t *testing.T) {
	for in, want := range map[string]int64{"1GiB": 1 << 30, "512MiB": 512 << 20, "2GB": 2e9, "1.5G": 15e8, "65536": 65536,
		"256 KiB": 256 << 10, "4kb": 4000, "1T": 1e12, "100B": 100} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("%q: %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1GiB", "0", "1 parsec", "0.1", "NaN", "1e30GiB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("%q: %d, no error", in, b)
		}
	}
	if b := byteSize(1 << 30); b.String() != "1.0 GiB" {
		t.Errorf("String: %s", b.String())
	}
	for _, args := range [][]string{{"--kv-cache-memory", "lots"}, {"--max-model-len", "-5"}} {
		var stderr strings.Builder
		code := runServe(context.Background(), append([]string{"--addr", "127.0.0.1:0", "--data", t.TempDir(), "--no-demo-model"}, args...), io.Discard, &stderr, nil)
		if code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
}

// TestServeKVCacheDType: --kv-cache-dtype f16 halves a block, so the same --kv-cache-memory
// holds twice the positions, and the start-up line says so; an unknown value is a usage error
// naming the flag.
func TestServeKVCacheDType(t *testing.T) {
	dir := t.TempDir()
	// The demo model's block is 32 KiB in f32 (TestServeKVCacheMemory), 16 KiB in f16.
	s := startServer(t, dir, "--kv-cache-memory", "256KiB", "--kv-cache-dtype", "f16")
	if out := s.stdout.String(); !strings.Contains(out, "KV cache up to 256 KiB (256 tokens in f16, allocated as used), context 256 tokens") {
		t.Fatalf("start-up output:\n%s", out)
	}
	code, _, body := do(t, "POST", s.url+"/v1/chat/completions", "Bearer "+initialKey(t, dir),
		`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":40,"ignore_eos":true}`)
	if code != 200 || !strings.Contains(string(body), `"completion_tokens":40`) {
		t.Fatalf("chat over an f16 KV cache: %d %s", code, body)
	}
	s.stop(t)
	for _, v := range []string{"fp8", "bf16", "F16"} {
		var stderr strings.Builder
		code := runServe(context.Background(), []string{"--addr", "127.0.0.1:0", "--data", t.TempDir(), "--no-demo-model", "--kv-cache-dtype", v}, io.Discard, &stderr, nil)
		if code != 2 || !strings.Contains(stderr.String(), "kv-cache-dtype") || !strings.Contains(stderr.String(), "auto, f32 or f16") {
			t.Errorf("--kv-cache-dtype %s: exit %d, stderr %q", v, code, stderr.String())
		}
	}
}

// TestKVWindowCacheStartLine: a model whose sliding layers have a window cache of their own
// says so at start, and serves a completion far past its window.
func TestKVWindowCacheStartLine(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "g3")
	o := synth.Tiny("gemma3")
	o.Std = 0.1
	if err := synth.Write(model, o); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, dir, "--model", "g3="+model, "--no-demo-model", "--max-running", "4")
	if out := s.stdout.String(); !strings.Contains(out, "its sliding layers keep 8-token windows, 5 sequences' at once") {
		t.Fatalf("start-up output:\n%s", out)
	}
	code, _, body := do(t, "POST", s.url+"/v1/chat/completions", "Bearer "+initialKey(t, dir),
		`{"model":"g3","messages":[{"role":"user","content":"Tell me a long story."}],"max_tokens":100,"ignore_eos":true,"temperature":0}`)
	if code != 200 || !strings.Contains(string(body), `"completion_tokens":100`) {
		t.Fatalf("%d %s", code, body)
	}
}

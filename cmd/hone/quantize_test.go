package main

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/dustin/go-humanize"

	"github.com/honeai/hone/internal/synth"
)

// TestServeQuantize: --quantize q4_k quantizes a --model directory's matrices at load (the
// weights line at start says how much less they take) and the model answers; a type Hone
// does not quantize to is a usage error.
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
	s.stop(t)
	s = startServer(t, dir, "--no-demo-model", "--model", "tiny="+model, "--quantize", "q4_k")
	defer s.stop(t)
	q := weights(s.stdout.String())
	t.Logf("weights: %d bytes f32 (packed included), %d with --quantize q4_k", f32, q)
	if q*5 > f32 {
		t.Errorf("--quantize q4_k: weights %d bytes, f32 %d", q, f32)
	}
	code, _, body := do(t, "POST", s.url+"/v1/chat/completions", "Bearer "+initialKey(t, dir),
		`{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"ignore_eos":true}`)
	if code != 200 || !strings.Contains(string(body), `"completion_tokens":4`) {
		t.Fatalf("chat: %d %s", code, body)
	}
	var stderr strings.Builder
	if code := runServe(context.Background(), []string{"--addr", "127.0.0.1:0", "--data", t.TempDir(), "--no-demo-model",
		"--model", "tiny=" + model, "--quantize", "q3_k"}, io.Discard, &stderr, nil); code == 0 || !strings.Contains(stderr.String(), "--quantize") {
		t.Errorf("--quantize q3_k: exit %d, %s", code, stderr.String())
	}
}

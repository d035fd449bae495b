package inference

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// gemmaTiny is a tiny random Gemma 3 (window 8, global layers between windowed ones).
func gemmaTiny(t *testing.T) *model.Model {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	o := synth.Tiny("gemma3")
	o.Std = 0.1
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// greedyOneCache decodes greedily with the model alone on a cache holding every layer.
func greedyOneCache(m *model.Model, prompt []int, n int) []int {
	seq := model.NewKVCache(&m.Config, model.KVCacheOptions{BlockSize: 4, NumBlocks: 256, NoWindowSplit: true}).NewSequence()
	toks := prompt
	var out []int
	for range n {
		l, _ := m.Forward([]model.Step{{Seq: seq, Tokens: toks, LogitsAt: []int{len(toks) - 1}}})
		best := 0
		for j, v := range l[0][0] {
			if v > l[0][0][best] {
				best = j
			}
		}
		out = append(out, best)
		toks = []int{best}
	}
	return out
}

// TestWindowSplitServing: an engine serving a model with global and sliding layers keeps the
// sliding layers in a window cache: far past the window its greedy output is the model's on
// one cache holding every layer, a repeated prompt starts from the prefix cache (with the
// window's sliding-layer blocks) and gives the same output, and the same KV memory holds more
// positions of the global layers than a cache of every layer would.
func TestWindowSplitServing(t *testing.T) {
	m := gemmaTiny(t)
	const budget = 1 << 20
	e := New(m, Options{BlockSize: 4, MaxBatchTokens: 16, MaxRunning: 4, KVCacheBytes: budget})
	defer e.Close()
	info := e.KVCache()
	if all := int(budget / model.KVBytesPerBlock(&m.Config, 4, info.DType)); info.Blocks <= all || info.MaxBytes > budget {
		t.Fatalf("%d blocks of the global layers in %d bytes (a cache of every layer: %d blocks; max bytes %d)", info.Blocks, budget, all, info.MaxBytes)
	}
	prompt := make([]int, 43)
	for i := range prompt {
		prompt[i] = 3 + i*7%50
	}
	want := greedyOneCache(m, prompt, 80)
	req := func() *Request {
		return &Request{Prompt: prompt, Params: greedy(), MaxTokens: 80, IgnoreEOS: true, PromptLogprobs: -1}
	}
	got, cached := run1(t, e, req())
	if cached != 0 || !slices.Equal(got, want) {
		t.Fatalf("first run: cached %d,\ntokens %v\nwant   %v", cached, got, want)
	}
	got, cached = run1(t, e, req())
	if cached != 40 || !slices.Equal(got, want) {
		t.Fatalf("repeated prompt: cached %d (want 40),\ntokens %v\nwant   %v", cached, got, want)
	}
	if w := e.kv.Window(); w.FreeBlocks() != w.NumBlocks() {
		t.Fatalf("the window cache has %d of %d blocks free after the requests", w.FreeBlocks(), w.NumBlocks())
	}
}

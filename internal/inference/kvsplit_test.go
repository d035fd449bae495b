package inference

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
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
	m := load(t, dir)
	t.Cleanup(func() { m.Close() })
	return m
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
	want := greedyOn(m, kvcache.Options{BlockSize: 4, NumBlocks: 256, NoWindowSplit: true}, prompt, 80)
	req := func() *Request {
		return &Request{Prompt: prompt, Params: greedy(), MaxTokens: 80, IgnoreEOS: true}
	}
	got, cached := run1(t, e, req())
	if cached != 0 || !slices.Equal(got, want) {
		t.Fatalf("first run: cached %d,\ntokens %v\nwant   %v", cached, got, want)
	}
	got, cached = run1(t, e, req())
	if cached != 40 || !slices.Equal(got, want) {
		t.Fatalf("repeated prompt: cached %d (want 40),\ntokens %v\nwant   %v", cached, got, want)
	}
	// Nothing leaked: the longest sequence still fits, with four at once beside it.
	long := make([]int, e.MaxSequenceLen()-40)
	for i := range long {
		long[i] = 5 + i*13%60
	}
	if got, _ := run1(t, e, &Request{Prompt: long, Params: greedy(), MaxTokens: 39, IgnoreEOS: true}); len(got) != 39 {
		t.Fatalf("a request of %d positions (the most is %d) generated %d tokens", len(long)+39, e.MaxSequenceLen(), len(got))
	}
}

// TestWindowSplitMemory: the global and sliding layers' caches split the KV memory: as many
// short sequences as the running limit all fit, and the bytes held never pass the budget.
func TestWindowSplitMemory(t *testing.T) {
	m := gemmaTiny(t)
	const budget = 1 << 20
	e := New(m, Options{BlockSize: 4, MaxBatchTokens: 16, MaxRunning: 16, KVCacheBytes: budget})
	defer e.Close()
	var hs []*Handle
	for i := range 16 {
		p := []int{1 + i, 2, 3, 4, 5, 6, 7}
		h, err := e.Submit(context.Background(), &Request{Prompt: p, Params: greedy(), MaxTokens: 60, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		if got := collect(t, h)[0]; len(got) != 60 {
			t.Fatalf("%d tokens", len(got))
		}
	}
	if held := e.KVCache().HeldBytes; held > budget {
		t.Fatalf("the caches hold %d bytes, more than the %d they share", held, budget)
	}
	t.Logf("held %d of %d bytes after 16 sequences of 67 positions", e.KVCache().HeldBytes, budget)
}

// TestWindowSplitEngineMatchesOneCache: the same mix of requests (batched chunked prefills,
// n > 1, beam search, speculative decoding, a repeated prompt hitting the prefix cache), far
// past the window, gives the same tokens and logprobs on an engine whose sliding layers have
// a window cache of their own as on one whose cache holds every layer.
func TestWindowSplitEngineMatchesOneCache(t *testing.T) {
	m := gemmaTiny(t)
	prompt := func(seed, n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = 3 + (i*seed+seed)%60
		}
		return p
	}
	reqs := func() []*Request {
		long := prompt(7, 45)
		return []*Request{
			{Prompt: long, Params: greedy(), MaxTokens: 70, IgnoreEOS: true, Logprobs: true},
			{Prompt: prompt(5, 20), Params: seeded(3), MaxTokens: 50, IgnoreEOS: true, N: 3, Logprobs: true},
			{Prompt: prompt(11, 33), Params: greedy(), MaxTokens: 60, IgnoreEOS: true, Logprobs: true, Speculative: ngram(8, 1, 3)},
		}
	}
	opts := Options{BlockSize: 4, MaxBatchTokens: 16}
	one := New(m, Options{BlockSize: 4, MaxBatchTokens: 16, NoWindowSplit: true})
	want := run(t, one, reqs()...)
	one.Close()
	e := New(m, opts)
	got := run(t, e, reqs()...)
	// The long prompt again, once its blocks are in the prefix cache.
	again := run(t, e, &Request{Prompt: prompt(7, 45), Params: greedy(), MaxTokens: 70, IgnoreEOS: true, Logprobs: true})
	st := e.Stats()
	e.Close()
	sameResults(t, "window cache", got, want)
	sameResults(t, "window cache, from the prefix cache", again, want[:1])
	if st.CachedPromptTokens == 0 {
		t.Fatal("the repeated prompt did not hit the prefix cache")
	}

	beam := func(e *Engine) []int {
		defer e.Close()
		p := greedy()
		h, err := e.Submit(context.Background(), &Request{Prompt: prompt(13, 25), Params: p, MaxTokens: 40, IgnoreEOS: true, Beam: &Beam{Width: 3, LengthPenalty: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return collect(t, h)[0]
	}
	if g, w := beam(New(m, opts)), beam(New(m, Options{BlockSize: 4, MaxBatchTokens: 16, NoWindowSplit: true})); !slices.Equal(g, w) {
		t.Fatalf("beam search: %v with the window cache, %v without", g, w)
	}
}

// seeded is sampling at temperature 0.8 with a seed.
func seeded(seed int64) sample.Params {
	p := sample.Defaults()
	p.Temperature = 0.8
	p.Seed = &seed
	return p
}

package inference

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/honeai/hone/internal/model"
)

func run1(t *testing.T, e *Engine, req *Request) ([]int, int) {
	t.Helper()
	h, err := e.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	out := collect(t, h)[0]
	return out, h.CachedTokens
}

// TestPrefixCache: a repeated prompt starts from its cached full blocks (all but the block
// holding the last token), generates what the bare model generates, and only requests with
// the same cache_salt and adapter share blocks.
func TestPrefixCache(t *testing.T) {
	m := tiny(t)
	e := New(m, Options{BlockSize: 4, MaxBatchTokens: 16})
	defer e.Close()
	prompt := make([]int, 19)
	for i := range prompt {
		prompt[i] = 3 + i*7%50
	}
	want := greedyDirect(m, prompt, 6)
	req := func(p []int, salt string, a *model.LoRA) *Request {
		return &Request{Prompt: p, Params: greedy(), MaxTokens: 6, IgnoreEOS: true, CacheSalt: salt, Adapter: a}
	}
	got, cached := run1(t, e, req(prompt, "", nil))
	if cached != 0 || !slices.Equal(got, want) {
		t.Fatalf("first run: cached %d, tokens %v want %v", cached, got, want)
	}
	got, cached = run1(t, e, req(prompt, "", nil))
	if cached != 16 || !slices.Equal(got, want) {
		t.Fatalf("second run: cached %d (want 16), tokens %v want %v", cached, got, want)
	}
	// A different salt never shares; the same salt again does.
	if _, cached = run1(t, e, req(prompt, "tenant-b", nil)); cached != 0 {
		t.Fatalf("other salt: cached %d", cached)
	}
	if _, cached = run1(t, e, req(prompt, "tenant-b", nil)); cached != 16 {
		t.Fatalf("same salt again: cached %d", cached)
	}
	// A prompt sharing the first 9 tokens reuses the two full blocks inside them.
	other := append(append([]int(nil), prompt[:9]...), 60, 61, 62, 63, 64, 65)
	got, cached = run1(t, e, req(other, "", nil))
	if cached != 8 || !slices.Equal(got, greedyDirect(m, other, 6)) {
		t.Fatalf("shared prefix: cached %d, tokens %v", cached, got)
	}
	// Prompt logprobs need every prompt position computed.
	r := req(prompt, "", nil)
	r.PromptLogprobs = true
	if _, cached = run1(t, e, r); cached != 0 {
		t.Fatalf("prompt logprobs used the cache: %d", cached)
	}
	// An adapter's KV differs from the base model's: no sharing across adapters.
	lora := &model.LoRA{Name: "x", Layers: make([]map[string]*model.LoRAPair, m.Config.NumLayers)}
	if _, cached = run1(t, e, req(prompt, "", lora)); cached != 0 {
		t.Fatalf("adapter shared base blocks: %d", cached)
	}
	if _, cached = run1(t, e, req(prompt, "", lora)); cached != 16 {
		t.Fatalf("same adapter again: cached %d", cached)
	}
	if st := e.Stats(); st.CachedPromptTokens != 16+16+8+16 {
		t.Fatalf("stats cached tokens %d", st.CachedPromptTokens)
	}
	// Off by option.
	off := New(m, Options{BlockSize: 4, NoPrefixCache: true})
	defer off.Close()
	run1(t, off, req(prompt, "", nil))
	if _, cached = run1(t, off, req(prompt, "", nil)); cached != 0 {
		t.Fatalf("NoPrefixCache: cached %d", cached)
	}
}

// TestPrefixCacheEviction: with a pool that fits little more than one request, many distinct
// prompts run to completion (cached blocks are evicted, least recently used first), and
// every block is accounted for at the end.
func TestPrefixCacheEviction(t *testing.T) {
	m := tiny(t)
	e := New(m, Options{BlockSize: 4, KVBlocks: 14, MaxBatchTokens: 32})
	defer e.Close()
	for i := 0; i < 12; i++ {
		p := make([]int, 17)
		for j := range p {
			p[j] = 2 + (i*31+j*5)%60
		}
		got, _ := run1(t, e, &Request{Prompt: p, Params: greedy(), MaxTokens: 8, IgnoreEOS: true})
		if want := greedyDirect(m, p, 8); !slices.Equal(got, want) {
			t.Fatalf("prompt %d: %v want %v", i, got, want)
		}
	}
	if free, cached := e.kv.FreeBlocks(), e.kv.CachedBlocks(); free != 14 || cached == 0 || cached > 14 {
		t.Fatalf("free %d (want all 14), cached %d", free, cached)
	}
	// Concurrent requests sharing a prefix.
	base := []int{7, 8, 9, 10, 11, 12, 13, 14, 15}
	var hs []*Handle
	for i := 0; i < 3; i++ {
		h, err := e.Submit(context.Background(), &Request{Prompt: append(slices.Clone(base), 20+i), Params: greedy(), MaxTokens: 3, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	for i, h := range hs {
		if got, want := collect(t, h)[0], greedyDirect(m, append(slices.Clone(base), 20+i), 3); !slices.Equal(got, want) {
			t.Fatalf("concurrent %d: %v want %v", i, got, want)
		}
	}
}

// TestPrefixSharedByRequestsAdmittedTogether: requests with one prompt admitted in the same
// step (an RL group's rollouts) compute its full blocks once: the first prefills them, the
// others wait that step and start from the blocks it put into the prefix cache; a prompt
// sharing only some blocks waits too and takes those; a prompt sharing none never waits.
// Every output is the bare model's.
func TestPrefixSharedByRequestsAdmittedTogether(t *testing.T) {
	m := tiny(t)
	for _, off := range []bool{false, true} {
		e := New(m, Options{BlockSize: 4, MaxBatchTokens: 256, NoPrefixCache: off})
		// A first request holds the loop (its guide) until the others are all waiting, so
		// they are admitted in one step.
		g := gate(make(chan struct{}))
		first, err := e.Submit(context.Background(), &Request{Prompt: []int{1, 2}, Params: greedy(), MaxTokens: 2, Guide: g})
		if err != nil {
			t.Fatal(err)
		}
		prompt := make([]int, 19)
		for i := range prompt {
			prompt[i] = 3 + i*7%50
		}
		partial := append(slices.Clone(prompt[:10]), 61, 62, 63, 64, 65, 66) // shares 2 full blocks
		other := []int{40, 41, 42, 43, 44, 45, 46, 47, 48}                   // shares none
		prompts := [][]int{prompt, prompt, prompt, partial, other, prompt}
		var reqs []*Request
		for _, p := range prompts {
			reqs = append(reqs, &Request{Prompt: p, Params: greedy(), MaxTokens: 5, IgnoreEOS: true})
		}
		hs, err := e.SubmitAll(context.Background(), reqs)
		if err != nil {
			t.Fatal(err)
		}
		close(g)
		collect(t, first)
		var cached []int
		for i, h := range hs {
			if got, want := collect(t, h)[0], greedyDirect(m, prompts[i], 5); !slices.Equal(got, want) {
				t.Fatalf("off=%v request %d: %v want %v", off, i, got, want)
			}
			cached = append(cached, h.CachedTokens)
		}
		st := e.Stats()
		computed := st.PromptTokens - 2 // the first request's
		// Requests 1, 2 and 5 take the prompt's 4 usable blocks (16 tokens), request 3 the
		// 2 it shares (8); request 0 and the unrelated one compute everything.
		want, wantComputed := []int{0, 16, 16, 8, 0, 16}, int64(19+3+3+8+9+3)
		if off {
			want, wantComputed = []int{0, 0, 0, 0, 0, 0}, int64(19*4+16+9)
		}
		if !slices.Equal(cached, want) || computed != wantComputed {
			t.Fatalf("off=%v: cached %v want %v; computed %d prompt tokens, want %d", off, cached, want, computed, wantComputed)
		}
		e.Close()
	}
}

// prefillSteps counts an engine's steps that ran a prefill.
type prefillSteps struct {
	n   int
	log []int
}

func (*prefillSteps) FirstToken(time.Duration)         {}
func (*prefillSteps) InterToken(time.Duration)         {}
func (*prefillSteps) Finished(time.Duration, int, int) {}
func (p *prefillSteps) Step(_ time.Time, _ time.Duration, _, _, prefills int) {
	p.log = append(p.log, prefills)
	if prefills > 0 {
		p.n++
	}
}

// TestPrefixSharingWaves: groups of samples whose prompts share a system prompt's block and
// differ after it prefill in three waves whatever their number: the first prompt; then its
// group's other samples and every other group's first (starting from the shared block); then
// the other groups' samples. Waiting never chains request after request.
func TestPrefixSharingWaves(t *testing.T) {
	m := tiny(t)
	obs := &prefillSteps{}
	e := New(m, Options{BlockSize: 4, MaxBatchTokens: 512, Observer: obs})
	defer e.Close()
	// A first request holds the loop in its first sample (its guide) until the others are
	// all waiting, so they are admitted in one step.
	g := &signalGate{entered: make(chan struct{}), release: make(chan struct{})}
	first, err := e.Submit(context.Background(), &Request{Prompt: []int{1, 2}, Params: greedy(), MaxTokens: 2, Guide: g})
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered
	system := []int{5, 6, 7, 8}
	var reqs []*Request
	var prompts [][]int
	for grp := range 4 {
		p := append(slices.Clone(system), 10+grp, 20+grp, 30+grp, 40+grp, 11+grp, 21+grp, 31+grp, 41+grp, 50)
		for range 4 {
			prompts = append(prompts, p)
			reqs = append(reqs, &Request{Prompt: p, Params: greedy(), MaxTokens: 3, IgnoreEOS: true})
		}
	}
	hs, err := e.SubmitAll(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	close(g.release)
	collect(t, first)
	var cached []int
	for i, h := range hs {
		if got, want := collect(t, h)[0], greedyDirect(m, prompts[i], 3); !slices.Equal(got, want) {
			t.Fatalf("request %d: %v want %v", i, got, want)
		}
		cached = append(cached, h.CachedTokens)
	}
	want := []int{0, 12, 12, 12, 4, 12, 12, 12, 4, 12, 12, 12, 4, 12, 12, 12}
	if !slices.Equal(cached, want) || obs.n != 1+3 {
		t.Fatalf("cached %v want %v; %d steps with prefills (%v), want 1 (the first request) + 3", cached, want, obs.n, obs.log)
	}
}

// signalGate is a guide that tells when the engine's loop first asks it for a mask, then
// holds the loop there until released.
type signalGate struct {
	once             sync.Once
	entered, release chan struct{}
}

func (g *signalGate) NewGuide() Guide { return g }
func (g *signalGate) Mask(dst []uint64) {
	g.once.Do(func() { close(g.entered) })
	<-g.release
	for i := range dst {
		dst[i] = ^uint64(0)
	}
}
func (g *signalGate) Accept(int) error { return nil }
func (g *signalGate) MustEnd() bool    { return false }

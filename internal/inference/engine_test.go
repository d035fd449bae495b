package inference

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
	"github.com/honeai/hone/internal/synth"
)

var (
	once sync.Once
	dir  string
)

func tiny(t *testing.T) *model.Model {
	t.Helper()
	once.Do(func() {
		tmp, err := os.MkdirTemp("", "hone-inference-test-")
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(tmp, "m")
		o := synth.Tiny("qwen3")
		o.Std = 0.1
		if err := synth.Write(dir, o); err != nil {
			t.Fatal(err)
		}
	})
	return load(t, dir)
}

func load(t *testing.T, dir string) *model.Model {
	t.Helper()
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func collect(t *testing.T, h *Handle) map[int][]int {
	t.Helper()
	out := map[int][]int{}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-h.Events():
			if !ok {
				return out
			}
			if ev.HasToken {
				out[ev.Choice] = append(out[ev.Choice], ev.Token)
			}
		case <-timeout:
			t.Fatal("timed out")
		}
	}
}

// greedyDirect decodes greedily with the model alone, for comparison.
func greedyDirect(m *model.Model, prompt []int, n int) []int {
	return greedyOn(m, kvcache.Options{NumBlocks: 64}, prompt, n)
}

// greedyOn is greedyDirect on a cache made with opts.
func greedyOn(m *model.Model, opts kvcache.Options, prompt []int, n int) []int {
	seq := model.NewKVCache(&m.Config, opts).NewSequence()
	toks := prompt
	var out []int
	for i := 0; i < n; i++ {
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

func greedy() sample.Params {
	p := sample.Defaults()
	p.Temperature = 0
	return p
}

func TestGreedyMatchesModelUnderBatching(t *testing.T) {
	m := tiny(t)
	// Small token budget: prompts are prefilled in chunks while other requests decode.
	e := New(m, Options{MaxBatchTokens: 7, BlockSize: 4})
	defer e.Close()
	prompts := [][]int{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {20, 21}, {30, 31, 32, 33, 34, 35}}
	var hs []*Handle
	for _, p := range prompts {
		h, err := e.Submit(context.Background(), &Request{Prompt: p, Params: greedy(), MaxTokens: 12, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	for i, h := range hs {
		got := collect(t, h)[0]
		want := greedyDirect(m, prompts[i], 12)
		if len(got) != 12 {
			t.Fatalf("request %d: %d tokens", i, len(got))
		}
		for j := range want {
			if got[j] != want[j] {
				t.Fatalf("request %d: engine %v, model %v", i, got, want)
			}
		}
	}
}

func TestSeededSamplingIndependentOfBatch(t *testing.T) {
	m := tiny(t)
	e := New(m, Options{})
	defer e.Close()
	seed := int64(7)
	p := sample.Defaults()
	p.Seed = &seed
	req := func() *Request {
		return &Request{Prompt: []int{5, 6, 7}, Params: p, MaxTokens: 10, IgnoreEOS: true, N: 2}
	}
	h1, _ := e.Submit(context.Background(), req())
	alone := collect(t, h1)
	// Again, next to other traffic.
	other, _ := e.Submit(context.Background(), &Request{Prompt: []int{9, 9, 9, 9}, Params: sample.Defaults(), MaxTokens: 20, IgnoreEOS: true})
	h2, _ := e.Submit(context.Background(), req())
	mixed := collect(t, h2)
	collect(t, other)
	for c := 0; c < 2; c++ {
		if len(alone[c]) != 10 || len(mixed[c]) != 10 {
			t.Fatalf("choice %d lengths %d %d", c, len(alone[c]), len(mixed[c]))
		}
		for j := range alone[c] {
			if alone[c][j] != mixed[c][j] {
				t.Fatalf("choice %d differs: %v vs %v", c, alone[c], mixed[c])
			}
		}
	}
}

func TestStopsAndLimits(t *testing.T) {
	m := tiny(t)
	e := New(m, Options{})
	defer e.Close()
	first := greedyDirect(m, []int{3, 4}, 3)
	p := greedy()
	p.StopTokenIDs = []int{first[1]}
	h, _ := e.Submit(context.Background(), &Request{Prompt: []int{3, 4}, Params: p, MaxTokens: 50})
	var last Event
	for ev := range h.Events() {
		last = ev
	}
	if last.Finish != "stop" || last.StopReason != first[1] {
		t.Fatalf("stop token: %+v", last)
	}
	p = greedy()
	p.EOS = []int{first[0]}
	h, _ = e.Submit(context.Background(), &Request{Prompt: []int{3, 4}, Params: p, MaxTokens: 50})
	for ev := range h.Events() {
		last = ev
	}
	if last.Finish != "stop" || last.StopReason != nil {
		t.Fatalf("eos: %+v", last)
	}
	// Stop from the caller (a stop string).
	h, _ = e.Submit(context.Background(), &Request{Prompt: []int{3, 4}, Params: greedy(), MaxTokens: 500, IgnoreEOS: true})
	n := 0
	for ev := range h.Events() {
		n++
		if n == 3 {
			h.Stop(0, "xyz")
		}
		last = ev
	}
	if last.Finish != "stop" || last.StopReason != "xyz" || n >= 500 {
		t.Fatalf("caller stop after %d events: %+v", n, last)
	}
}

func TestCancelFreesBlocks(t *testing.T) {
	m := tiny(t)
	e := New(m, Options{})
	defer e.Close()
	// The request is cancelled after its first token. The tiny model decodes its 400 tokens in
	// tens of milliseconds, which a loaded machine can take to run this goroutine again: a
	// request that finished first is tried again (it cannot tell anything about cancelling).
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithCancel(context.Background())
		h, _ := e.Submit(ctx, &Request{Prompt: []int{1, 2, 3}, Params: sample.Defaults(), MaxTokens: 400, IgnoreEOS: true})
		<-h.Events()
		cancel()
		var last Event
		for ev := range h.Events() {
			last = ev
		}
		if last.Finish == "abort" {
			break
		}
		if last.Finish != "length" || attempt == 10 {
			t.Fatalf("attempt %d: last event %+v", attempt, last)
		}
		t.Logf("attempt %d finished its %d tokens before the cancel was seen", attempt, 400)
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.kv.FreeBlocks() != e.kv.NumBlocks() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if e.kv.FreeBlocks() != e.kv.NumBlocks() {
		t.Fatalf("%d blocks still held", e.kv.NumBlocks()-e.kv.FreeBlocks())
	}
}

func TestQueueAndPriority(t *testing.T) {
	m := tiny(t)
	e := New(m, Options{MaxQueue: 1, MaxRunning: 1, KVBlocks: 8, BlockSize: 4})
	defer e.Close()
	if _, err := e.Submit(context.Background(), &Request{Prompt: []int{1}, Params: greedy(), MaxTokens: 4, Priority: 1}); !errors.Is(err, ErrPriorityNotEnabled) {
		t.Fatalf("priority under fcfs: %v", err)
	}
	if _, err := e.Submit(context.Background(), &Request{Prompt: make([]int, 100), Params: greedy(), MaxTokens: 4}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	// Fill the running slot and the queue; the next is refused.
	var hs []*Handle
	var full bool
	for i := 0; i < 5; i++ {
		h, err := e.Submit(context.Background(), &Request{Prompt: []int{1, 2}, Params: greedy(), MaxTokens: 20, IgnoreEOS: true})
		if errors.Is(err, ErrQueueFull) {
			full = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	if !full {
		t.Fatal("queue never filled")
	}
	for _, h := range hs {
		collect(t, h)
	}
}

// TestPriorityPolicy: ParsePolicy knows fcfs and priority; under PolicyPriority the waiting
// requests are admitted lowest priority first, in arrival order among equals.
func TestPriorityPolicy(t *testing.T) {
	for _, name := range []string{"fcfs", "priority"} {
		if p, err := ParsePolicy(name); err != nil || string(p) != name {
			t.Errorf("ParsePolicy(%q) = %q, %v", name, p, err)
		}
	}
	for _, name := range []string{"", "FCFS", "lifo"} {
		if p, err := ParsePolicy(name); err == nil {
			t.Errorf("ParsePolicy(%q) = %q, want an error", name, p)
		}
	}
	e := New(tiny(t), Options{Policy: PolicyPriority, MaxRunning: 1})
	defer e.Close()
	// The first request holds the only running slot (its guide holds the loop) until the
	// others wait.
	g := gate(make(chan struct{}))
	first, err := e.Submit(context.Background(), &Request{Prompt: []int{1, 2}, Params: greedy(), MaxTokens: 2, Guide: g})
	if err != nil {
		t.Fatal(err)
	}
	priorities := []int{3, 1, 2, 1}
	var reqs []*Request
	for i, p := range priorities {
		reqs = append(reqs, &Request{Prompt: []int{3, 4, i}, Params: greedy(), MaxTokens: 2, Priority: p})
	}
	hs, err := e.SubmitAll(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	close(g)
	collect(t, first)
	for _, h := range hs {
		collect(t, h)
	}
	order := []int{0, 1, 2, 3}
	slices.SortFunc(order, func(a, b int) int { return hs[a].FirstToken.Compare(hs[b].FirstToken) })
	if want := []int{1, 3, 2, 0}; !slices.Equal(order, want) {
		t.Fatalf("admitted %v (priorities %v), want %v", order, priorities, want)
	}
}

// gate is a guide that allows every token once its channel is closed: until then it holds
// the engine's loop.
type gate chan struct{}

func (g gate) NewGuide() Guide { return g }
func (g gate) Mask(dst []uint64) {
	<-g
	for i := range dst {
		dst[i] = ^uint64(0)
	}
}
func (g gate) Accept(int) error { return nil }
func (g gate) MustEnd() bool    { return false }

func TestMain(m *testing.M) {
	code := m.Run()
	if dir != "" {
		os.RemoveAll(filepath.Dir(dir))
	}
	os.Exit(code)
}

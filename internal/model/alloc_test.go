package model_test

import (
	"runtime"
	"runtime/debug"
	"slices"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// TestDecodeStepAllocations pins the allocations of a decode step (four sequences, one token
// each): the batch and the attention scores are reused and attention's small products
// allocate nothing, so what is left is the logits returned and a few small objects a layer
// (attention's task list and the fan-out over the cores). A step used to allocate per
// sequence, kv head and cache block, and the garbage made the collector run several times a
// step at batch 16.
func TestDecodeStepAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	o := synth.Tiny("llama")
	m := synthModel(t, o)
	const batch, ctx, runs = 4, 40, 50
	cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: batch * ((ctx+runs+2)/16 + 1)})
	steps := make([]model.Step, batch)
	prefill := make([]model.Step, batch)
	for i := range steps {
		s := cache.NewSequence()
		toks := make([]int, ctx)
		for j := range toks {
			toks[j] = (i*ctx + j) % m.Config.VocabSize
		}
		prefill[i] = model.Step{Seq: s, Tokens: toks}
		steps[i] = model.Step{Seq: s, Tokens: []int{i + 1}, LogitsAt: []int{0}}
	}
	if _, err := m.Forward(prefill); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(runs, func() {
		if _, err := m.Forward(steps); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%v allocations per decode step (%d layers)", allocs, len(m.Layers))
	if limit := float64(16 + 6*len(m.Layers)); allocs > limit {
		t.Errorf("%v allocations per decode step, want at most %v", allocs, limit)
	}
}

// TestForwardIntoReusesLogits: ForwardInto writes the logits into the caller's buffer, the
// values Forward returns, and a decode step then allocates less by the logits' size (a
// vocabulary-sized array a sequence: the garbage a serving loop no longer makes).
func TestForwardIntoReusesLogits(t *testing.T) {
	o := synth.Tiny("llama")
	o.Vocab = 4096
	m := synthModel(t, o)
	const batch = 4
	newSteps := func() []model.Step {
		cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: 64})
		steps := make([]model.Step, batch)
		for i := range steps {
			s := cache.NewSequence()
			if _, err := m.Forward([]model.Step{{Seq: s, Tokens: []int{3, 4, 5, i}}}); err != nil {
				t.Fatal(err)
			}
			steps[i] = model.Step{Seq: s, Tokens: []int{i + 1}, LogitsAt: []int{0}}
		}
		return steps
	}
	a, b := newSteps(), newSteps()
	var buf []float32
	for range 3 {
		want, err := m.Forward(a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.ForwardInto(b, &buf)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if !slices.Equal(got[i][0], want[i][0]) || &got[i][0][0] != &buf[i*m.Config.VocabSize] {
				t.Fatalf("sequence %d: the logits differ or are not the buffer's", i)
			}
		}
		for i := range a {
			a[i].Seq.Truncate(a[i].Seq.Len() - 1)
			b[i].Seq.Truncate(b[i].Seq.Len() - 1)
		}
	}
	if raceEnabled {
		return
	}
	// No collection while measuring: one empties the pools (sync.Pool) whose buffers a step
	// takes, and the next steps would allocate them again in whichever half it fell.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	bytes := func(f func()) uint64 {
		f() // the pools filled
		for i := range a {
			a[i].Seq.Truncate(a[i].Seq.Len() - 1)
		}
		var x, y runtime.MemStats
		runtime.ReadMemStats(&x)
		for range 20 {
			f()
			for i := range a {
				a[i].Seq.Truncate(a[i].Seq.Len() - 1)
			}
		}
		runtime.ReadMemStats(&y)
		return (y.TotalAlloc - x.TotalAlloc) / 20
	}
	// The least of three measurements each: a step's occasional allocations (a scratch
	// buffer growing, the worker pool's bookkeeping) fall in one measurement or another.
	least := func(f func()) uint64 { return min(bytes(f), bytes(f), bytes(f)) }
	plain := least(func() { m.Forward(a) })
	into := least(func() { m.ForwardInto(a, &buf) })
	t.Logf("a decode step allocates %d bytes, %d with ForwardInto", plain, into)
	// A little slack: the other allocations of a step vary by a few bytes between runs.
	if logits := uint64(batch * m.Config.VocabSize * 4); into+logits > plain+plain/64 {
		t.Errorf("ForwardInto allocates %d bytes a step, Forward %d: not the logits' %d less", into, plain, logits)
	}
}

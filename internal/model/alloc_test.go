package model_test

import (
	"testing"

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
	cache := model.NewKVCache(&m.Config, model.KVCacheOptions{BlockSize: 16, NumBlocks: batch * ((ctx+runs+2)/16 + 1)})
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

package model_test

import (
	"math"
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// Gemma's golden variants (scripts/model-goldens/gen.sh): TestLogitsMatchTransformers runs
// them with the others.
func init() {
	for _, a := range []string{"gemma2", "gemma3"} {
		goldenVariants[a] = func() synth.Options { return synth.Tiny(a) }
		goldenVariants[a+"-lora"] = func() synth.Options { return synth.Tiny(a) }
	}
}

func TestGemmaConfig(t *testing.T) {
	dir := t.TempDir()
	if err := synth.Write(dir, synth.Tiny("gemma3")); err != nil {
		t.Fatal(err)
	}
	c, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Arch != "gemma3" || !c.QKNorm || !c.PostNorms || !c.GeluTanh || c.SlidingWindow != 8 || c.RopeLocalTheta != 1000 ||
		c.RopeScaling == nil || c.RopeScaling.Factor != 2.5 || c.QueryPreAttnScalar != 24 || c.FinalSoftcap != 0 {
		t.Fatalf("config %+v", c)
	}
}

// TestGemmaGreedyDecode: greedy decoding through the paged cache (one token a step, beside
// another sequence in the same batch) picks the same tokens as re-running the whole prefix
// each step, past the sliding window.
func TestGemmaGreedyDecode(t *testing.T) {
	for _, arch := range []string{"gemma2", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			dir := t.TempDir()
			o := synth.Tiny(arch)
			o.Std = 0.2
			if err := synth.Write(dir, o); err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(dir, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			cache := model.NewKVCache(&m.Config, model.KVCacheOptions{NumBlocks: 64, BlockSize: 4})
			seq, other := cache.NewSequence(), cache.NewSequence()
			prompt := []int{5, 17, 200, 3, 99}
			toks := append([]int(nil), prompt...)
			out, err := m.Forward([]model.Step{{Seq: seq, Tokens: prompt, LogitsAt: []int{len(prompt) - 1}},
				{Seq: other, Tokens: []int{7, 8, 9}, LogitsAt: []int{2}}})
			if err != nil {
				t.Fatal(err)
			}
			next := argmax(out[0][0])
			for i := 0; i < 20; i++ {
				toks = append(toks, next)
				ref := lastLogits(t, m, toks)
				out, err := m.Forward([]model.Step{{Seq: seq, Tokens: []int{next}, LogitsAt: []int{0}},
					{Seq: other, Tokens: []int{11 + i}, LogitsAt: []int{0}}})
				if err != nil {
					t.Fatal(err)
				}
				if g, w := argmax(out[0][0]), argmax(ref); g != w {
					t.Fatalf("step %d: decode picks %d, full prefill %d", i, g, w)
				}
				for j := range ref {
					if d := math.Abs(float64(out[0][0][j] - ref[j])); d > 1e-4 {
						t.Fatalf("step %d: logit %d differs by %.3g", i, j, d)
					}
				}
				next = argmax(out[0][0])
			}
			t.Logf("greedy: %v", toks[len(prompt):])
		})
	}
}

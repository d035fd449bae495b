package inference

import (
	"context"
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
)

// refBeam is beam search written plainly: every beam's logits recomputed from its whole token
// sequence with a fresh cache.
func refBeam(m *model.Model, prompt []int, width, maxTokens int, lp float64, eos []int) [][]int {
	type beam struct {
		out []int
		cum float64
	}
	score := func(n int, cum float64) float64 { return cum / math.Pow(float64(len(prompt)+n), lp) }
	live := []beam{{}}
	var done []beam
	for step := 0; step < maxTokens && len(live) > 0; step++ {
		var cands []beam
		for _, b := range live {
			toks := append(slices.Clone(prompt), b.out...)
			cache := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 64})
			l, _ := m.Forward([]model.Step{{Seq: cache.NewSequence(), Tokens: toks, LogitsAt: []int{len(toks) - 1}}})
			lps := logSoftmax(l[0][0])
			for _, t := range topK(lps, 2*width) {
				nb := beam{out: append(slices.Clone(b.out), t), cum: b.cum + float64(lps[t])}
				if slices.Contains(eos, t) {
					done = append(done, beam{out: b.out, cum: nb.cum})
					continue
				}
				cands = append(cands, nb)
			}
		}
		sort.SliceStable(cands, func(i, j int) bool {
			return score(len(cands[i].out), cands[i].cum) > score(len(cands[j].out), cands[j].cum)
		})
		live = cands[:min(width, len(cands))]
	}
	all := append(done, live...)
	sort.SliceStable(all, func(i, j int) bool { return score(len(all[i].out), all[i].cum) > score(len(all[j].out), all[j].cum) })
	var out [][]int
	for _, b := range all[:min(width, len(all))] {
		out = append(out, b.out)
	}
	return out
}

func TestBeamSearchMatchesReference(t *testing.T) {
	m := tiny(t)
	e := New(m, Options{BlockSize: 4, MaxBatchTokens: 64})
	defer e.Close()
	for _, tc := range []struct {
		width int
		lp    float64
		eos   []int
	}{{3, 1.0, nil}, {2, 0.5, nil}, {4, 1.0, nil}} {
		prompt := []int{4, 9, 16, 25, 36}
		eos := tc.eos
		want := refBeam(m, prompt, tc.width, 7, tc.lp, eos)
		p := greedy()
		p.EOS = eos
		h, err := e.Submit(context.Background(), &Request{Prompt: prompt, Params: p, MaxTokens: 7, Beam: &Beam{Width: tc.width, LengthPenalty: tc.lp}})
		if err != nil {
			t.Fatal(err)
		}
		got := collect(t, h)
		if len(got) != len(want) {
			t.Fatalf("width %d: %d choices, want %d", tc.width, len(got), len(want))
		}
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("width %d choice %d: %v, want %v (all %v)", tc.width, i, got[i], want[i], want)
			}
		}
		// Beams are distinct sequences.
		for i := 1; i < len(want); i++ {
			if slices.Equal(got[i], got[i-1]) {
				t.Fatalf("duplicate beams %v", got)
			}
		}
	}
	// An end-of-sequence token among the candidates completes a beam: with the most likely
	// first token as EOS, one choice is the empty completion.
	prompt := []int{4, 9, 16, 25, 36}
	first := refBeam(m, prompt, 1, 1, 1, nil)[0][0]
	want := refBeam(m, prompt, 3, 5, 1, []int{first})
	p := greedy()
	p.EOS = []int{first}
	h, _ := e.Submit(context.Background(), &Request{Prompt: prompt, Params: p, MaxTokens: 5, Beam: &Beam{Width: 3, LengthPenalty: 1}})
	got := collect(t, h)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("with EOS, choice %d: %v, want %v", i, got[i], want[i])
		}
	}
	if e.kv.FreeBlocks() != e.kv.NumBlocks() {
		t.Fatalf("blocks leaked: %d free of %d", e.kv.FreeBlocks(), e.kv.NumBlocks())
	}
}

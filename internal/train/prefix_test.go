package train

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPrefixMatchesSeparate checks a pass of sequences that continue one prefix (Seq.Prefix)
// against the same sequences run whole one by one: the statistics of the continuations'
// rows and the adapter's gradients of a loss on them. Gemma 3 and Mistral have sliding layers
// (window 8, shorter than the sequences), qwen3moe routed experts; -blocks splits attention into
// blocks of 3 rows.
func TestPrefixMatchesSeparate(t *testing.T) {
	for _, arch := range []string{"llama", "qwen3", "gemma3", "mistral", "qwen3moe", "llama-blocks", "llama-recompute"} {
		t.Run(arch, func(t *testing.T) {
			name := arch
			switch arch {
			case "llama-blocks":
				name = "llama"
				defer func(b int) { attnBlock = b }(attnBlock)
				attnBlock = 3
			case "llama-recompute":
				name = "llama"
			}
			m := tinyModel(t, name, 0.2, "f32")
			a, err := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			randomise(a, 5)
			e, err := NewTrainer(m, a)
			if err != nil {
				t.Fatal(err)
			}
			e.Recompute = arch == "llama-recompute"
			rng := rand.New(rand.NewPCG(4, 4))
			toks := func(n int) []int {
				out := make([]int, n)
				for i := range out {
					out[i] = rng.IntN(m.Config.VocabSize)
				}
				return out
			}
			prefix, conts := toks(9), [][]int{toks(5), toks(11), toks(4)}
			// Separately: each whole sequence, a loss on its continuation's rows.
			coefs := make([][]float32, len(conts))
			var want []TokenStats
			for i, c := range conts {
				s := Seq{Tokens: append(append([]int{}, prefix...), c...)}
				g := make([]float32, len(s.Tokens))
				for r := len(prefix); r+1 < len(g); r++ {
					g[r] = float32(rng.Float64() - 0.3)
				}
				coefs[i] = g
				want = append(want, e.ForwardBackward(s, func(TokenStats) []float32 { return append([]float32{}, g...) }))
			}
			wantG := snapshot(e.G)
			// Shared: the prefix once, the continuations after it.
			e.G.Zero()
			s := Seq{Tokens: append([]int{}, prefix...), Segments: []int{0}, Prefix: []int{-1}}
			for _, c := range conts {
				s.Segments = append(s.Segments, len(s.Tokens))
				s.Prefix = append(s.Prefix, 0)
				s.Tokens = append(s.Tokens, c...)
			}
			g := make([]float32, len(s.Tokens))
			for i, c := range conts {
				off := s.Segments[i+1]
				copy(g[off:off+len(c)], coefs[i][len(prefix):])
			}
			got := e.ForwardBackward(s, func(TokenStats) []float32 { return append([]float32{}, g...) })
			for i, c := range conts {
				off := s.Segments[i+1]
				for r := 0; r+1 < len(c); r++ {
					gl, wl := got.Logp[off+r], want[i].Logp[len(prefix)+r]
					ge, we := got.Entropy[off+r], want[i].Entropy[len(prefix)+r]
					if math.Abs(float64(gl-wl)) > 1e-4 || math.Abs(float64(ge-we)) > 1e-4 {
						t.Fatalf("continuation %d row %d: logp %v entropy %v, whole %v %v", i, r, gl, ge, wl, we)
					}
				}
			}
			checked := 0
			for l, layer := range e.G.Layers {
				for mod, p := range layer {
					for k, pair := range [][2][]float32{{p.A, wantG[l][mod][0]}, {p.B, wantG[l][mod][1]}} {
						scale := 0.0
						for _, v := range pair[1] {
							scale = max(scale, math.Abs(float64(v)))
						}
						for i := range pair[0] {
							if d := math.Abs(float64(pair[0][i] - pair[1][i])); d > 1e-4*scale+1e-6 {
								t.Fatalf("layer %d %s %c[%d]: shared %v, whole %v", l, mod, "AB"[k], i, pair[0][i], pair[1][i])
							}
							checked++
						}
					}
				}
			}
			if checked == 0 {
				t.Fatal("no gradient compared")
			}
		})
	}
}

// snapshot copies the adapter gradients: layer → module → {A, B}.
func snapshot(g *Grads) []map[string][2][]float32 {
	out := make([]map[string][2][]float32, len(g.Layers))
	for l, layer := range g.Layers {
		out[l] = map[string][2][]float32{}
		for mod, p := range layer {
			out[l][mod] = [2][]float32{append([]float32{}, p.A...), append([]float32{}, p.B...)}
		}
	}
	return out
}

// TestRLPassesMatchOneByOne checks an RL step's passes (planRLPasses: each sequence's rows
// after its last sampled token left out; one by one, or packed with shared prompts) against
// the whole sequences run one by one (rlWhole): the loss, the metrics and the gradients, with
// a KL reference and a trajectory whose sampling logprobs are unknown (the extra pass for
// them). One case packs few rows a pass, so that a group's samples split over passes, each
// repeating the prompt.
func TestRLPassesMatchOneByOne(t *testing.T) {
	for _, arch := range []string{"llama", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			m := tinyModel(t, arch, 0.2, "f32")
			a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 3})
			randomise(a, 5)
			ref, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 7})
			randomise(ref, 8)
			e, _ := NewTrainer(m, a)
			cfg := RLConfig{KLPenaltyCoef: 0.1, RefAdapter: ref, ImportanceSampling: "geometric_average"}
			if err := cfg.defaults(); err != nil {
				t.Fatal(err)
			}
			run := func(share bool, rows int) (RLMetrics, []map[string][2][]float32, int) {
				defer func(s bool, r int) { rlSharePrefixes, rlPassRows = s, r }(rlSharePrefixes, rlPassRows)
				rlSharePrefixes, rlPassRows = share, rows
				seqs := rlTestSeqs(m.Config.VocabSize)
				w := rlWeights(seqs)
				var met RLMetrics
				_, err := e.rlPasses(t.Context(), seqs, &cfg, w, &met)
				if err != nil {
					t.Fatal(err)
				}
				plan := planRLPasses(slices.DeleteFunc(slices.Clone(seqs), func(s *rlSeq) bool { return !slices.Contains(s.sampled, true) }), share, rows)
				for _, p := range plan {
					for _, mb := range p.members {
						if share && mb.skip != 19 || mb.end != 25 {
							t.Errorf("%d rows a pass: a member shares %d tokens and ends at %d, want the 19 before its first sampled token and 25", rows, mb.skip, mb.end)
						}
					}
				}
				return met, snapshot(e.G), len(plan)
			}
			want, wantG := rlWhole(t, e, &cfg, m.Config.VocabSize)
			for _, c := range []struct {
				rows, passes int
				share        bool
			}{{1, 11, false}, {1024, 1, true}, {30, 6, true}} {
				got, gotG, passes := run(c.share, c.rows)
				if passes < c.passes {
					t.Errorf("%d rows a pass: %d passes, want at least %d", c.rows, passes, c.passes)
				}
				for _, v := range [][3]any{{"loss", got.Loss, want.Loss}, {"entropy", got.Entropy, want.Entropy},
					{"kl_div", got.KLDiv, want.KLDiv}, {"kl_policy_ref", got.KLPolicyRef, want.KLPolicyRef}} {
					if g, w := v[1].(float64), v[2].(float64); math.Abs(g-w) > 1e-5*max(1, math.Abs(w)) {
						t.Errorf("%d rows a pass: %s %v, one by one %v", c.rows, v[0], g, w)
					}
				}
				if got.NumTrainableTokens != want.NumTrainableTokens {
					t.Errorf("trainable tokens %d, one by one %d", got.NumTrainableTokens, want.NumTrainableTokens)
				}
				for l := range gotG {
					for mod, p := range gotG[l] {
						for k := range 2 {
							scale := 0.0
							for _, v := range wantG[l][mod][k] {
								scale = max(scale, math.Abs(float64(v)))
							}
							for i, v := range p[k] {
								if d := math.Abs(float64(v - wantG[l][mod][k][i])); d > 1e-4*scale+1e-7 {
									t.Fatalf("%d rows a pass: layer %d %s %c[%d]: %v, one by one %v", c.rows, l, mod, "AB"[k], i, v, wantG[l][mod][k][i])
								}
							}
						}
					}
				}
			}
		})
	}
}

// rlTestSeqs are TestRLPassesMatchOneByOne's sequences: 3 groups of 4, prompts of 20 tokens,
// 5 sampled, 2 of context after them; one with an unknown sampling logprob, one with nothing
// sampled.
func rlTestSeqs(vocab int) []*rlSeq {
	seqs := rlBenchSeqs(vocab, 3, 4, 20, 5)
	seqs[5].oldLogp[22] = math.NaN()
	seqs[2].sampled = make([]bool, len(seqs[2].sampled)) // nothing sampled: left out
	return seqs
}

// rlWhole is an RL step's passes as RLStep ran them before planRLPasses: each whole sequence
// on its own.
func rlWhole(t *testing.T, e *Trainer, cfg *RLConfig, vocab int) (RLMetrics, []map[string][2][]float32) {
	seqs := rlTestSeqs(vocab)
	w := rlWeights(seqs)
	var met RLMetrics
	e.G.Zero()
	for _, s := range seqs {
		n := s.sampledCount()
		if n == 0 {
			continue
		}
		met.NumTrainableTokens += n
		old := make([]float64, len(s.seq.Tokens))
		s.seq.Need = make([]bool, len(s.seq.Tokens))
		needOld := false
		for t := 0; t+1 < len(s.seq.Tokens); t++ {
			s.seq.Need[t] = s.sampled[t+1]
			old[t] = s.oldLogp[t+1]
			needOld = needOld || s.sampled[t+1] && math.IsNaN(old[t])
		}
		ref := e.Logprobs(s.seq, cfg.RefAdapter)
		if needOld {
			cur := e.Logprobs(s.seq, e.A)
			for t := range old {
				if math.IsNaN(old[t]) {
					old[t] = float64(cur.Logp[t])
				}
			}
		}
		e.ForwardBackward(s.seq, func(st TokenStats) []float32 {
			var l rlLoss
			met.Loss += l.compute(cfg, s, st, old, ref, w[s.traj])
			met.Entropy += l.entropy
			met.KLDiv += l.k3
			met.KLPolicyRef += l.klRef
			return l.g
		})
	}
	if met.NumTrainableTokens == 0 {
		t.Fatal("nothing trained")
	}
	return met, snapshot(e.G)
}

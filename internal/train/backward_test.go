package train

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

func tinyModel(t testing.TB, arch string, std float64, dtype string) *model.Model {
	t.Helper()
	dir := filepath.Join(t.TempDir(), arch)
	o := synth.Tiny(arch)
	o.Std = std
	o.DType = dtype
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// randomise gives B (zero at initialisation) random values so every gradient is non-zero.
func randomise(a *model.LoRA, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	for _, layer := range a.Layers {
		for _, p := range layer {
			for i := range p.B {
				p.B[i] = float32(rng.NormFloat64() * 0.1)
			}
		}
	}
}

// weightedNLL is Σ w_t·(−logp_t), the loss of the gradient checks.
func weightedNLL(w []float32) func(TokenStats) []float32 {
	return func(TokenStats) []float32 {
		g := make([]float32, len(w))
		for i, v := range w {
			g[i] = -v
		}
		return g
	}
}

func lossOf(e *Trainer, s Seq, w []float32) float64 {
	st := e.Logprobs(s, e.A)
	l := 0.0
	for i, v := range w {
		if s.HasTarget(i) {
			l -= float64(v) * float64(st.Logp[i])
		}
	}
	return l
}

// TestGradientsMatchFiniteDifferences checks dLoss/dA and dLoss/dB of every adapted module of
// tiny Llama, Qwen2 (biases) and Qwen3 (q/k norms) models, on a packed sequence of two
// examples, against central differences.
func TestGradientsMatchFiniteDifferences(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3", "qwen3-recompute", "qwen2-blocks"} {
		t.Run(arch, func(t *testing.T) {
			recompute := strings.HasSuffix(arch, "-recompute")
			arch = strings.TrimSuffix(arch, "-recompute")
			blocks := strings.HasSuffix(arch, "-blocks")
			arch = strings.TrimSuffix(arch, "-blocks")
			if blocks {
				// Several attention row blocks (one straddling the segment boundary) and head chunks.
				defer func(b int) { attnBlock = b }(attnBlock)
				attnBlock = 5
			}
			m := tinyModel(t, arch, 0.2, "f32")
			a, err := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			randomise(a, 5)
			e, err := NewTrainer(m, a)
			if err != nil {
				t.Fatal(err)
			}
			e.Recompute = recompute
			if blocks {
				e.ChunkRows = 4
			}
			rng := rand.New(rand.NewPCG(9, 9))
			s := Seq{Tokens: make([]int, 23), Segments: []int{0, 14}}
			w := make([]float32, len(s.Tokens))
			for i := range s.Tokens {
				s.Tokens[i] = rng.IntN(m.Config.VocabSize)
				w[i] = float32(rng.Float64())
			}
			if blocks {
				// Blocked attention and chunked head compute what one block and one chunk do.
				got := e.Logprobs(s, a)
				attnBlock, e.ChunkRows = 128, 128
				want := e.Logprobs(s, a)
				attnBlock, e.ChunkRows = 5, 4
				for i := range want.Logp {
					if math.Abs(float64(got.Logp[i]-want.Logp[i])) > 1e-5 || math.Abs(float64(got.Entropy[i]-want.Entropy[i])) > 1e-5 {
						t.Fatalf("position %d: blocked logp %v entropy %v, unblocked %v %v", i, got.Logp[i], got.Entropy[i], want.Logp[i], want.Entropy[i])
					}
				}
			}
			e.ForwardBackward(s, weightedNLL(w))
			checked := 0
			for l, layer := range a.Layers {
				for _, mod := range model.Modules {
					p := layer[mod]
					if p == nil {
						continue
					}
					g := e.G.Layers[l][mod]
					for _, which := range []struct {
						v, g []float32
						name string
					}{{p.A, g.A, "A"}, {p.B, g.B, "B"}} {
						for k := 0; k < 3; k++ {
							i := rng.IntN(len(which.v))
							old := which.v[i]
							const h = 1e-2
							which.v[i] = old + h
							lp := lossOf(e, s, w)
							which.v[i] = old - h
							lm := lossOf(e, s, w)
							which.v[i] = old
							num := (lp - lm) / (2 * h)
							got := float64(which.g[i])
							if math.Abs(num-got) > 2e-3+0.03*math.Abs(num) {
								t.Errorf("layer %d %s.%s[%d]: analytic %.6g, numeric %.6g", l, mod, which.name, i, got, num)
							}
							checked++
							if testing.Verbose() && k == 0 {
								t.Logf("layer %d %s.%s: analytic %.6g numeric %.6g", l, mod, which.name, got, num)
							}
						}
					}
				}
			}
			if checked < 80 {
				t.Fatalf("only %d gradients checked", checked)
			}
		})
	}
}

// TestHeadPathsAgree: known coefficients (one head pass, SFT) and a coefficient function
// (two passes, RL) give the same gradients; Need restricts the head to the positions that
// matter without changing their statistics or gradients.
func TestHeadPathsAgree(t *testing.T) {
	m := tinyModel(t, "llama", 0.2, "f32")
	a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Seed: 3})
	randomise(a, 5)
	e, _ := NewTrainer(m, a)
	e.ChunkRows = 3
	rng := rand.New(rand.NewPCG(2, 2))
	s := Seq{Tokens: make([]int, 19), Segments: []int{0, 11}}
	w := make([]float32, len(s.Tokens))
	need := make([]bool, len(s.Tokens))
	for i := range s.Tokens {
		s.Tokens[i] = rng.IntN(m.Config.VocabSize)
		if i%3 != 0 {
			w[i], need[i] = float32(rng.Float64()), true
		}
	}
	grads := func() [][]float32 {
		var out [][]float32
		for _, g := range e.G.list() {
			out = append(out, slices.Clone(g))
		}
		e.G.Zero()
		return out
	}
	st1 := e.ForwardBackward(s, weightedNLL(w))
	g1 := grads()
	g := make([]float32, len(w))
	for i, v := range w {
		g[i] = -v
	}
	st2 := e.ForwardBackwardWeights(s, g)
	g2 := grads()
	sn := s
	sn.Need = need
	st3 := e.ForwardBackward(sn, weightedNLL(w))
	g3 := grads()
	for i := range s.Tokens {
		if !need[i] || !s.HasTarget(i) {
			if st3.Logp[i] != 0 {
				t.Fatalf("position %d not needed but has logp %v", i, st3.Logp[i])
			}
			continue
		}
		for _, st := range []TokenStats{st2, st3} {
			if math.Abs(float64(st.Logp[i]-st1.Logp[i])) > 1e-6 || math.Abs(float64(st.Entropy[i]-st1.Entropy[i])) > 1e-5 {
				t.Fatalf("position %d: logp %v / %v, entropy %v / %v", i, st.Logp[i], st1.Logp[i], st.Entropy[i], st1.Entropy[i])
			}
		}
	}
	for k := range g1 {
		for j := range g1[k] {
			for _, other := range [][][]float32{g2, g3} {
				if d := math.Abs(float64(other[k][j] - g1[k][j])); d > 1e-5+1e-4*math.Abs(float64(g1[k][j])) {
					t.Fatalf("tensor %d[%d]: %v vs %v", k, j, other[k][j], g1[k][j])
				}
			}
		}
	}
}

// TestHeadPackShared: engines on one model share the packed head, and the cache lets go of it
// with the model.
func TestHeadPackShared(t *testing.T) {
	var key weak.Pointer[model.Model]
	func() {
		m := tinyModel(t, "llama", 0.02, "bf16")
		key = weak.Make(m)
		a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 2})
		e1, _ := NewTrainer(m, a)
		e2, _ := NewTrainer(m, a)
		e1.BF16, e2.BF16 = false, false // the cache is that of f32 arithmetic
		if e1.headPackedT() != e2.headPackedT() || e1.headPackedT().N() != m.Config.HiddenSize {
			t.Fatal("the head is packed once per model")
		}
		if _, ok := headPacks.Load(key); !ok {
			t.Fatal("the packed head is not cached")
		}
	}()
	for i := 0; i < 100; i++ {
		if _, ok := headPacks.Load(key); !ok {
			return
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the packed head outlives its model")
}

// TestBF16ArithmeticAgrees: on a bf16 model, a pass in bf16 arithmetic (activations rounded to
// bf16 as they enter the frozen products; AMX, VDPBF16PS or pure Go, whichever the CPU runs)
// gives the log-probabilities and adapter gradients of f32 arithmetic to bf16 precision, for
// every architecture; the packs it uses are the model's own, and f32 arithmetic afterwards (on
// the weights whose pages the bf16 pass gave back) computes what it did before.
func TestBF16ArithmeticAgrees(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			m := tinyModel(t, arch, 0.2, "bf16")
			a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Seed: 3})
			randomise(a, 5)
			rng := rand.New(rand.NewPCG(4, 4))
			s := Seq{Tokens: make([]int, 37), Segments: []int{0, 20}}
			w := make([]float32, len(s.Tokens))
			for i := range s.Tokens {
				s.Tokens[i] = rng.IntN(m.Config.VocabSize)
				w[i] = float32(rng.Float64())
			}
			run := func(bf16 bool) (TokenStats, [][]float32) {
				e, _ := NewTrainer(m, a)
				e.BF16 = bf16
				st := e.ForwardBackward(s, weightedNLL(w))
				var gs [][]float32
				for _, g := range e.G.list() {
					gs = append(gs, slices.Clone(g))
				}
				return st, gs
			}
			st32, g32 := run(false)
			st16, g16 := run(true)
			if m.Layers[0].O.PairsPacked(true) == nil || m.LMHead.PairsPacked(false) == nil {
				t.Fatal("no bf16 packs")
			}
			// The bf16 pass gave back the projections' mapped pages (Linear.ReleasePaired):
			// f32 arithmetic, which reads them, faults them back and computes the same.
			if st, gs := run(false); !slices.Equal(st.Logp, st32.Logp) || !slices.EqualFunc(gs, g32, slices.Equal) {
				t.Fatal("f32 arithmetic after the bf16 pass differs from before")
			}
			for i := range s.Tokens {
				if s.HasTarget(i) && math.Abs(float64(st16.Logp[i]-st32.Logp[i])) > 0.05*(1+math.Abs(float64(st32.Logp[i]))) {
					t.Fatalf("position %d: logp %v in bf16, %v in f32", i, st16.Logp[i], st32.Logp[i])
				}
			}
			for k := range g32 {
				var num, den float64
				for j := range g32[k] {
					d := float64(g16[k][j] - g32[k][j])
					num += d * d
					den += float64(g32[k][j]) * float64(g32[k][j])
				}
				rel := math.Sqrt(num / (den + 1e-30))
				if k == 0 {
					t.Logf("first gradient tensor: relative error %.3g in bf16 arithmetic", rel)
				}
				if rel > 0.05 {
					t.Fatalf("gradient tensor %d: relative error %.3g in bf16 arithmetic", k, rel)
				}
			}
		})
	}
}

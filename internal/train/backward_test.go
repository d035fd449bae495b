package train

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

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

func lossOf(e *Engine, s Seq, w []float32) float64 {
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
	for _, arch := range []string{"llama", "qwen2", "qwen3", "qwen3-recompute"} {
		t.Run(arch, func(t *testing.T) {
			recompute := strings.HasSuffix(arch, "-recompute")
			arch = strings.TrimSuffix(arch, "-recompute")
			m := tinyModel(t, arch, 0.2, "f32")
			a, err := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			randomise(a, 5)
			e, err := NewEngine(m, a)
			if err != nil {
				t.Fatal(err)
			}
			e.Recompute = recompute
			rng := rand.New(rand.NewPCG(9, 9))
			s := Seq{Tokens: make([]int, 23), Segments: []int{0, 14}}
			w := make([]float32, len(s.Tokens))
			for i := range s.Tokens {
				s.Tokens[i] = rng.IntN(m.Config.VocabSize)
				w[i] = float32(rng.Float64())
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

package model_test

import (
	"math"
	"testing"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/train"
)

// TestTrainOnServedWeights: `hone serve` trains LoRA adapters on the model it serves. Once
// Prepack has let go of the heap copies of a GGUF dequantized to f32 or bf16 (the embedding
// tied to the head among them), training multiplies by the weights Linear.Dense restores from
// the packs: the adapter's gradients are bit for bit those of the same model before Prepack.
func TestTrainOnServedWeights(t *testing.T) {
	o := synth.Tiny("llama")
	o.Hidden, o.Heads, o.KVHeads, o.Intermediate, o.Tied, o.Std = 128, 4, 2, 256, true, 0.05
	_, path := synthGGUF(t, o, quantizeGGUF(t, func(string) gguf.TensorType { return gguf.Q8_0 }))
	s := train.Seq{Tokens: []int{3, 50, 7, 200, 11, 90, 4, 300, 12, 5, 77}, Segments: []int{0}}
	grads := func(m *model.Model) [][]float32 {
		a, err := train.NewLoRA(&m.Config, train.LoRAConfig{Rank: 4, Alpha: 8, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, layer := range a.Layers { // B is zero at initialisation: make the gradients reach A
			for _, p := range layer {
				for i := range p.B {
					p.B[i] = float32(i%7-3) * 0.05
				}
			}
		}
		e, err := train.NewTrainer(m, a)
		if err != nil {
			t.Fatal(err)
		}
		e.ForwardBackward(s, func(train.TokenStats) []float32 {
			g := make([]float32, len(s.Tokens))
			for i := range g {
				g[i] = -1
			}
			return g
		})
		var out [][]float32
		for _, layer := range e.G.Layers {
			for _, mod := range model.Modules {
				if p := layer[mod]; p != nil {
					out = append(out, p.A, p.B)
				}
			}
		}
		return out
	}
	for _, dt := range []model.DType{model.DTypeF32, model.DTypeBF16} {
		t.Run(string(dt), func(t *testing.T) {
			var got [2][][]float32
			for i, prepack := range []bool{false, true} {
				m, err := model.Load(path, model.LoadOptions{DType: dt})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				if prepack {
					m.Prepack()
					if m.LMHead.W.F32 != nil || m.LMHead.W.Half != nil || m.Layers[0].Down.W.F32 != nil || m.Layers[0].Down.W.Half != nil {
						t.Fatal("Prepack kept the heap copies")
					}
				}
				got[i] = grads(m)
			}
			nonzero := 0
			for i := range got[0] {
				for j := range got[0][i] {
					if got[0][i][j] != 0 {
						nonzero++
					}
					if math.Float32bits(got[0][i][j]) != math.Float32bits(got[1][i][j]) {
						t.Fatalf("gradient %d[%d]: %v on the served model, %v before Prepack", i, j, got[1][i][j], got[0][i][j])
					}
				}
			}
			if nonzero == 0 {
				t.Fatal("every gradient is zero")
			}
		})
	}
}

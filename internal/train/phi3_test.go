package train

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// phi3GoldenModels are the models of scripts/train-goldens/phi3.sh (keep in step): Phi-3
// (whole-head RoPE, 23 tokens: short factors) and Phi-4-mini's shape (partial rotary 0.75,
// tied embeddings, 80 tokens: past original_max_position_embeddings 64, long factors).
var phi3GoldenModels = map[string]func() synth.Options{
	"phi3": func() synth.Options { o := synth.Tiny("phi3"); o.Std = 0.2; return o },
	"phi4mini-long": func() synth.Options {
		o := synth.Tiny("phi3")
		o.Std, o.PartialRotary, o.Tied = 0.2, 0.75, true
		return o
	},
}

// TestPhi3GradientsMatchPyTorch: the gradients of a LoRA on Phi-3's fused modules (qkv_proj,
// o_proj, gate_up_proj, down_proj) for a weighted next-token loss agree with PyTorch + peft
// (float64), through LongRoPE (short and long factors, attention factor) and partial rotary
// dimensions.
func TestPhi3GradientsMatchPyTorch(t *testing.T) {
	for name, opts := range phi3GoldenModels {
		t.Run(name, func(t *testing.T) {
			gd := filepath.Join("testdata", "phi3", name)
			g, m, a := loadGradGolden(t, gd, opts(), "phi3.sh")
			defer m.Close()
			e, err := NewTrainer(m, a)
			if err != nil {
				t.Fatal(err)
			}
			loss, checked, worst := checkGradients(t, e, g.Tokens, g.Weights, g.Loss, g.Grads, 1e-4)
			t.Logf("loss %.6f (PyTorch %.6f), %d tensors, worst error %.2g of a tensor's largest gradient", loss, g.Loss, checked, worst)
		})
	}
}

// TestPhi3SFTCheckpoint makes a Phi-3 adapter with the default targets (PEFT's Phi-3 module
// names), saves it and loads it back as serving does: the same log-probabilities.
func TestPhi3SFTCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	o := synth.Tiny("phi3")
	o.PartialRotary, o.Tied = 0.75, true
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, err := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(a.Targets)
	if want := []string{"down_proj", "gate_up_proj", "o_proj", "qkv_proj"}; !slices.Equal(a.Targets, want) {
		t.Fatalf("targets %v, want %v", a.Targets, want)
	}
	if _, err := NewLoRA(&m.Config, LoRAConfig{Targets: []string{"q_proj"}}); err == nil {
		t.Fatal("a q_proj target on Phi-3 was accepted")
	}
	randomise(a, 5)
	e, err := NewTrainer(m, a)
	if err != nil {
		t.Fatal(err)
	}
	tokens := []int{5, 17, 200, 3, 99, 41, 7, 300, 12, 8, 77}
	before := e.Logprobs(Seq{Tokens: tokens}, a)
	ck := filepath.Join(t.TempDir(), "ck")
	if err := SaveCheckpoint(ck, a, Checkpoint{BaseModel: dir}); err != nil {
		t.Fatal(err)
	}
	back, err := model.LoadLoRA(ck, &m.Config)
	if err != nil {
		t.Fatal(err)
	}
	after := e.Logprobs(Seq{Tokens: tokens}, back)
	for i := range before.Logp {
		if math.Abs(float64(before.Logp[i]-after.Logp[i])) > 1e-6 {
			t.Fatalf("position %d: %v before saving, %v loaded", i, before.Logp[i], after.Logp[i])
		}
	}
}

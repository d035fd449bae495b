package train

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// moeGoldenModel is the model of scripts/train-goldens/qwen3moe.sh (`hone models synth --arch
// qwen3moe --std 0.2 --layers 3 --mlp-only-layers 1`); keep in step.
func moeGoldenModel() synth.Options {
	o := synth.Tiny("qwen3moe")
	o.Std, o.Layers, o.MLPOnlyLayers = 0.2, 3, []int{1}
	return o
}

// TestQwen3MoEGradientsMatchPyTorch: on a Qwen3-MoE (layers 0 and 2 routed, layer 1 dense),
// the attention adapters' gradients of a weighted next-token loss agree with PyTorch + peft
// (float64): the gradient reaches layers 0 and 1 through the experts and through the routing
// weights of the frozen routers.
func TestQwen3MoEGradientsMatchPyTorch(t *testing.T) {
	g, m, a := loadGradGolden(t, "testdata/golden-qwen3moe", moeGoldenModel(), "qwen3moe.sh")
	for _, recompute := range []bool{false, true} {
		e, err := NewTrainer(m, a)
		if err != nil {
			t.Fatal(err)
		}
		e.Recompute = recompute
		_, checked, worst := checkGradients(t, e, g.Tokens, g.Weights, g.Loss, g.Grads, 1e-5)
		t.Logf("recompute %v: %d gradient tensors, worst difference %.2g of the tensor's largest", recompute, checked, worst)
	}
}

// TestQwen3MoELoRATargets: a fresh adapter of a Qwen3-MoE adapts the attention by default,
// and an explicit expert-side target is refused by name.
func TestQwen3MoELoRATargets(t *testing.T) {
	o := moeGoldenModel()
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewLoRA(cfg, LoRAConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(a.Targets, ",") != "q_proj,k_proj,v_proj,o_proj" || a.Layers[0]["gate_proj"] != nil {
		t.Fatalf("targets %v", a.Targets)
	}
	if _, err := NewLoRA(cfg, LoRAConfig{Targets: []string{"q_proj", "down_proj"}}); err == nil || !strings.Contains(err.Error(), "down_proj") {
		t.Fatalf("explicit down_proj target: %v", err)
	}
}

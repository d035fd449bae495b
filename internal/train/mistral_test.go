package train

import "testing"

// TestMistralGradientsMatchPyTorch: on a tiny Mistral (every layer windowed to 8 positions,
// 23 tokens; head_dim 32 other than hidden/heads), the adapter gradients of a weighted
// next-token loss agree with PyTorch + peft (float64; scripts/train-goldens/gen.sh), with the
// activations kept and recomputed.
func TestMistralGradientsMatchPyTorch(t *testing.T) {
	for _, recompute := range []bool{false, true} {
		name := "mistral"
		if recompute {
			name += "-recompute"
		}
		t.Run(name, func(t *testing.T) { checkWindowedGradients(t, "mistral", recompute) })
	}
}

package model_test

import (
	"testing"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// TestQwen3MoEDecodeOneRow: with quantized experts (Q8_0 and Q4_K), a decode step (one row:
// the routed experts' gate and up as one product, their down projections as another) gives
// the logits the same positions get in one prefill (each expert's rows as their own
// products).
func TestQwen3MoEDecodeOneRow(t *testing.T) {
	for _, typ := range []gguf.TensorType{gguf.Q8_0, gguf.Q4_K} {
		t.Run(typ.String(), func(t *testing.T) {
			o := synth.Tiny("qwen3moe")
			o.Std = 0.3
			if typ == gguf.Q4_K {
				o.Hidden, o.HeadDim, o.MoEIntermediate = 256, 64, 256 // whole 256-element super-blocks
			}
			_, path := moeGGUF(t, o, typ, false)
			m, err := model.Load(path, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if q := m.Layers[0].MoE.Experts[0].Gate.W.Q; q == nil || q.Type != typ {
				t.Fatalf("experts not kept as %s", typ)
			}
			tokens := []int{5, 100, 23, 400, 7, 61, 2, 250, 9, 77, 310, 4}
			want := allLogits(t, m, tokens)
			seq := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 8}).NewSequence()
			for i, tok := range tokens {
				out, err := m.Forward([]model.Step{{Seq: seq, Tokens: []int{tok}, LogitsAt: []int{0}}})
				if err != nil {
					t.Fatal(err)
				}
				if e := relErrF(out[0][0], want[i]); e > 1e-4 {
					t.Fatalf("position %d: decode logits differ from the prefill's by %.3g", i, e)
				}
			}
		})
	}
}

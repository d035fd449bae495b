package synth

import (
	"fmt"
	"math"
)

// phi3Arch is Phi-3 (Phi3ForCausalLM): fused projections, LongRoPE, a partial rotary factor;
// max_position_embeddings 256 in Tiny (original_max_position_embeddings 64: LongRoPE's long
// factors from 65 tokens).
var phi3Arch = archSpec{
	name: "phi3", class: "Phi3ForCausalLM", modelType: "phi3",
	tiny:   func(o *Options) { o.MaxPos = 256 },
	check:  (*Options).checkPhi3,
	config: phi3Config,
	layer:  phi3Layer,
}

// checkPhi3 validates the Phi-3 options: an even number of rotary dimensions, and RoPE
// scaling longrope (the default) or none.
func (o *Options) checkPhi3() error {
	if o.PartialRotary == 0 {
		o.PartialRotary = 1
	}
	rot := int(float64(o.HeadDim) * o.PartialRotary)
	switch {
	case o.PartialRotary < 0 || o.PartialRotary > 1 || rot < 2 || rot%2 != 0:
		return fmt.Errorf("synth: partial rotary factor %v gives %d rotary dimensions of %d (want an even number)", o.PartialRotary, rot, o.HeadDim)
	case o.RopeScaling != "" && o.RopeScaling != "longrope" && o.RopeScaling != "none":
		return fmt.Errorf("synth: rope scaling %q is not offered for phi3 (longrope, none)", o.RopeScaling)
	case o.HeadDim*o.Heads != o.Hidden:
		return fmt.Errorf("synth: hidden (%d) must equal heads × head_dim (%d × %d) for phi3", o.Hidden, o.Heads, o.HeadDim)
	case o.MaxPos < 8:
		return fmt.Errorf("synth: max-pos %d is too small for phi3 (at least 8)", o.MaxPos)
	}
	return nil
}

// phi3Config adds Phi3Config's fields: LongRoPE with factors that grow with the frequency
// index (short ones near 1, long ones up to about 1 + 0.8·d/4) against an original context of
// a quarter of max_position_embeddings, and the partial rotary factor.
func phi3Config(o *Options, c map[string]any) {
	c["original_max_position_embeddings"] = o.MaxPos / 4
	c["partial_rotary_factor"] = o.PartialRotary
	c["sliding_window"] = o.MaxPos // no window inside the context
	if o.SlidingWindow > 0 {
		c["sliding_window"] = o.SlidingWindow
	}
	c["pad_token_id"] = c["bos_token_id"] // Phi3Config defaults it to 32000, past a tiny vocabulary
	c["resid_pdrop"] = 0.0
	c["embd_pdrop"] = 0.0
	c["rope_scaling"] = nil
	if o.RopeScaling != "none" {
		half := int(float64(o.HeadDim)*o.PartialRotary) / 2
		short, long := make([]float64, half), make([]float64, half)
		for i := range short {
			short[i] = math.Round((1+0.05*float64(i))*1e4) / 1e4
			long[i] = math.Round((1+0.8*float64(i))*1e4) / 1e4
		}
		c["rope_scaling"] = map[string]any{"type": "longrope", "short_factor": short, "long_factor": long}
	}
}

// phi3Layer draws a Phi-3 layer's weights: the fused qkv_proj (q rows, k rows, v rows) and
// gate_up_proj (gate rows, up rows).
func phi3Layer(o *Options, p string, add func(string, []int, func() float64), normal, norm, deep func() float64) {
	qd, kv := o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
	add(p+"input_layernorm.weight", []int{o.Hidden}, norm)
	add(p+"self_attn.qkv_proj.weight", []int{qd + 2*kv, o.Hidden}, normal)
	add(p+"self_attn.o_proj.weight", []int{o.Hidden, qd}, deep)
	add(p+"post_attention_layernorm.weight", []int{o.Hidden}, norm)
	add(p+"mlp.gate_up_proj.weight", []int{2 * o.Intermediate, o.Hidden}, normal)
	add(p+"mlp.down_proj.weight", []int{o.Hidden, o.Intermediate}, deep)
}

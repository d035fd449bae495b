package synth

import "math/rand/v2"

// gemma2Arch and gemma3Arch are Gemma 2 (Gemma2ForCausalLM) and Gemma 3's text model
// (Gemma3ForCausalLM): Tiny has head_dim 32, tied embeddings, a window of 8 and
// query_pre_attn_scalar 24 (not head_dim, so that tests notice it).
var (
	gemma2Arch = archSpec{
		name: "gemma2", class: "Gemma2ForCausalLM", modelType: "gemma2",
		tiny: gemmaTiny, ownHeadDim: true, normPlusOne: true,
		layer: func(o *Options, p string, add func(string, []int, func() float64), normal, _, deep func() float64) {
			gemmaLayer(o, p, false, add, normal, deep)
		},
		config: func(o *Options, c map[string]any) {
			gemmaConfig(o, c)
			c["attn_logit_softcapping"] = 2.5
			c["final_logit_softcapping"] = 5.5
			c["rope_scaling"] = nil
		},
	}
	gemma3Arch = archSpec{
		name: "gemma3", class: "Gemma3ForCausalLM", modelType: "gemma3_text",
		tiny: gemmaTiny, ownHeadDim: true, normPlusOne: true, qkNorm: true,
		layer: func(o *Options, p string, add func(string, []int, func() float64), normal, _, deep func() float64) {
			gemmaLayer(o, p, true, add, normal, deep)
		},
		config: func(o *Options, c map[string]any) {
			gemmaConfig(o, c)
			c["attn_logit_softcapping"] = nil
			c["final_logit_softcapping"] = nil
			c["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": 2.5}
			c["rope_local_base_freq"] = o.RopeTheta / 10
			c["use_bidirectional_attention"] = false
		},
	}
)

// gemmaTiny is Tiny's shape of a Gemma.
func gemmaTiny(o *Options) {
	o.HeadDim, o.Tied, o.SlidingWindow, o.QueryPreAttnScalar = 32, true, 8, 24
}

// gemmaConfig adds Gemma 2/3's common fields to config.json: GELU-tanh, query_pre_attn_scalar
// different from head_dim, alternating sliding and global layers (layer_types), a short
// window; each adds, so that tests see them act on small random logits, small soft-caps
// (Gemma 2) or a linear RoPE scaling with a separate local base (Gemma 3).
func gemmaConfig(o *Options, c map[string]any) {
	delete(c, "hidden_act")
	c["hidden_activation"] = "gelu_pytorch_tanh"
	c["attention_bias"] = false
	c["query_pre_attn_scalar"] = o.QueryPreAttnScalar
	c["sliding_window"] = o.SlidingWindow
	types := make([]string, o.Layers)
	for i := range types {
		types[i] = "sliding_attention"
		if i%2 == 1 {
			types[i] = "full_attention"
		}
	}
	c["layer_types"] = types
	c["pad_token_id"] = c["bos_token_id"]
}

// gemmaNorm draws Gemma's norm weights, which scale by 1 + weight: near zero.
func gemmaNorm(rng *rand.Rand) func() float64 {
	return func() float64 { return 0.1 * rng.NormFloat64() }
}

// gemmaLayer adds one Gemma layer's tensors with prefix p (with q/k norms where qkNorm: Gemma
// 3).
func gemmaLayer(o *Options, p string, qkNorm bool, add func(string, []int, func() float64), normal, deep func() float64) {
	qd, kv := o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
	add(p+"input_layernorm.weight", []int{o.Hidden}, normal10(normal, o.Std))
	add(p+"self_attn.q_proj.weight", []int{qd, o.Hidden}, normal)
	add(p+"self_attn.k_proj.weight", []int{kv, o.Hidden}, normal)
	add(p+"self_attn.v_proj.weight", []int{kv, o.Hidden}, normal)
	if qkNorm {
		add(p+"self_attn.q_norm.weight", []int{o.HeadDim}, normal10(normal, o.Std))
		add(p+"self_attn.k_norm.weight", []int{o.HeadDim}, normal10(normal, o.Std))
	}
	add(p+"self_attn.o_proj.weight", []int{o.Hidden, qd}, deep)
	add(p+"post_attention_layernorm.weight", []int{o.Hidden}, normal10(normal, o.Std))
	add(p+"pre_feedforward_layernorm.weight", []int{o.Hidden}, normal10(normal, o.Std))
	add(p+"mlp.gate_proj.weight", []int{o.Intermediate, o.Hidden}, normal)
	add(p+"mlp.up_proj.weight", []int{o.Intermediate, o.Hidden}, normal)
	add(p+"mlp.down_proj.weight", []int{o.Hidden, o.Intermediate}, deep)
	add(p+"post_feedforward_layernorm.weight", []int{o.Hidden}, normal10(normal, o.Std))
}

// normal10 rescales normal (standard deviation std) to standard deviation 0.1.
func normal10(normal func() float64, std float64) func() float64 {
	return func() float64 { return normal() / std * 0.1 }
}

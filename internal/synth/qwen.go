package synth

// qwen2Arch is Qwen2 (Qwen2ForCausalLM): q/k/v biases, its sliding-window fields off.
var qwen2Arch = archSpec{
	name: "qwen2", class: "Qwen2ForCausalLM", modelType: "qwen2",
	qkvBias: true,
	config: func(o *Options, c map[string]any) {
		c["use_sliding_window"] = false
		c["sliding_window"] = o.MaxPos
		c["max_window_layers"] = o.Layers
		c["rope_scaling"] = nil
	},
}

// qwen3Arch is Qwen3 (Qwen3ForCausalLM): per-head q/k norms and a head_dim of its own (32 in
// Tiny: Qwen3 sets it independently of hidden/heads).
var qwen3Arch = archSpec{
	name: "qwen3", class: "Qwen3ForCausalLM", modelType: "qwen3",
	tiny:       func(o *Options) { o.HeadDim = 32 },
	ownHeadDim: true,
	qkNorm:     true,
	config: func(o *Options, c map[string]any) {
		c["attention_bias"] = false
		c["use_sliding_window"] = false
		c["sliding_window"] = nil
		c["max_window_layers"] = o.Layers
		c["rope_scaling"] = nil
	},
}

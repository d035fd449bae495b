package synth

// llamaArch is Llama (LlamaForCausalLM): no biases, and with RopeScaling "llama3" Llama 3.1's
// rope_scaling block.
var llamaArch = archSpec{
	name: "llama", class: "LlamaForCausalLM", modelType: "llama",
	llama3Rope: true,
	config: func(o *Options, c map[string]any) {
		c["attention_bias"] = false
		c["mlp_bias"] = false
		c["pretraining_tp"] = 1
		if o.RopeScaling == "llama3" {
			c["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
				"high_freq_factor": 4.0, "original_max_position_embeddings": min(o.MaxPos, 64)}
		} else {
			c["rope_scaling"] = nil
		}
	},
}

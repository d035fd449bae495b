package synth

// mistralArch is Mistral (MistralForCausalLM): every layer attends to the SlidingWindow
// latest positions; no biases, no rope_scaling (MistralConfig has neither attention_bias nor
// mlp_bias). An explicit head_dim other than hidden/heads (as Mistral NeMo and Ministral
// have) and a window of 8 in Tiny.
var mistralArch = archSpec{
	name: "mistral", class: "MistralForCausalLM", modelType: "mistral",
	tiny:       mistralTiny,
	ownHeadDim: true,
	config: func(o *Options, c map[string]any) {
		c["sliding_window"] = o.SlidingWindow
		c["rope_scaling"] = nil
	},
}

// ministralArch is Ministral (MinistralForCausalLM): Mistral's block with per-layer attention
// types; here sliding and full alternate, sliding first.
var ministralArch = archSpec{
	name: "ministral", class: "MinistralForCausalLM", modelType: "ministral",
	tiny:       mistralTiny,
	ownHeadDim: true,
	config: func(o *Options, c map[string]any) {
		c["sliding_window"] = o.SlidingWindow
		c["rope_scaling"] = nil
		types := make([]string, o.Layers)
		for i := range types {
			types[i] = []string{"sliding_attention", "full_attention"}[i%2]
		}
		c["layer_types"] = types
	},
}

// mistralTiny is Tiny's head_dim and window of (mi)mistral.
func mistralTiny(o *Options) { o.HeadDim, o.SlidingWindow = 32, 8 }

package model

import (
	"strings"
	"testing"
)

// mistralConfig is Mistral-7B-v0.1's config.json with the fields the test varies left out.
func mistralConfig(extra string) []byte {
	return []byte(`{"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
  "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 4, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "vocab_size": 32000,
  "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2` + extra + `}`)
}

// TestParseConfigMistral: sliding_window applies to every layer when it is set and shorter
// than the context (absent: MistralConfig's 4096), null or a window at least
// max_position_embeddings long is full attention, head_dim is read when given, and layer_types
// that mark full-attention layers under a window are refused by name.
func TestParseConfigMistral(t *testing.T) {
	c, err := ParseConfig(mistralConfig(`, "max_position_embeddings": 32768, "sliding_window": 4096`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Arch != "mistral" || c.SlidingWindow != 4096 || c.Sliding != nil || c.HeadDim != 128 || c.AttentionBias || c.MLPBias {
		t.Fatalf("config %+v", c)
	}
	for l := range c.NumLayers {
		if !c.IsSliding(l) {
			t.Fatalf("layer %d not windowed", l)
		}
	}
	// Absent: MistralConfig's defaults (window 4096, 131072 positions).
	if c, err = ParseConfig(mistralConfig(``)); err != nil || c.SlidingWindow != 4096 || c.MaxPositionEmbeddings != 131072 {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	// Null (Mistral-7B-v0.2 and later): full attention.
	if c, err = ParseConfig(mistralConfig(`, "max_position_embeddings": 32768, "sliding_window": null`)); err != nil || c.SlidingWindow != 0 || c.IsSliding(0) {
		t.Fatalf("null window: %+v, %v", c, err)
	}
	// A window covering the whole context cannot bind.
	if c, err = ParseConfig(mistralConfig(`, "max_position_embeddings": 4096, "sliding_window": 4096`)); err != nil || c.SlidingWindow != 0 {
		t.Fatalf("window = context: %+v, %v", c, err)
	}
	// Mistral NeMo's explicit head_dim (128 with hidden 5120 and 32 heads); model_type alone.
	nemo := strings.Replace(string(mistralConfig(`, "head_dim": 128, "sliding_window": null`)), `"architectures": ["MistralForCausalLM"], `, ``, 1)
	nemo = strings.Replace(nemo, `"hidden_size": 4096`, `"hidden_size": 5120`, 1)
	if c, err = ParseConfig([]byte(nemo)); err != nil || c.Arch != "mistral" || c.HeadDim != 128 || c.QDim() != 4096 {
		t.Fatalf("nemo: %+v, %v", c, err)
	}
	for _, tc := range []struct{ extra, want string }{
		{`, "sliding_window": 0`, "sliding_window"},
		{`, "sliding_window": "x"`, "sliding_window"},
		{`, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]`, "layer_types[1]"},
		{`, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}`, "yarn"},
		{`, "hidden_act": "gelu"`, "hidden_act"},
		{`, "quantization_config": {"quant_method": "fp8"}`, "quantization_config"},
	} {
		cfg := strings.Replace(string(mistralConfig(tc.extra)), `"hidden_act": "silu", `, ``, strings.Count(tc.extra, "hidden_act"))
		if _, err := ParseConfig([]byte(cfg)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one naming %q", tc.extra, err, tc.want)
		}
	}
	// Every layer sliding_attention is what the window does anyway.
	if c, err = ParseConfig(mistralConfig(`, "sliding_window": 8, "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention"]`)); err != nil || c.SlidingWindow != 8 {
		t.Fatalf("all sliding: %+v, %v", c, err)
	}
}

// TestParseConfigMinistral: MinistralForCausalLM (or model_type ministral) reads layer_types:
// its sliding layers are windowed and its full ones not; without layer_types every layer is
// windowed (MinistralConfig's default under a window); a sliding layer without a window is
// refused by name.
func TestParseConfigMinistral(t *testing.T) {
	ministral := func(extra string) []byte {
		s := strings.Replace(string(mistralConfig(`, "max_position_embeddings": 32768`+extra)), `"MistralForCausalLM"`, `"MinistralForCausalLM"`, 1)
		return []byte(strings.Replace(s, `"model_type": "mistral"`, `"model_type": "ministral"`, 1))
	}
	types := `, "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]`
	c, err := ParseConfig(ministral(`, "sliding_window": 8` + types))
	if err != nil {
		t.Fatal(err)
	}
	if c.Arch != "mistral" || c.SlidingWindow != 8 || !c.IsSliding(0) || c.IsSliding(1) || !c.IsSliding(2) || c.IsSliding(3) {
		t.Fatalf("alternating: %+v", c)
	}
	// model_type alone.
	noArch := strings.Replace(string(ministral(`, "sliding_window": 8`+types)), `"architectures": ["MinistralForCausalLM"], `, ``, 1)
	if c, err = ParseConfig([]byte(noArch)); err != nil || !c.IsSliding(0) || c.IsSliding(1) {
		t.Fatalf("model_type ministral: %+v, %v", c, err)
	}
	if c, err = ParseConfig(ministral(`, "sliding_window": 8`)); err != nil || c.Sliding != nil || !c.IsSliding(3) {
		t.Fatalf("no layer_types: %+v, %v", c, err)
	}
	if c, err = ParseConfig(ministral(`, "sliding_window": null, "layer_types": ["full_attention", "full_attention", "full_attention", "full_attention"]`)); err != nil || c.SlidingWindow != 0 {
		t.Fatalf("null window: %+v, %v", c, err)
	}
	if _, err = ParseConfig(ministral(`, "sliding_window": null` + types)); err == nil || !strings.Contains(err.Error(), "sliding_window is null") {
		t.Fatalf("sliding layers without a window: %v", err)
	}
}

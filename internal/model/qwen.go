package model

import (
	"encoding/json"
	"fmt"

	"github.com/honeai/hone/internal/gguf"
)

// Qwen2 and Qwen2.5 (Qwen2ForCausalLM): Llama's block with q, k and v biases always (whatever
// attention_bias says) and none on o_proj.
var qwen2Family = Family{
	Arch:            "qwen2",
	HFArchitectures: []string{"Qwen2ForCausalLM"},
	HFModelTypes:    []string{"qwen2"},
	GGUFArch:        "qwen2",
	NoOutputBias:    true,
	ChatTemplate:    "chatml",
	parseHF: func(h *hfConfig, cfg *Config) error {
		cfg.AttentionBias = true
		return parseQwen(h, cfg, decoderDefaults{rmsNormEps: 1e-6, maxPositions: 32768})
	},
	fromGGUF: func(g *ggufConfig, c *Config) error {
		c.AttentionBias = true
		return nil
	},
	ggufMetadata: func(c *Config) ([]gguf.KV, []GGUFVector, error) { return ggufDecoderMetadata(c, "qwen2") },
}

// Qwen3 (Qwen3ForCausalLM): Llama's block with per-head RMSNorms of queries and keys before
// RoPE, attention biases as attention_bias says (q, k, v and o), a head_dim of its own
// (default 128).
var qwen3Family = Family{
	Arch:            "qwen3",
	HFArchitectures: []string{"Qwen3ForCausalLM"},
	HFModelTypes:    []string{"qwen3"},
	GGUFArch:        "qwen3",
	ChatTemplate:    "qwen3",
	parseHF: func(h *hfConfig, cfg *Config) error {
		cfg.AttentionBias, cfg.QKNorm = h.AttentionBias, true
		return parseQwen(h, cfg, decoderDefaults{headDim: 128, rmsNormEps: 1e-6, maxPositions: 32768})
	},
	fromGGUF:     qwen3FromGGUF,
	ggufMetadata: func(c *Config) ([]gguf.KV, []GGUFVector, error) { return ggufDecoderMetadata(c, "qwen3") },
}

// qwen3FromGGUF reads a qwen3 (or qwen3moe) GGUF's biases (from its tensors) and q/k norms.
func qwen3FromGGUF(g *ggufConfig, c *Config) error {
	c.AttentionBias, c.QKNorm = g.hasBias || g.hasOBias, true
	return nil
}

// parseQwen reads a Qwen config.json's common part, its sliding window (refused where it
// binds) and its RoPE.
func parseQwen(h *hfConfig, cfg *Config, d decoderDefaults) error {
	layerTypes, err := h.parseDecoder(cfg, d)
	if err != nil {
		return err
	}
	if err := checkSlidingWindow(h.raw, layerTypes, cfg); err != nil {
		return err
	}
	return parseRope(h.raw, layerTypes, cfg)
}

// checkSlidingWindow refuses sliding-window attention that could change a result. Qwen2 and
// Qwen3 use a window only when use_sliding_window is true, on the layers layer_types marks
// "sliding_attention" (by default those from max_window_layers on); a window at least
// max_position_embeddings long never excludes a position Hone accepts, so it is allowed.
func checkSlidingWindow(raw map[string]json.RawMessage, layerTypes []string, cfg *Config) error {
	var use bool
	if v, ok := raw["use_sliding_window"]; ok && !isNullJSON(v) {
		if err := json.Unmarshal(v, &use); err != nil {
			return fmt.Errorf("model: config.json: use_sliding_window must be a boolean")
		}
	}
	if !use {
		return nil
	}
	window := 4096 // Qwen2Config's and Qwen3Config's default
	if v, ok := raw["sliding_window"]; ok {
		if isNullJSON(v) {
			return nil
		}
		if err := json.Unmarshal(v, &window); err != nil {
			return fmt.Errorf("model: config.json: sliding_window must be an integer")
		}
	}
	if window >= cfg.MaxPositionEmbeddings {
		return nil
	}
	maxWindowLayers := 28
	if v, ok := raw["max_window_layers"]; ok && !isNullJSON(v) {
		if err := json.Unmarshal(v, &maxWindowLayers); err != nil {
			return fmt.Errorf("model: config.json: max_window_layers must be an integer")
		}
	}
	for i := 0; i < cfg.NumLayers; i++ {
		sliding := i >= maxWindowLayers
		if layerTypes != nil {
			sliding = layerTypes[i] == "sliding_attention"
		}
		if sliding {
			return fmt.Errorf("model: config.json: sliding_window %d (use_sliding_window is true, layer %d) is not supported: Hone attends to every earlier position", window, i)
		}
	}
	return nil
}

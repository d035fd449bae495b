package model

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/tokenizer"
)

// Mistral (MistralForCausalLM) and Ministral (MinistralForCausalLM): Llama's block without
// biases, a head_dim of its own, and a sliding window (every layer for Mistral, the layers
// layer_types marks for Ministral: Gemma's mechanism, Config.Sliding). llama.cpp's converter
// writes Mistral as llama, which has no window, so Hone reads no mistral GGUF and exports one
// only without a window that binds.
var mistralFamily = Family{
	Arch:            "mistral",
	HFArchitectures: []string{"MistralForCausalLM", "MinistralForCausalLM"},
	HFModelTypes:    []string{"mistral", "ministral"},
	PermutedQK:      true,
	GGUFVocab:       tokenizer.GGUFVocabRules{NoBOSFor49152: true}, // as llama (LlamaModel)
	parseHF: func(h *hfConfig, cfg *Config) error {
		layerTypes, err := h.parseDecoder(cfg, decoderDefaults{rmsNormEps: 1e-6, maxPositions: 131072})
		if err != nil {
			return err
		}
		ministral := h.ModelType == "ministral" || slices.Contains(h.Architectures, "MinistralForCausalLM")
		if err := parseMistralWindow(h.raw, layerTypes, ministral, cfg); err != nil {
			return err
		}
		return parseRope(h.raw, layerTypes, cfg)
	},
	ggufMetadata: func(c *Config) ([]gguf.KV, []GGUFVector, error) {
		// llama.cpp's converter writes MistralForCausalLM as llama, which has no sliding
		// window: a window that binds has no GGUF form.
		if c.SlidingWindow > 0 {
			return nil, nil, fmt.Errorf("model: Mistral's sliding_window %d has no GGUF form: llama.cpp reads Mistral as llama, which attends to every earlier position", c.SlidingWindow)
		}
		return ggufDecoderMetadata(c, "llama")
	},
}

// parseMistralWindow reads Mistral's sliding_window: every layer attends to the sliding_window
// latest positions (its own included), as transformers' MistralModel masks them; null means
// full attention, and an absent field MistralConfig's default 4096. A window at least
// max_position_embeddings long never excludes a position Hone accepts, so it is dropped.
// MistralModel ignores layer_types (transformers warns and windows every layer); a
// MistralForCausalLM config whose layer_types mark some layers full_attention is refused
// rather than computed differently from what it says. Ministral (ministral, or
// MinistralForCausalLM) reads layer_types, by default every layer sliding when there is a
// window: its sliding layers are Gemma's mechanism (Config.Sliding).
func parseMistralWindow(raw map[string]json.RawMessage, layerTypes []string, ministral bool, cfg *Config) error {
	window := 4096
	if v, ok := raw["sliding_window"]; ok {
		if isNullJSON(v) {
			window = 0
		} else if err := json.Unmarshal(v, &window); err != nil || window <= 0 {
			return fmt.Errorf("model: config.json: sliding_window must be a positive integer or null")
		}
	}
	if ministral && layerTypes != nil {
		if window == 0 && slices.Contains(layerTypes, "sliding_attention") {
			return fmt.Errorf("model: config.json: layer_types has sliding_attention layers but sliding_window is null")
		}
		if window == 0 || window >= cfg.MaxPositionEmbeddings || !slices.Contains(layerTypes, "full_attention") {
			layerTypes = nil // every layer the same: Mistral's rule below
		}
	}
	if window == 0 || window >= cfg.MaxPositionEmbeddings {
		return nil
	}
	if ministral && layerTypes != nil {
		cfg.SlidingWindow = window
		cfg.Sliding = make([]bool, len(layerTypes))
		for i, t := range layerTypes {
			cfg.Sliding[i] = t == "sliding_attention"
		}
		return nil
	}
	for i, t := range layerTypes {
		if t != "sliding_attention" {
			return fmt.Errorf("model: config.json: layer_types[%d] is %q with sliding_window %d: MistralForCausalLM windows every layer; alternating full and sliding layers are not supported", i, t, window)
		}
	}
	cfg.SlidingWindow = window
	return nil
}

package model

import (
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/tokenizer"
)

// Llama (LlamaForCausalLM: Llama 2 and 3.x, SmolLM2, and any model of Llama's block): the
// block every other family varies (Family's zero value). Biases as config.json's
// attention_bias (q, k, v and o) and mlp_bias say; RoPE default, linear or llama3
// (config.go's parseRope). llama.cpp's GGUF files name it llama, with q and k rows permuted
// and llama3 scaling as a rope_freqs tensor.
var llamaFamily = Family{
	Arch:            "llama",
	HFArchitectures: []string{"LlamaForCausalLM"},
	HFModelTypes:    []string{"llama"},
	GGUFArch:        "llama",
	PermutedQK:      true,
	// LlamaModel.set_vocab turns add_bos_token off for a vocabulary of 49152 (Granite's small
	// models; SmolLM2's size too).
	GGUFVocab: tokenizer.GGUFVocabRules{NoBOSFor49152: true},
	parseHF: func(h *hfConfig, cfg *Config) error {
		cfg.AttentionBias, cfg.MLPBias = h.AttentionBias, h.MLPBias
		layerTypes, err := h.parseDecoder(cfg, decoderDefaults{rmsNormEps: 1e-6, maxPositions: 2048})
		if err != nil {
			return err
		}
		return parseRope(h.raw, layerTypes, cfg)
	},
	fromGGUF: func(g *ggufConfig, c *Config) error {
		c.AttentionBias, c.MLPBias = g.hasBias, g.hasMLPBias
		return nil
	},
	ggufMetadata: func(c *Config) ([]gguf.KV, []GGUFVector, error) { return ggufDecoderMetadata(c, "llama") },
}

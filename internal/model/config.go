package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Config is a model's architecture, read from Hugging Face's config.json.
type Config struct {
	// Arch is "llama", "qwen2" or "qwen3".
	Arch                  string
	HiddenSize            int
	IntermediateSize      int
	NumLayers             int
	NumHeads              int
	NumKVHeads            int
	HeadDim               int
	VocabSize             int
	RMSNormEps            float64
	RopeTheta             float64
	RopeScaling           *RopeScaling
	MaxPositionEmbeddings int
	TieWordEmbeddings     bool
	// AttentionBias: q/k/v (and o for Llama) carry biases. Qwen2 always has q/k/v biases.
	AttentionBias bool
	MLPBias       bool
	// QKNorm: per-head RMSNorm of queries and keys before RoPE (Qwen3).
	QKNorm     bool
	TorchDType string
	BOSTokenID []int
	EOSTokenID []int
	// Generation holds generation_config.json defaults (zero when absent).
	Generation GenerationConfig
}

// RopeScaling is config.json's rope_scaling.
type RopeScaling struct {
	Type                          string  `json:"rope_type"`
	LegacyType                    string  `json:"type"`
	Factor                        float64 `json:"factor"`
	LowFreqFactor                 float64 `json:"low_freq_factor"`
	HighFreqFactor                float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
}

// Kind returns the scaling type (rope_type, or the legacy type field).
func (r *RopeScaling) Kind() string {
	if r.Type != "" {
		return r.Type
	}
	return r.LegacyType
}

// GenerationConfig holds the defaults of generation_config.json that serving uses.
type GenerationConfig struct {
	EOSTokenID        []int
	BOSTokenID        []int
	Temperature       *float64
	TopP              *float64
	TopK              *int
	MinP              *float64
	RepetitionPenalty *float64
	MaxNewTokens      *int
	DoSample          *bool
}

// supported maps HF architecture names to Hone's.
var supported = map[string]string{
	"LlamaForCausalLM": "llama",
	"Qwen2ForCausalLM": "qwen2",
	"Qwen3ForCausalLM": "qwen3",
}

// ErrUnsupported is returned for architectures Hone cannot run.
var ErrUnsupported = errors.New("model: unsupported architecture")

// intOrList reads a token id field that may be an int or a list of ints.
func intOrList(raw json.RawMessage) []int {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var one int
	if json.Unmarshal(raw, &one) == nil {
		return []int{one}
	}
	var many []int
	if json.Unmarshal(raw, &many) == nil {
		return many
	}
	return nil
}

// ParseConfig reads config.json contents.
func ParseConfig(data []byte) (*Config, error) {
	var c struct {
		Architectures         []string        `json:"architectures"`
		ModelType             string          `json:"model_type"`
		HiddenSize            int             `json:"hidden_size"`
		IntermediateSize      int             `json:"intermediate_size"`
		NumHiddenLayers       int             `json:"num_hidden_layers"`
		NumAttentionHeads     int             `json:"num_attention_heads"`
		NumKeyValueHeads      int             `json:"num_key_value_heads"`
		HeadDim               int             `json:"head_dim"`
		VocabSize             int             `json:"vocab_size"`
		RMSNormEps            float64         `json:"rms_norm_eps"`
		RopeTheta             float64         `json:"rope_theta"`
		RopeScaling           *RopeScaling    `json:"rope_scaling"`
		MaxPositionEmbeddings int             `json:"max_position_embeddings"`
		TieWordEmbeddings     bool            `json:"tie_word_embeddings"`
		AttentionBias         bool            `json:"attention_bias"`
		MLPBias               bool            `json:"mlp_bias"`
		HiddenAct             string          `json:"hidden_act"`
		TorchDType            string          `json:"torch_dtype"`
		BOSTokenID            json.RawMessage `json:"bos_token_id"`
		EOSTokenID            json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("model: config.json: %w", err)
	}
	arch := ""
	for _, a := range c.Architectures {
		if v, ok := supported[a]; ok {
			arch = v
			break
		}
	}
	if arch == "" {
		name := strings.Join(c.Architectures, ", ")
		if name == "" {
			name = c.ModelType
		}
		if name == "" {
			name = "(none given)"
		}
		return nil, fmt.Errorf("%w %s: Hone runs LlamaForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM", ErrUnsupported, name)
	}
	cfg := &Config{
		Arch: arch, HiddenSize: c.HiddenSize, IntermediateSize: c.IntermediateSize, NumLayers: c.NumHiddenLayers,
		NumHeads: c.NumAttentionHeads, NumKVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, VocabSize: c.VocabSize,
		RMSNormEps: c.RMSNormEps, RopeTheta: c.RopeTheta, RopeScaling: c.RopeScaling,
		MaxPositionEmbeddings: c.MaxPositionEmbeddings, TieWordEmbeddings: c.TieWordEmbeddings,
		AttentionBias: c.AttentionBias || arch == "qwen2", MLPBias: c.MLPBias, QKNorm: arch == "qwen3",
		TorchDType: c.TorchDType, BOSTokenID: intOrList(c.BOSTokenID), EOSTokenID: intOrList(c.EOSTokenID),
	}
	if c.HiddenAct != "" && c.HiddenAct != "silu" {
		return nil, fmt.Errorf("model: hidden_act %q is not supported (silu only)", c.HiddenAct)
	}
	if cfg.NumKVHeads == 0 {
		cfg.NumKVHeads = cfg.NumHeads
	}
	if cfg.HeadDim == 0 && cfg.NumHeads > 0 {
		cfg.HeadDim = cfg.HiddenSize / cfg.NumHeads
	}
	if cfg.RMSNormEps == 0 {
		cfg.RMSNormEps = 1e-6
	}
	if cfg.RopeTheta == 0 {
		cfg.RopeTheta = 10000
	}
	if cfg.MaxPositionEmbeddings == 0 {
		cfg.MaxPositionEmbeddings = 2048
	}
	return cfg, cfg.validate()
}

func (c *Config) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize}, {"num_hidden_layers", c.NumLayers},
		{"num_attention_heads", c.NumHeads}, {"vocab_size", c.VocabSize}, {"head_dim", c.HeadDim}} {
		if f.v <= 0 {
			return fmt.Errorf("model: config.json: %s must be positive, got %d", f.name, f.v)
		}
	}
	if c.NumKVHeads <= 0 || c.NumHeads%c.NumKVHeads != 0 {
		return fmt.Errorf("model: config.json: num_attention_heads (%d) must be a multiple of num_key_value_heads (%d)", c.NumHeads, c.NumKVHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("model: config.json: head_dim %d must be even for rotary embeddings", c.HeadDim)
	}
	if c.RopeScaling != nil {
		switch c.RopeScaling.Kind() {
		case "llama3":
			r := c.RopeScaling
			if r.Factor <= 0 || r.LowFreqFactor <= 0 || r.HighFreqFactor <= r.LowFreqFactor || r.OriginalMaxPositionEmbeddings <= 0 {
				return fmt.Errorf("model: config.json: rope_scaling llama3 needs factor, low_freq_factor < high_freq_factor and original_max_position_embeddings")
			}
		case "linear":
			if c.RopeScaling.Factor <= 0 {
				return fmt.Errorf("model: config.json: rope_scaling linear needs a positive factor")
			}
		case "default", "":
		default:
			return fmt.Errorf("model: config.json: rope_scaling type %q is not supported (llama3, linear)", c.RopeScaling.Kind())
		}
	}
	if math.IsNaN(c.RMSNormEps) || c.RMSNormEps <= 0 {
		return fmt.Errorf("model: config.json: rms_norm_eps must be positive")
	}
	return nil
}

// LoadConfig reads dir/config.json and, when present, dir/generation_config.json.
func LoadConfig(dir string) (*Config, error) {
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, err
	}
	if g, err := os.ReadFile(filepath.Join(dir, "generation_config.json")); err == nil {
		if cfg.Generation, err = ParseGenerationConfig(g); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// ParseGenerationConfig reads generation_config.json contents.
func ParseGenerationConfig(data []byte) (GenerationConfig, error) {
	var g struct {
		BOSTokenID        json.RawMessage `json:"bos_token_id"`
		EOSTokenID        json.RawMessage `json:"eos_token_id"`
		Temperature       *float64        `json:"temperature"`
		TopP              *float64        `json:"top_p"`
		TopK              *int            `json:"top_k"`
		MinP              *float64        `json:"min_p"`
		RepetitionPenalty *float64        `json:"repetition_penalty"`
		MaxNewTokens      *int            `json:"max_new_tokens"`
		DoSample          *bool           `json:"do_sample"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		return GenerationConfig{}, fmt.Errorf("model: generation_config.json: %w", err)
	}
	return GenerationConfig{EOSTokenID: intOrList(g.EOSTokenID), BOSTokenID: intOrList(g.BOSTokenID),
		Temperature: g.Temperature, TopP: g.TopP, TopK: g.TopK, MinP: g.MinP,
		RepetitionPenalty: g.RepetitionPenalty, MaxNewTokens: g.MaxNewTokens, DoSample: g.DoSample}, nil
}

// EOSIDs returns every end-of-sequence id: generation_config's, then config's.
func (c *Config) EOSIDs() []int {
	seen := map[int]bool{}
	var out []int
	for _, l := range [][]int{c.Generation.EOSTokenID, c.EOSTokenID} {
		for _, id := range l {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}

// QDim is the width of the query projection (heads × head_dim).
func (c *Config) QDim() int { return c.NumHeads * c.HeadDim }

// KVDim is the width of each of the key and value projections.
func (c *Config) KVDim() int { return c.NumKVHeads * c.HeadDim }

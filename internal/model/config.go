package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// Config is a model's architecture, read from Hugging Face's config.json.
type Config struct {
	// Arch is "llama", "qwen2", "qwen3", "qwen3moe", "phi3", "mistral", "gemma2" or "gemma3".
	Arch             string
	HiddenSize       int
	IntermediateSize int
	NumLayers        int
	NumHeads         int
	NumKVHeads       int
	HeadDim          int
	VocabSize        int
	RMSNormEps       float64
	RopeTheta        float64
	RopeScaling      *RopeScaling
	// RopeFreqFactors, when set, divide the rotary frequencies one by one (HeadDim/2 values):
	// a GGUF's rope_freqs.weight, llama.cpp's form of Llama 3.1's rope_scaling. A config.json
	// never sets it (its llama3 rope_scaling computes the same factors when the model loads).
	RopeFreqFactors       []float64
	MaxPositionEmbeddings int
	TieWordEmbeddings     bool
	// AttentionBias: q/k/v (and o for Llama) carry biases. Qwen2 always has q/k/v biases.
	AttentionBias bool
	MLPBias       bool
	// QKNorm: per-head RMSNorm of queries and keys before RoPE (Qwen3).
	QKNorm bool
	// RotaryDim is how many leading dimensions of each head RoPE rotates (partial_rotary_factor;
	// Phi-4-mini rotates 3/4); 0 means the whole head.
	RotaryDim  int
	TorchDType string
	BOSTokenID []int
	EOSTokenID []int
	// Generation holds generation_config.json defaults (zero when absent).
	Generation GenerationConfig
	// BlockExtras: Gemma 2/3's additions to the block (gemma.go).
	BlockExtras

	// MoE: routed experts (Qwen3-MoE; moe.go), nil for dense models.
	MoE *MoEConfig
}

// RopeScaling is config.json's rope_scaling.
type RopeScaling struct {
	Type                          string  `json:"rope_type"`
	LegacyType                    string  `json:"type"`
	Factor                        float64 `json:"factor"`
	LowFreqFactor                 float64 `json:"low_freq_factor"`
	HighFreqFactor                float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
	// LongRoPE (Phi-3): per-frequency divisors for sequences up to and past
	// OriginalMaxPositionEmbeddings, and the factor cos and sin are multiplied by.
	ShortFactor, LongFactor []float64 `json:"-"`
	AttentionFactor         float64   `json:"-"`
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

// hfConfig is a config.json as ParseConfig reads it: the fields of transformers' config
// classes that every family's parseHF may read, and the whole object (raw) for the rest.
type hfConfig struct {
	Architectures         []string        `json:"architectures"`
	ModelType             string          `json:"model_type"`
	HiddenSize            int             `json:"hidden_size"`
	IntermediateSize      int             `json:"intermediate_size"`
	NumHiddenLayers       int             `json:"num_hidden_layers"`
	NumAttentionHeads     int             `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	HeadDim               *int            `json:"head_dim"`
	VocabSize             int             `json:"vocab_size"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	MaxPositionEmbeddings *int            `json:"max_position_embeddings"`
	TieWordEmbeddings     bool            `json:"tie_word_embeddings"`
	AttentionBias         bool            `json:"attention_bias"`
	MLPBias               bool            `json:"mlp_bias"`
	HiddenAct             *string         `json:"hidden_act"`
	TorchDType            string          `json:"torch_dtype"`
	DType                 string          `json:"dtype"`
	BOSTokenID            json.RawMessage `json:"bos_token_id"`
	EOSTokenID            json.RawMessage `json:"eos_token_id"`

	raw map[string]json.RawMessage
}

// ParseConfig reads config.json contents: the family (Family) its architectures (or, without
// them, its model_type) name, the fields every family has, and the family's own (its
// parseHF).
//
// For Llama, Qwen2 and Qwen3 it reads what transformers' code reads, in both layouts:
// transformers 4's `rope_theta` and `rope_scaling`, and transformers 5's `rope_parameters`
// (one dictionary, or one per layer type), with transformers 5's precedence (a `rope_scaling`
// dictionary wins over `rope_parameters`; the dictionary's `rope_theta` wins over a top-level
// one). A field that would change the computation and that Hone does not implement (a RoPE
// type other than default, linear and llama3, a partial rotary factor, sliding-window
// attention that can bind, an activation other than SiLU, quantized weights) is refused with
// an error that names it.
func ParseConfig(data []byte) (*Config, error) {
	var c hfConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("model: config.json: %w", err)
	}
	if err := json.Unmarshal(data, &c.raw); err != nil {
		return nil, fmt.Errorf("model: config.json: %w", err)
	}
	fam := familyForHF(c.Architectures, c.ModelType)
	if fam == nil {
		return nil, unsupportedHF(c.Architectures, c.ModelType)
	}
	cfg := &Config{
		Arch: fam.Arch, HiddenSize: c.HiddenSize, IntermediateSize: c.IntermediateSize, NumLayers: c.NumHiddenLayers,
		NumHeads: c.NumAttentionHeads, VocabSize: c.VocabSize, TieWordEmbeddings: c.TieWordEmbeddings,
		TorchDType: c.TorchDType, BOSTokenID: intOrList(c.BOSTokenID), EOSTokenID: intOrList(c.EOSTokenID),
	}
	if cfg.TorchDType == "" {
		cfg.TorchDType = c.DType // transformers 5 writes dtype
	}
	if err := fam.parseHF(&c, cfg); err != nil {
		return nil, err
	}
	return cfg, cfg.validate()
}

// decoderDefaults are a Llama-style config class's defaults that differ between families.
type decoderDefaults struct {
	headDim      int     // head_dim when absent (0: hidden_size / num_attention_heads)
	rmsNormEps   float64 // rms_norm_eps when absent
	maxPositions int     // max_position_embeddings when absent
}

// parseDecoder reads what the Llama-style config classes (Llama, Qwen2, Qwen3, Qwen3-MoE,
// Mistral, Phi-3) share, with the family's defaults where a field is absent, and returns
// layer_types (nil when absent). Biases, sliding windows and RoPE are the family's own.
func (c *hfConfig) parseDecoder(cfg *Config, d decoderDefaults) ([]string, error) {
	if c.HiddenAct != nil && *c.HiddenAct != "silu" && *c.HiddenAct != "swish" {
		return nil, fmt.Errorf("model: config.json: hidden_act %q is not supported (silu only)", *c.HiddenAct)
	}
	if q, ok := c.raw["quantization_config"]; ok && !isNullJSON(q) {
		return nil, fmt.Errorf("model: config.json: quantization_config is set: Hone runs f32, bf16 and f16 weights, not quantized ones")
	}
	// Defaults are transformers' for each architecture.
	cfg.NumKVHeads = cfg.NumHeads
	if c.NumKeyValueHeads != nil {
		cfg.NumKVHeads = *c.NumKeyValueHeads
	}
	switch {
	case c.HeadDim != nil && *c.HeadDim != 0:
		cfg.HeadDim = *c.HeadDim
	case d.headDim != 0:
		cfg.HeadDim = d.headDim
	case cfg.NumHeads > 0:
		cfg.HeadDim = cfg.HiddenSize / cfg.NumHeads
	}
	cfg.RMSNormEps = d.rmsNormEps
	if c.RMSNormEps != nil {
		cfg.RMSNormEps = *c.RMSNormEps
	}
	cfg.MaxPositionEmbeddings = d.maxPositions
	if c.MaxPositionEmbeddings != nil {
		cfg.MaxPositionEmbeddings = *c.MaxPositionEmbeddings
	}
	if cfg.MaxPositionEmbeddings <= 0 {
		return nil, fmt.Errorf("model: config.json: max_position_embeddings must be positive, got %d", cfg.MaxPositionEmbeddings)
	}
	return parseLayerTypes(c.raw, cfg.NumLayers)
}

func isNullJSON(raw json.RawMessage) bool {
	t := strings.TrimSpace(string(raw))
	return t == "" || t == "null"
}

// parseLayerTypes reads layer_types (transformers 5 and recent 4.x): one entry per layer,
// "full_attention" or "sliding_attention". It returns nil when the field is absent.
func parseLayerTypes(raw map[string]json.RawMessage, layers int) ([]string, error) {
	lt, ok := raw["layer_types"]
	if !ok || isNullJSON(lt) {
		return nil, nil
	}
	var types []string
	if err := json.Unmarshal(lt, &types); err != nil {
		return nil, fmt.Errorf("model: config.json: layer_types must be a list of strings: %w", err)
	}
	if len(types) != layers {
		return nil, fmt.Errorf("model: config.json: layer_types has %d entries for %d layers", len(types), layers)
	}
	for i, t := range types {
		if t != "full_attention" && t != "sliding_attention" {
			return nil, fmt.Errorf("model: config.json: layer_types[%d] %q is not supported (full_attention, sliding_attention)", i, t)
		}
	}
	return types, nil
}

// ropeParams is one RoPE parameter dictionary (rope_scaling or rope_parameters).
type ropeParams map[string]json.RawMessage

func (p ropeParams) float(key string) (float64, bool, error) {
	v, ok := p[key]
	if !ok || isNullJSON(v) {
		return 0, false, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return 0, false, fmt.Errorf("%s must be a number", key)
	}
	return f, true, nil
}

func (p ropeParams) str(key string) (string, error) {
	v, ok := p[key]
	if !ok || isNullJSON(v) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%s must be a string", key)
	}
	return s, nil
}

// parseRope sets RopeTheta and RopeScaling from rope_theta, rope_scaling, rope_parameters,
// partial_rotary_factor and original_max_position_embeddings, as transformers 5 standardises
// them (transformers 4 reads the same values from the older layout).
func parseRope(raw map[string]json.RawMessage, layerTypes []string, cfg *Config) error {
	field := "rope_scaling"
	dict := raw["rope_scaling"]
	var probe map[string]json.RawMessage
	if isNullJSON(dict) || (json.Unmarshal(dict, &probe) == nil && len(probe) == 0) {
		field, dict = "rope_parameters", raw["rope_parameters"]
	}
	var params ropeParams
	if !isNullJSON(dict) {
		if err := json.Unmarshal(dict, &params); err != nil {
			return fmt.Errorf("model: config.json: %s must be an object: %w", field, err)
		}
	}
	// transformers 5 keys rope_parameters by layer type when its keys are layer types.
	if len(params) > 0 && layerTypes != nil {
		nested := true
		for k := range params {
			if !slices.Contains(layerTypes, k) {
				nested = false
				break
			}
		}
		if nested {
			var first ropeParams
			var firstType string
			for _, lt := range layerTypes {
				sub, ok := params[lt]
				if !ok {
					return fmt.Errorf("model: config.json: %s has no entry for layer type %q", field, lt)
				}
				var p ropeParams
				if err := json.Unmarshal(sub, &p); err != nil {
					return fmt.Errorf("model: config.json: %s.%s must be an object: %w", field, lt, err)
				}
				if first == nil {
					first, firstType = p, lt
				} else if !sameParams(first, p) {
					return fmt.Errorf("model: config.json: %s differ between layer types %q and %q: Hone applies one RoPE to every layer", field, firstType, lt)
				}
			}
			params, field = first, field+"."+firstType
		}
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("model: config.json: "+format, a...)
	}
	// A dictionary inside the dictionary is per-layer-type parameters without the layer_types
	// that would select them: transformers would ignore them, so refuse rather than guess.
	for k, v := range params {
		if t := strings.TrimSpace(string(v)); strings.HasPrefix(t, "{") {
			return bad("%s.%s is a dictionary, but layer_types does not list %q", field, k, k)
		}
	}
	theta, ok, err := params.float("rope_theta")
	if err != nil {
		return bad("%s.%v", field, err)
	}
	if !ok {
		theta = 10000
		if v, ok := raw["rope_theta"]; ok && !isNullJSON(v) {
			if err := json.Unmarshal(v, &theta); err != nil {
				return bad("rope_theta must be a number")
			}
		}
	}
	if math.IsNaN(theta) || math.IsInf(theta, 0) || theta <= 1 {
		return bad("rope_theta must be a number above 1, got %v", theta)
	}
	cfg.RopeTheta = theta
	// partial_rotary_factor: a top-level value is copied into the dictionary (transformers 5).
	prf, ok, err := params.float("partial_rotary_factor")
	if err != nil {
		return bad("%s.%v", field, err)
	}
	prfField := field + ".partial_rotary_factor"
	if v, present := raw["partial_rotary_factor"]; present && !isNullJSON(v) {
		if err := json.Unmarshal(v, &prf); err != nil {
			return bad("partial_rotary_factor must be a number")
		}
		ok, prfField = true, "partial_rotary_factor"
	}
	if ok && prf != 1 {
		return bad("%s %v is not supported: Hone rotates the whole head", prfField, prf)
	}
	kind, err := params.str("rope_type")
	if err != nil {
		return bad("%s.%v", field, err)
	}
	if kind == "" {
		if kind, err = params.str("type"); err != nil {
			return bad("%s.%v", field, err)
		}
	}
	switch kind {
	case "", "default":
		cfg.RopeScaling = nil
		return nil
	case "linear", "llama3":
	default:
		return bad("%s rope_type %q is not supported (default, linear, llama3)", field, kind)
	}
	rs := &RopeScaling{Type: kind}
	num := func(key string, dst *float64) error {
		v, ok, err := params.float(key)
		if err != nil {
			return bad("%s.%v", field, err)
		}
		if ok {
			*dst = v
		}
		return nil
	}
	for key, dst := range map[string]*float64{"factor": &rs.Factor, "low_freq_factor": &rs.LowFreqFactor, "high_freq_factor": &rs.HighFreqFactor} {
		if err := num(key, dst); err != nil {
			return err
		}
	}
	if kind == "llama3" {
		// A top-level original_max_position_embeddings wins; without one, transformers 5
		// defaults it to max_position_embeddings.
		omax := float64(cfg.MaxPositionEmbeddings)
		if err := num("original_max_position_embeddings", &omax); err != nil {
			return err
		}
		if v, ok := raw["original_max_position_embeddings"]; ok && !isNullJSON(v) {
			if err := json.Unmarshal(v, &omax); err != nil {
				return bad("original_max_position_embeddings must be a number")
			}
		}
		if omax != math.Trunc(omax) || omax < 1 || omax > 1<<40 {
			return bad("%s.original_max_position_embeddings must be a positive integer", field)
		}
		rs.OriginalMaxPositionEmbeddings = int(omax)
	}
	cfg.RopeScaling = rs
	return nil
}

// sameParams reports whether two RoPE dictionaries hold the same values.
func sameParams(a, b ropeParams) bool {
	var x, y any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if json.Unmarshal(ja, &x) != nil || json.Unmarshal(jb, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
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
		case "longrope":
			if err := c.validateLongRope(); err != nil {
				return err
			}
		case "default", "":
		default:
			return fmt.Errorf("model: config.json: rope_scaling type %q is not supported (llama3, linear)", c.RopeScaling.Kind())
		}
	}
	if c.RopeFreqFactors != nil {
		if c.RopeScaling != nil && c.RopeScaling.Kind() == "llama3" {
			return fmt.Errorf("model: per-frequency RoPE factors and a llama3 rope_scaling together are not supported")
		}
		if len(c.RopeFreqFactors) != c.HeadDim/2 {
			return fmt.Errorf("model: %d per-frequency RoPE factors, want head_dim/2 = %d", len(c.RopeFreqFactors), c.HeadDim/2)
		}
		for i, f := range c.RopeFreqFactors {
			if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
				return fmt.Errorf("model: per-frequency RoPE factor %d is %v, not finite and positive", i, f)
			}
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

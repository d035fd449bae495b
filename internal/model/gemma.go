package model

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kernels"
	"github.com/honeai/hone/internal/tokenizer"
)

// BlockExtras are the parts of a transformer block that Gemma 2 and Gemma 3 add to the Llama
// block (and, for the sliding window, Mistral). Their zero value is the Llama block, so the
// other architectures never see them.
type BlockExtras struct {
	// SlidingWindow > 0: the layers Sliding marks attend to the SlidingWindow latest
	// positions only (their own included), as transformers' sliding-window mask does.
	SlidingWindow int
	Sliding       []bool
	// QueryPreAttnScalar > 0: attention scores are scaled by its inverse square root instead
	// of head_dim's (Gemma's query_pre_attn_scalar).
	QueryPreAttnScalar float64
	// AttnSoftcap and FinalSoftcap > 0: scores (after scaling) and final logits become
	// cap·tanh(x/cap) (Gemma 2's attn_logit_softcapping and final_logit_softcapping).
	AttnSoftcap, FinalSoftcap float64
	// ScaleEmbed multiplies the input embeddings by √hidden_size (rounded to f32, as
	// transformers' buffer is).
	ScaleEmbed bool
	// PostNorms: an RMSNorm on the attention output and one on the MLP output, before each
	// residual add (Gemma's post_attention_layernorm and post_feedforward_layernorm; its MLP
	// input norm is pre_feedforward_layernorm).
	PostNorms bool
	// NormPlusOne: the RMSNorm weights scale by 1 + weight (Gemma). The loader adds the 1 to
	// the weights read from safetensors (llama.cpp's GGUF files hold them with it already), so
	// the layers' norm vectors are always the effective scales.
	NormPlusOne bool
	// GeluTanh: the MLP is gelu_tanh(gate)·up instead of silu(gate)·up.
	GeluTanh bool
	// RopeLocalTheta > 0: sliding layers rotate with this base (Gemma 3's
	// rope_local_base_freq), no scaling; the other layers with RopeTheta and RopeScaling.
	RopeLocalTheta float64
}

// AttnScale is the factor of the attention scores q·k.
func (m *Model) AttnScale() float32 {
	c := &m.Config
	if c.QueryPreAttnScalar > 0 {
		return float32(1 / math.Sqrt(c.QueryPreAttnScalar))
	}
	return float32(1 / math.Sqrt(float64(c.HeadDim)))
}

// IsSliding reports whether layer l uses the sliding window.
func (c *Config) IsSliding(l int) bool {
	if c.SlidingWindow <= 0 {
		return false
	}
	return c.Sliding == nil || c.Sliding[l]
}

// WindowStart is the first position that a query at position p attends to in layer l (0
// without a window).
func (m *Model) WindowStart(l, p int) int {
	if !m.Config.IsSliding(l) {
		return 0
	}
	return max(0, p-m.Config.SlidingWindow+1)
}

// RopeAt is the rotary table of layer l.
func (m *Model) RopeAt(l int) *kernels.Table {
	if m.RopeLocal != nil && m.Config.Sliding != nil && m.Config.Sliding[l] {
		return m.RopeLocal
	}
	return m.Rope
}

// EmbedRow writes token id's input embedding (scaled where the architecture scales it).
func (m *Model) EmbedRow(dst []float32, id int) {
	if !m.TiedHead() || !m.LMHead.PackedRow(dst, id) {
		m.Embed.Row(dst[:m.Config.HiddenSize], id)
	}
	m.scaleEmbed(dst)
}

// scaleEmbed scales an embedding row where the architecture does (Gemma: by √hidden).
func (m *Model) scaleEmbed(dst []float32) {
	if H := m.Config.HiddenSize; m.Config.ScaleEmbed {
		kernels.Scale(dst[:H], m.EmbedScale())
	}
}

// EmbedScale is the factor input embeddings are scaled by (1 where the architecture does
// not scale them).
func (m *Model) EmbedScale() float32 {
	if !m.Config.ScaleEmbed {
		return 1
	}
	return float32(math.Sqrt(float64(m.Config.HiddenSize)))
}

// softcap replaces x by cap·tanh(x/cap); when t is not nil it receives tanh(x/cap).
func softcap(x, t []float32, cap float64) {
	for i, v := range x {
		th := math.Tanh(float64(v) / cap)
		if t != nil {
			t[i] = float32(th)
		}
		x[i] = float32(cap * th)
	}
}

// Softcap applies cap·tanh(x/cap) to x (t, when not nil, receives the tanh values for the
// backward pass).
func Softcap(x, t []float32, cap float64) { softcap(x, t, cap) }

// SoftcapLogits applies the final logit soft-capping, if any, to logits in place.
func (m *Model) SoftcapLogits(logits []float32) {
	if c := m.Config.FinalSoftcap; c > 0 {
		softcap(logits, nil, c)
	}
}

// maskScoresFrom prepares one query row's attention scores for the softmax, for a query at
// position p of layer l, the row's scores being positions lo, lo+1, ...: soft-capping, then
// −∞ before the window.
func (m *Model) maskScoresFrom(l int, row []float32, p, lo int) {
	if c := m.Config.AttnSoftcap; c > 0 {
		softcap(row, nil, c)
	}
	if s := m.WindowStart(l, p) - lo; s > 0 {
		for j := range row[:min(s, len(row))] {
			row[j] = float32(math.Inf(-1))
		}
	}
}

// GeluTanh is the tanh approximation of GELU (transformers' gelu_pytorch_tanh).
func GeluTanh(x float32) float32 {
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))))
}

// GeluTanhGrad is the derivative of GeluTanh at x.
func GeluTanhGrad(x float32) float32 {
	v := float64(x)
	k := math.Sqrt(2 / math.Pi)
	u := k * (v + 0.044715*v*v*v)
	t := math.Tanh(u)
	return float32(0.5*(1+t) + 0.5*v*(1-t*t)*k*(1+3*0.044715*v*v))
}

// geluMul writes act = gelu_tanh(g)·u.
func geluMul(act, g, u []float32) {
	kernels.ParallelFor(len(g)/1024+1, 1, func(b int) {
		for i := b * 1024; i < min((b+1)*1024, len(g)); i++ {
			act[i] = GeluTanh(g[i]) * u[i]
		}
	})
}

// activate writes the MLP activation of gate and up into act (SwiGLU, or GELU-tanh for Gemma).
func (m *Model) activate(act, g, u []float32) {
	if m.Config.GeluTanh {
		geluMul(act, g, u)
		return
	}
	kernels.SwiGLU(act, nil, g, u)
}

// mlpNormName is the name of the MLP input norm in a layer.
func mlpNormName(c *Config) string {
	if c.PostNorms {
		return "pre_feedforward_layernorm.weight"
	}
	return "post_attention_layernorm.weight"
}

// loadPostNorms reads Gemma's post-attention and post-MLP norms of the layer with prefix p.
func loadPostNorms(ld *loader, c *Config, p string, L *Layer) error {
	if !c.PostNorms {
		return nil
	}
	var err error
	if L.PostAttnNorm, err = ld.vector(p+"post_attention_layernorm.weight", c.HiddenSize); err != nil {
		return err
	}
	L.PostMLPNorm, err = ld.vector(p+"post_feedforward_layernorm.weight", c.HiddenSize)
	return err
}

// finishGemma adds the one to Gemma's norm weights read from Hugging Face files (a GGUF holds
// them with it) and builds the local rotary table.
func finishGemma(m *Model, src tensorSource) {
	c := &m.Config
	if c.NormPlusOne {
		if _, gg := src.(*ggufSource); !gg {
			plus := func(v []float32) {
				for i := range v {
					v[i]++
				}
			}
			for i := range m.Layers {
				L := &m.Layers[i]
				for _, v := range [][]float32{L.AttnNorm, L.MLPNorm, L.PostAttnNorm, L.PostMLPNorm, L.QNorm, L.KNorm} {
					plus(v)
				}
			}
			plus(m.Norm)
		}
	}
	if c.RopeLocalTheta > 0 {
		m.RopeLocal = kernels.NewRope(c.HeadDim, c.RopeLocalTheta).Table(c.MaxPositionEmbeddings)
	}
}

// Gemma 2 (Gemma2ForCausalLM) and Gemma 3's text model (Gemma3ForCausalLM): Llama's block
// with the BlockExtras above, which differ between the two as their gemmaSpecs say.
var (
	gemma2Family = gemmaFamily("gemma2", []string{"Gemma2ForCausalLM"}, []string{"gemma2"}, &gemma2Spec)
	gemma3Family = gemmaFamily("gemma3", []string{"Gemma3ForCausalLM"}, []string{"gemma3_text"}, &gemma3Spec)
)

// gemmaSpec is what tells Gemma 2 and Gemma 3 apart, in config.json and in llama.cpp's GGUF.
type gemmaSpec struct {
	// pattern: every pattern-th layer is global, the others slide (llama.cpp's fixed pattern,
	// and config.json's default where it has no layer_types); patternField names the
	// config.json field that may set it ("": none).
	pattern      int
	patternField string
	// bigLayers is the layer count of the 27B shape, whose queries llama.cpp scales by
	// (hidden/heads)^-1/2 rather than head_dim's.
	bigLayers int
	// maxPositions is max_position_embeddings' default.
	maxPositions int
	// softcaps: attention and final logits are soft-capped by default (50 and 30), and
	// llama.cpp's architecture caps them always (Gemma 2); without, neither is unless
	// config.json or the GGUF says so, and llama.cpp caps neither (Gemma 3).
	softcaps bool
	// qkNorm: per-head RMSNorms of queries and keys (Gemma 3).
	qkNorm bool
	// localRope: the sliding layers rotate with a base of their own (rope_local_base_freq,
	// default 1e4; transformers 5's rope_parameters keyed by layer type), the global ones with
	// rope_theta (default 1e6) and rope_scaling; llama.cpp reads a linear scaling (Gemma 3).
	localRope bool
}

var (
	gemma2Spec = gemmaSpec{pattern: 2, bigLayers: 46, maxPositions: 8192, softcaps: true}
	gemma3Spec = gemmaSpec{pattern: 6, patternField: "sliding_window_pattern", bigLayers: 62, maxPositions: 131072, qkNorm: true, localRope: true}
)

// gemmaFamily is the descriptor of a Gemma family.
func gemmaFamily(arch string, classes, modelTypes []string, spec *gemmaSpec) Family {
	return Family{
		Arch:            arch,
		HFArchitectures: classes,
		HFModelTypes:    modelTypes,
		GGUFArch:        arch,
		GGUFVocab:       tokenizer.GGUFVocabRules{NoSpacePrefix: true},
		ChatTemplate:    "gemma",
		parseHF:         func(h *hfConfig, cfg *Config) error { return parseGemma(h.raw, cfg, spec) },
		fromGGUF: func(g *ggufConfig, c *Config) error {
			c.AttentionBias = g.hasBias || g.hasOBias
			return gemmaFromGGUF(g.f.Metadata, c, g.flt, g.num, spec)
		},
		ggufKeys:     gemmaGGUFKeys,
		ggufMetadata: func(c *Config) ([]gguf.KV, []GGUFVector, error) { return gemmaGGUFMetadata(c, spec) },
	}
}

// parseGemma reads a Gemma 2 or Gemma 3 text config.json (transformers' Gemma2Config and
// Gemma3TextConfig, their defaults when a field is absent). Every field that changes the
// computation is implemented or refused by name.
func parseGemma(raw map[string]json.RawMessage, cfg *Config, spec *gemmaSpec) error {
	bad := func(format string, a ...any) error { return fmt.Errorf("model: config.json: "+format, a...) }
	get := func(key string, dst any) (bool, error) {
		v, ok := raw[key]
		if !ok || isNullJSON(v) {
			return false, nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return false, bad("%s: %v", key, err)
		}
		return true, nil
	}
	cfg.NormPlusOne, cfg.PostNorms, cfg.ScaleEmbed, cfg.GeluTanh = true, true, true, true
	cfg.QKNorm = spec.qkNorm
	if _, err := get("attention_bias", &cfg.AttentionBias); err != nil {
		return err
	}
	// Activation: hidden_activation is what Gemma 2/3 read; older configs also carry hidden_act.
	for _, key := range []string{"hidden_activation", "hidden_act"} {
		var act string
		if ok, err := get(key, &act); err != nil {
			return err
		} else if ok && act != "gelu_pytorch_tanh" {
			return bad("%s %q is not supported (gelu_pytorch_tanh for %s)", key, act, cfg.Arch)
		}
	}
	if q, ok := raw["quantization_config"]; ok && !isNullJSON(q) {
		return bad("quantization_config is set: Hone runs f32, bf16 and f16 weights, not quantized ones")
	}
	var bidir bool
	if _, err := get("use_bidirectional_attention", &bidir); err != nil {
		return err
	}
	if bidir {
		return bad("use_bidirectional_attention is true: Hone runs causal attention only")
	}
	cfg.NumKVHeads = cfg.NumHeads
	cfg.HeadDim = 256
	cfg.RMSNormEps = 1e-6
	cfg.MaxPositionEmbeddings = spec.maxPositions
	cfg.TieWordEmbeddings = true
	for key, dst := range map[string]*int{"num_key_value_heads": &cfg.NumKVHeads, "head_dim": &cfg.HeadDim,
		"max_position_embeddings": &cfg.MaxPositionEmbeddings} {
		if _, err := get(key, dst); err != nil {
			return err
		}
	}
	if _, err := get("rms_norm_eps", &cfg.RMSNormEps); err != nil {
		return err
	}
	if _, err := get("tie_word_embeddings", &cfg.TieWordEmbeddings); err != nil {
		return err
	}
	if cfg.MaxPositionEmbeddings <= 0 {
		return bad("max_position_embeddings must be positive, got %d", cfg.MaxPositionEmbeddings)
	}
	cfg.QueryPreAttnScalar = 256
	if _, err := get("query_pre_attn_scalar", &cfg.QueryPreAttnScalar); err != nil {
		return err
	}
	if !(cfg.QueryPreAttnScalar > 0) {
		return bad("query_pre_attn_scalar must be positive")
	}
	// Soft-capping: Gemma 2 defaults to 50 (attention) and 30 (final logits), Gemma 3 to none;
	// an explicit null turns either off.
	for _, s := range []struct {
		key string
		dst *float64
		def float64
	}{{"attn_logit_softcapping", &cfg.AttnSoftcap, 50}, {"final_logit_softcapping", &cfg.FinalSoftcap, 30}} {
		*s.dst = 0
		v, present := raw[s.key]
		switch {
		case !present && spec.softcaps:
			*s.dst = s.def
		case present && !isNullJSON(v):
			if err := json.Unmarshal(v, s.dst); err != nil || !(*s.dst > 0) {
				return bad("%s must be a positive number or null", s.key)
			}
		}
	}
	// Sliding window: 4096 by default; null means none.
	cfg.SlidingWindow = 4096
	if v, ok := raw["sliding_window"]; ok {
		cfg.SlidingWindow = 0
		if !isNullJSON(v) {
			if err := json.Unmarshal(v, &cfg.SlidingWindow); err != nil || cfg.SlidingWindow <= 0 {
				return bad("sliding_window must be a positive integer or null")
			}
		}
	}
	layerTypes, err := parseLayerTypes(raw, cfg.NumLayers)
	if err != nil {
		return err
	}
	if layerTypes == nil {
		// Gemma 2 alternates, sliding first; Gemma 3 has sliding_window_pattern (default 6):
		// every pattern-th layer is global.
		pattern := spec.pattern
		if spec.patternField != "" {
			if _, err := get(spec.patternField, &pattern); err != nil {
				return err
			}
			if pattern <= 0 {
				return bad("%s must be positive", spec.patternField)
			}
		}
		for i := 0; i < cfg.NumLayers; i++ {
			t := "full_attention"
			if (i+1)%pattern != 0 {
				t = "sliding_attention"
			}
			layerTypes = append(layerTypes, t)
		}
	}
	cfg.Sliding = make([]bool, cfg.NumLayers)
	for i, t := range layerTypes {
		cfg.Sliding[i] = t == "sliding_attention"
	}
	if !spec.localRope {
		return parseRope(raw, layerTypes, cfg)
	}
	return parseGemma3Rope(raw, cfg)
}

// parseGemma3Rope reads Gemma 3's two RoPEs: the global layers' (rope_theta, default 1e6, and
// rope_scaling) and the sliding layers' (rope_local_base_freq, default 1e4, unscaled), from
// transformers 4's fields or transformers 5's rope_parameters keyed by layer type.
func parseGemma3Rope(raw map[string]json.RawMessage, cfg *Config) error {
	var full, local map[string]json.RawMessage
	if v, ok := raw["rope_parameters"]; ok && !isNullJSON(v) {
		var nested map[string]json.RawMessage
		if err := json.Unmarshal(v, &nested); err != nil {
			return fmt.Errorf("model: config.json: rope_parameters must be an object: %w", err)
		}
		for k, sub := range nested {
			var d map[string]json.RawMessage
			switch k {
			case "full_attention", "sliding_attention":
				if err := json.Unmarshal(sub, &d); err != nil {
					return fmt.Errorf("model: config.json: rope_parameters.%s must be an object: %w", k, err)
				}
			default:
				return fmt.Errorf("model: config.json: rope_parameters key %q is not supported for gemma3 (full_attention, sliding_attention)", k)
			}
			if k == "full_attention" {
				full = d
			} else {
				local = d
			}
		}
	}
	if full == nil {
		full = map[string]json.RawMessage{}
		if rs, ok := raw["rope_scaling"]; ok && !isNullJSON(rs) {
			if err := json.Unmarshal(rs, &full); err != nil {
				return fmt.Errorf("model: config.json: rope_scaling must be an object: %w", err)
			}
		}
	}
	if _, ok := full["rope_theta"]; !ok {
		full["rope_theta"] = json.RawMessage("1000000")
		if v, ok := raw["rope_theta"]; ok && !isNullJSON(v) {
			full["rope_theta"] = v
		}
	}
	if local == nil {
		local = map[string]json.RawMessage{}
	}
	if _, ok := local["rope_theta"]; !ok {
		local["rope_theta"] = json.RawMessage("10000")
		if v, ok := raw["rope_local_base_freq"]; ok && !isNullJSON(v) {
			local["rope_theta"] = v
		}
	}
	one := func(name string, d map[string]json.RawMessage, dst *Config) error {
		b, _ := json.Marshal(d)
		r := map[string]json.RawMessage{"rope_parameters": b}
		if v, ok := raw["partial_rotary_factor"]; ok {
			r["partial_rotary_factor"] = v
		}
		if err := parseRope(r, nil, dst); err != nil {
			return fmt.Errorf("%w (%s layers)", err, name)
		}
		return nil
	}
	if err := one("full_attention", full, cfg); err != nil {
		return err
	}
	lc := &Config{MaxPositionEmbeddings: cfg.MaxPositionEmbeddings}
	if err := one("sliding_attention", local, lc); err != nil {
		return err
	}
	if lc.RopeScaling != nil {
		return fmt.Errorf("model: config.json: rope_type %q on the sliding_attention layers is not supported (default only)", lc.RopeScaling.Kind())
	}
	cfg.RopeLocalTheta = lc.RopeTheta
	return nil
}

// postNorm is Gemma's RMSNorm of a sublayer's output before the residual add (w nil: none);
// keep and scales, when not nil, receive its input and scales for the backward pass.
type postNorm struct {
	w, keep, scales []float32
	eps             float32
}

func (p postNorm) apply(out []float32, rows int) {
	if p.w == nil {
		return
	}
	if p.keep != nil {
		copy(p.keep, out)
	}
	kernels.RMSNormRows(out, p.scales, out, rows, len(p.w), p.w, p.eps)
}

// gemmaGGUFNames are llama.cpp's names of Gemma's layer norms (after "blk.N."), which differ
// from GGUFLayerNames': Gemma's post_attention_layernorm is a post norm, its MLP input norm
// is pre_feedforward_layernorm.
var gemmaGGUFNames = map[string]string{
	"post_attention_layernorm.weight":   "post_attention_norm.weight",
	"pre_feedforward_layernorm.weight":  "ffn_norm.weight",
	"post_feedforward_layernorm.weight": "post_ffw_norm.weight",
}

// gemmaGGUFMetadata is GGUFMetadata for Gemma 2 and 3: the keys llama.cpp's converter
// writes (Gemma2Model, Gemma3Model: key and value lengths always; Gemma 2's soft-caps and no
// RoPE base, whose default of 10000 llama.cpp assumes; Gemma 3's global RoPE base and a
// linear scaling), after checking that the model is one llama.cpp computes: it fixes what the
// metadata cannot say (sliding layers all but every second for Gemma 2 and every sixth for
// Gemma 3, Gemma 3's local RoPE base 10000, a query scale of head_dim, or hidden/heads for
// the 27B shapes, no soft-caps on Gemma 3), so a model that differs has no GGUF form.
func gemmaGGUFMetadata(c *Config, spec *gemmaSpec) ([]gguf.KV, []GGUFVector, error) {
	bad := func(format string, args ...any) ([]gguf.KV, []GGUFVector, error) {
		return nil, nil, fmt.Errorf("model: %s has no GGUF form: %s", c.Arch, fmt.Sprintf(format, args...))
	}
	pattern, big := spec.pattern, spec.bigLayers
	if c.SlidingWindow <= 0 {
		return bad("llama.cpp's %s attends within a sliding window on its sliding layers, and this model has none", c.Arch)
	}
	for l := 0; l < c.NumLayers; l++ {
		if c.IsSliding(l) != (l%pattern < pattern-1) {
			return bad("llama.cpp's sliding layers are all but every %s one (layer %d is %s here)", map[int]string{2: "second", 6: "sixth"}[pattern], l, map[bool]string{true: "sliding", false: "global"}[c.IsSliding(l)])
		}
	}
	scale := float64(c.HeadDim)
	if c.NumLayers == big {
		scale = float64(c.HiddenSize / c.NumHeads)
	}
	if c.QueryPreAttnScalar != scale {
		return bad("llama.cpp scales queries by %g^-1/2 for this shape (head_dim, or hidden/heads for the 27B one), not query_pre_attn_scalar %g", scale, c.QueryPreAttnScalar)
	}
	a := c.Arch + "."
	meta := []gguf.KV{
		{Key: "general.architecture", Value: c.Arch},
		{Key: a + "context_length", Value: uint32(c.MaxPositionEmbeddings)},
		{Key: a + "embedding_length", Value: uint32(c.HiddenSize)},
		{Key: a + "block_count", Value: uint32(c.NumLayers)},
		{Key: a + "feed_forward_length", Value: uint32(c.IntermediateSize)},
		{Key: a + "attention.head_count", Value: uint32(c.NumHeads)},
		{Key: a + "attention.head_count_kv", Value: uint32(c.NumKVHeads)},
		{Key: a + "attention.layer_norm_rms_epsilon", Value: float32(c.RMSNormEps)},
		{Key: a + "attention.key_length", Value: uint32(c.HeadDim)},
		{Key: a + "attention.value_length", Value: uint32(c.HeadDim)},
		{Key: a + "attention.sliding_window", Value: uint32(c.SlidingWindow)},
	}
	kind := ""
	if c.RopeScaling != nil {
		kind = c.RopeScaling.Kind()
	}
	if spec.softcaps {
		if c.AttnSoftcap <= 0 || c.FinalSoftcap <= 0 {
			return bad("llama.cpp's gemma2 caps the attention and final logits, and this model leaves one uncapped")
		}
		if kind != "" && kind != "default" {
			return bad("llama.cpp's gemma2 reads no RoPE scaling (rope_scaling %q)", kind)
		}
		meta = append(meta, gguf.KV{Key: a + "attn_logit_softcapping", Value: float32(c.AttnSoftcap)},
			gguf.KV{Key: a + "final_logit_softcapping", Value: float32(c.FinalSoftcap)})
		if c.RopeTheta != 10000 {
			// The converter writes none (llama.cpp then assumes 10000); llama.cpp reads it.
			meta = append(meta, gguf.KV{Key: a + "rope.freq_base", Value: float32(c.RopeTheta)})
		}
		return meta, nil, nil
	}
	if c.AttnSoftcap != 0 || c.FinalSoftcap != 0 {
		return bad("llama.cpp's gemma3 caps no logits (attn_logit_softcapping %g, final_logit_softcapping %g)", c.AttnSoftcap, c.FinalSoftcap)
	}
	if c.RopeLocalTheta != 10000 {
		return bad("llama.cpp's gemma3 rotates its sliding layers with base 10000, not rope_local_base_freq %g", c.RopeLocalTheta)
	}
	meta = append(meta, gguf.KV{Key: a + "rope.freq_base", Value: float32(c.RopeTheta)})
	switch kind {
	case "", "default":
	case "linear":
		meta = append(meta, gguf.KV{Key: a + "rope.scaling.type", Value: "linear"},
			gguf.KV{Key: a + "rope.scaling.factor", Value: float32(c.RopeScaling.Factor)})
	default:
		return bad("llama.cpp's gemma3 reads a linear RoPE scaling only (rope_scaling %q)", kind)
	}
	return meta, nil, nil
}

// gemmaGGUFKeys are the {arch}.* keys Hone reads for gemma2 and gemma3 beyond ggufArchKeys.
var gemmaGGUFKeys = map[string]bool{
	"attn_logit_softcapping": true, "final_logit_softcapping": true, "attention.sliding_window": true,
	"attention.sliding_window_pattern": true, "rope.freq_base_swa": true,
}

// gemmaFromGGUF sets Gemma's block extras from llama.cpp's metadata, as llama.cpp reads them:
// soft-caps (Gemma 2's default to 50 and 30 when absent; Gemma 3 has none unless given), the
// sliding window (default 4096) on every second layer (gemma2) or five of six (gemma3) unless
// attention.sliding_window_pattern says otherwise, Gemma 3's local RoPE base (10000, or
// rope.freq_base_swa) and global base (default 1e6). llama.cpp keeps no
// query_pre_attn_scalar: like it, Hone scales by head_dim^-1/2, or (hidden/heads)^-1/2 for
// the 27B shapes (46 layers for gemma2, 62 for gemma3), whose configs set that.
func gemmaFromGGUF(f interface{ Has(string) bool }, c *Config, flt func(string, float64) float64, num func(string, int) int, spec *gemmaSpec) error {
	a := c.Arch + "."
	c.NormPlusOne, c.PostNorms, c.ScaleEmbed, c.GeluTanh, c.QKNorm = true, true, true, true, spec.qkNorm
	if spec.softcaps {
		c.AttnSoftcap, c.FinalSoftcap = flt(a+"attn_logit_softcapping", 50), flt(a+"final_logit_softcapping", 30)
	} else {
		c.AttnSoftcap, c.FinalSoftcap = flt(a+"attn_logit_softcapping", 0), flt(a+"final_logit_softcapping", 0)
	}
	if spec.localRope {
		if !f.Has(a + "rope.freq_base") {
			c.RopeTheta = 1e6
		}
		c.RopeLocalTheta = flt(a+"rope.freq_base_swa", 10000)
	}
	c.QueryPreAttnScalar = float64(c.HeadDim)
	if c.NumLayers == spec.bigLayers {
		c.QueryPreAttnScalar = float64(c.HiddenSize / c.NumHeads)
	}
	c.SlidingWindow = num("attention.sliding_window", 4096)
	pattern := num("attention.sliding_window_pattern", spec.pattern)
	if pattern <= 0 {
		return fmt.Errorf("model: %sattention.sliding_window_pattern must be positive", a)
	}
	c.Sliding = make([]bool, c.NumLayers)
	for i := range c.Sliding {
		c.Sliding[i] = i%pattern < pattern-1
	}
	return nil
}

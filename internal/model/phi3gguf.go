package model

// Phi-3 / Phi-4-mini in llama.cpp's GGUF layout (general.architecture "phi3"), as its
// convert_hf_to_gguf.py writes them: the fused projections keep their fusion (attn_qkv: the
// query, key and value rows; ffn_up: the gate rows, then the up rows), rope.dimension_count is
// the rotary part of a head (partial_rotary_factor), LongRoPE's factors are two f32 tensors
// (rope_factors_short, rope_factors_long) with rope.scaling.original_context_length and
// rope.scaling.attn_factor, and attention.sliding_window holds the config's window (0 for
// none).

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/honeai/hone/internal/gguf"
)

// The LongRoPE factor tensors of a phi3 GGUF.
const (
	ggufRopeShort = "rope_factors_short.weight"
	ggufRopeLong  = "rope_factors_long.weight"
)

// phi3GGUFKeys are the phi3.* keys Hone reads beyond ggufArchKeys.
var phi3GGUFKeys = map[string]bool{"attention.sliding_window": true, "rope.scaling.attn_factor": true}

// phi3FusedNames are the Hugging Face layer tensors that exist only in Phi-3 (fused), and
// phi3SplitNames those that Phi-3 fuses; a GGUF source maps the one set or the other.
var (
	phi3FusedNames = map[string]bool{"self_attn.qkv_proj.weight": true, "mlp.gate_up_proj.weight": true}
	phi3SplitNames = map[string]bool{"self_attn.q_proj.weight": true, "self_attn.k_proj.weight": true,
		"self_attn.v_proj.weight": true, "mlp.gate_proj.weight": true, "mlp.up_proj.weight": true}
)

// ggufLayerName reports whether the layer tensor hf (a GGUFLayerNames key) belongs to the
// family's GGUF layout: the fused tensors for a family with fused projections (Phi-3), the
// split ones for the others.
func ggufLayerName(fam *Family, hf string) bool {
	if fam.FusedProjections {
		return !phi3SplitNames[hf]
	}
	return !phi3FusedNames[hf]
}

// phi3FromGGUF reads what a phi3 GGUF adds to the common keys: the rotary dimensions, the
// sliding window and LongRoPE. Like transformers, Hone picks the long factors for a pass
// whose sequence is longer than the original context (llama.cpp picks them for every
// position once its context size is); and it honours a sliding window below the context
// length, as transformers' Phi3ForCausalLM does (llama.cpp disables Phi-3's window).
func phi3FromGGUF(g *ggufConfig, c *Config) error {
	f, rotary, flt, num := g.f, g.rotary, g.flt, g.num
	a := c.Arch + "."
	if rotary < 2 || rotary > c.HeadDim || rotary%2 != 0 {
		return fmt.Errorf("model: %s: %srope.dimension_count %d: want an even number from 2 to the head size %d", f.Name, a, rotary, c.HeadDim)
	}
	if rotary != c.HeadDim {
		c.RotaryDim = rotary
	}
	if w := num("attention.sliding_window", 0); w > 0 && w < c.MaxPositionEmbeddings {
		c.SlidingWindow = w
	}
	_, hasShort := f.Tensors[ggufRopeShort]
	_, hasLong := f.Tensors[ggufRopeLong]
	if hasShort != hasLong {
		return fmt.Errorf("model: %s: LongRoPE needs both %s and %s", f.Name, ggufRopeShort, ggufRopeLong)
	}
	if !hasShort {
		if f.Metadata.Has(a+"rope.scaling.attn_factor") && flt(a+"rope.scaling.attn_factor", 1) != 1 {
			return fmt.Errorf("model: %s: %srope.scaling.attn_factor without LongRoPE factors is not supported", f.Name, a)
		}
		return nil
	}
	omax := num("rope.scaling.original_context_length", -1)
	if omax < 2 {
		return fmt.Errorf("model: %s: LongRoPE needs %srope.scaling.original_context_length above 1", f.Name, a)
	}
	rs := &RopeScaling{Type: "longrope", OriginalMaxPositionEmbeddings: omax}
	rs.Factor = float64(c.MaxPositionEmbeddings) / float64(omax)
	// The converter's attention factor (it ignores a config's own attention_factor).
	af := 1.0
	if rs.Factor > 1 {
		af = math.Sqrt(1 + math.Log(rs.Factor)/math.Log(float64(omax)))
	}
	rs.AttentionFactor = flt(a+"rope.scaling.attn_factor", af)
	for name, dst := range map[string]*[]float64{ggufRopeShort: &rs.ShortFactor, ggufRopeLong: &rs.LongFactor} {
		v, err := f.Float32(name)
		if err != nil {
			return fmt.Errorf("model: %s: tensor %s cannot be loaded: %w", f.Name, name, err)
		}
		for _, x := range v {
			// The shortest decimal that rounds to x: the config's value before conversion.
			d, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
			*dst = append(*dst, d)
		}
	}
	c.RopeScaling = rs
	return nil
}

// GGUFVector is a 1-D f32 tensor that llama.cpp's converter writes beside the weights from
// the config (Llama 3.1's rope_freqs, Phi-3's LongRoPE factors).
type GGUFVector struct {
	Name   string
	Values []float32
}

// phi3GGUFMetadata is GGUFMetadata for phi3: the keys of every family (ggufBaseMetadata), and
// what llama.cpp's converter adds for a phi3 config: the original context, the rotary
// dimensions, the sliding window (0 for none) and, with LongRoPE, the attention factor and
// the factor tensors. The converter recomputes the attention factor from the context
// lengths, so a config whose attention_factor differs has no GGUF form.
func phi3GGUFMetadata(c *Config) ([]gguf.KV, []GGUFVector, error) {
	a := c.Arch + "."
	base := ggufBaseMetadata(c, c.Arch)
	omax := 4096 // Phi3Config's default
	rs := c.RopeScaling
	if rs != nil {
		omax = rs.OriginalMaxPositionEmbeddings
	}
	meta := append(base, []gguf.KV{
		{Key: a + "rope.scaling.original_context_length", Value: uint32(omax)},
		{Key: a + "rope.dimension_count", Value: uint32(c.RotaryDims())},
		{Key: a + "attention.sliding_window", Value: uint32(c.SlidingWindow)},
	}...)
	if rs == nil {
		return meta, nil, nil
	}
	if rs.Kind() != "longrope" {
		return nil, nil, fmt.Errorf("model: phi3 rope_scaling %q has no GGUF form", rs.Kind())
	}
	scale := float64(c.MaxPositionEmbeddings) / float64(omax)
	af := 1.0
	if scale > 1 {
		af = math.Sqrt(1 + math.Log(scale)/math.Log(float64(omax)))
	}
	if math.Abs(af-rs.AttentionFactor) > 1e-6*af {
		return nil, nil, errors.New("model: phi3 longrope attention_factor differs from the one llama.cpp's converter computes: no GGUF form")
	}
	meta = append(meta, gguf.KV{Key: a + "rope.scaling.attn_factor", Value: float32(af)})
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	return meta, []GGUFVector{{ggufRopeLong, f32(rs.LongFactor)}, {ggufRopeShort, f32(rs.ShortFactor)}}, nil
}

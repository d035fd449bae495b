package model

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kernels"
)

// GGUFLayerNames maps the Hugging Face names of a layer's tensors (after "model.layers.N.")
// to llama.cpp's (after "blk.N."). LoadGGUF reads with it and the GGUF export writes with it.
var GGUFLayerNames = map[string]string{
	"input_layernorm.weight":          "attn_norm.weight",
	"post_attention_layernorm.weight": "ffn_norm.weight",
	"self_attn.q_proj.weight":         "attn_q.weight",
	"self_attn.q_proj.bias":           "attn_q.bias",
	"self_attn.k_proj.weight":         "attn_k.weight",
	"self_attn.k_proj.bias":           "attn_k.bias",
	"self_attn.v_proj.weight":         "attn_v.weight",
	"self_attn.v_proj.bias":           "attn_v.bias",
	"self_attn.o_proj.weight":         "attn_output.weight",
	"self_attn.o_proj.bias":           "attn_output.bias",
	"self_attn.q_norm.weight":         "attn_q_norm.weight",
	"self_attn.k_norm.weight":         "attn_k_norm.weight",
	"mlp.gate_proj.weight":            "ffn_gate.weight",
	"mlp.gate_proj.bias":              "ffn_gate.bias",
	"mlp.up_proj.weight":              "ffn_up.weight",
	"mlp.up_proj.bias":                "ffn_up.bias",
	"mlp.down_proj.weight":            "ffn_down.weight",
	"mlp.down_proj.bias":              "ffn_down.bias",
	// Phi-3's fused projections (ffn_up holds the gate rows, then the up rows).
	"self_attn.qkv_proj.weight": "attn_qkv.weight",
	"mlp.gate_up_proj.weight":   "ffn_up.weight",
}

// ggufGlobalNames are the tensors outside the layers.
var ggufGlobalNames = map[string]string{
	"model.embed_tokens.weight": "token_embd.weight",
	"model.norm.weight":         "output_norm.weight",
	"lm_head.weight":            "output.weight",
}

// GGUFTensorNameFor is GGUFTensorName for a model of c's architecture: Gemma's four norms a
// layer have names of their own (gemmaGGUFNames).
func GGUFTensorNameFor(c *Config, hf string) (name string, layer int, ok bool) {
	return ggufTensorName(hf, c.PostNorms)
}

// GGUFTensorName is llama.cpp's name for a Hugging Face tensor name, and the layer it
// belongs to (-1 for none); ok is false for a name llama.cpp's converter does not know.
func GGUFTensorName(hf string) (name string, layer int, ok bool) { return ggufTensorName(hf, false) }

// ggufTensorName is GGUFTensorName, with Gemma's norm names when postNorms.
func ggufTensorName(hf string, postNorms bool) (name string, layer int, ok bool) {
	if g, ok := ggufGlobalNames[hf]; ok {
		return g, -1, true
	}
	rest, found := strings.CutPrefix(hf, "model.layers.")
	if !found {
		return "", 0, false
	}
	num, suffix, found := strings.Cut(rest, ".")
	l, err := strconv.Atoi(num)
	if !found || err != nil || l < 0 {
		return "", 0, false
	}
	g, ok := GGUFLayerNames[suffix]
	if pg, isGemma := gemmaGGUFNames[suffix]; postNorms && isGemma {
		g, ok = pg, true
	}
	if !ok {
		return "", 0, false
	}
	return fmt.Sprintf("blk.%d.%s", l, g), l, true
}

// GGUFPermutedHeads is the number of heads whose rows llama.cpp's converter reorders in the
// Hugging Face tensor hf (Llama's q and k projections, weights and biases), or 0.
func GGUFPermutedHeads(c *Config, hf string) int {
	if !c.Family().PermutedQK || !strings.HasPrefix(hf, "model.layers.") {
		return 0
	}
	switch {
	case strings.Contains(hf, ".self_attn.q_proj."):
		return c.NumHeads
	case strings.Contains(hf, ".self_attn.k_proj."):
		return c.NumKVHeads
	}
	return 0
}

// PermuteRowsForGGUF is the inverse of unpermuteRows: the row order llama.cpp's converter
// gives Llama's q/k projections (its RoPE rotates adjacent pairs, Hone's halves): within
// each head, Hugging Face row j·half+i becomes row 2i+j.
func PermuteRowsForGGUF(v []float32, rows, cols, heads int) ([]float32, error) {
	order, err := unpermuteOrder(rows, heads)
	if err != nil || len(v) != rows*cols {
		return nil, fmt.Errorf("model: %d rows are not a multiple of 2×%d heads", rows, heads)
	}
	out := make([]float32, len(v))
	for r, dst := range order {
		copy(out[int(dst)*cols:(int(dst)+1)*cols], v[r*cols:(r+1)*cols])
	}
	return out, nil
}

// UnpermuteRowsFromGGUF is the inverse of PermuteRowsForGGUF: a GGUF file's Llama q/k rows
// in Hugging Face's order, as the loader reads them.
func UnpermuteRowsFromGGUF(v []float32, rows, cols, heads int) ([]float32, error) {
	if len(v) != rows*cols {
		return nil, fmt.Errorf("model: %d values are not %d rows of %d", len(v), rows, cols)
	}
	out, err := unpermuteRows(v, rows, cols, heads)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return out, nil
}

// GGUFMetadata is the inverse of ConfigFromGGUF: general.architecture and the {arch}.*
// hyperparameters llama.cpp's convert_hf_to_gguf.py writes for c, and the 1-D tensors it adds
// (GGUFVector), as c's family writes them (its ggufMetadata: ggufDecoderMetadata for the
// Llama-style families, phi3GGUFMetadata, gemmaGGUFMetadata).
func GGUFMetadata(c *Config) (meta []gguf.KV, vectors []GGUFVector, err error) {
	fam := FamilyOf(c.Arch)
	if fam == nil || fam.ggufMetadata == nil {
		return nil, nil, fmt.Errorf("model: architecture %q has no GGUF export (%s)", c.Arch, familyList(func(f *Family) []string {
			if f.ggufMetadata == nil {
				return nil
			}
			return []string{f.Arch}
		}, false))
	}
	return fam.ggufMetadata(c)
}

// ggufBaseMetadata is general.architecture (arch) and the {arch}.* keys the converter writes
// for every Llama-style architecture: sizes, heads, RoPE base, norm epsilon, and the key and
// value lengths when the head size is not hidden/heads.
func ggufBaseMetadata(c *Config, arch string) []gguf.KV {
	a := arch + "."
	meta := []gguf.KV{
		{Key: "general.architecture", Value: arch},
		{Key: a + "block_count", Value: uint32(c.NumLayers)},
		{Key: a + "context_length", Value: uint32(c.MaxPositionEmbeddings)},
		{Key: a + "embedding_length", Value: uint32(c.HiddenSize)},
		{Key: a + "feed_forward_length", Value: uint32(c.IntermediateSize)},
		{Key: a + "attention.head_count", Value: uint32(c.NumHeads)},
		{Key: a + "attention.head_count_kv", Value: uint32(c.NumKVHeads)},
		{Key: a + "rope.freq_base", Value: float32(c.RopeTheta)},
		{Key: a + "attention.layer_norm_rms_epsilon", Value: float32(c.RMSNormEps)},
	}
	if c.NumHeads > 0 && c.HeadDim != c.HiddenSize/c.NumHeads {
		meta = append(meta, gguf.KV{Key: a + "attention.key_length", Value: uint32(c.HeadDim)},
			gguf.KV{Key: a + "attention.value_length", Value: uint32(c.HeadDim)})
	}
	return meta
}

// ggufDecoderMetadata is GGUFMetadata for the Llama-style families written as arch (llama,
// qwen2, qwen3, qwen3moe; Mistral as llama): ggufBaseMetadata, llama's vocab_size and
// rope.dimension_count, a linear RoPE scaling, the experts' keys (GGUFMoEMetadata), and a
// llama3 rope_scaling's per-frequency divisors (rope_freqs.weight).
func ggufDecoderMetadata(c *Config, arch string) (meta []gguf.KV, vectors []GGUFVector, err error) {
	meta = ggufBaseMetadata(c, arch)
	a := arch + "."
	if arch == "llama" {
		meta = append(meta, gguf.KV{Key: a + "vocab_size", Value: uint32(c.VocabSize)},
			gguf.KV{Key: a + "rope.dimension_count", Value: uint32(c.HeadDim)})
	}
	factors := c.RopeFreqFactors
	if rs := c.RopeScaling; rs != nil {
		switch rs.Kind() {
		case "linear":
			meta = append(meta, gguf.KV{Key: a + "rope.scaling.type", Value: "linear"},
				gguf.KV{Key: a + "rope.scaling.factor", Value: float32(rs.Factor)})
		case "llama3":
			factors = kernels.NewRope(c.HeadDim, c.RopeTheta).Llama3Factors(rs.Factor, rs.LowFreqFactor, rs.HighFreqFactor, rs.OriginalMaxPositionEmbeddings)
		case "default", "":
		default:
			return nil, nil, fmt.Errorf("model: rope_scaling %q has no GGUF form", rs.Kind())
		}
	}
	moe, err := GGUFMoEMetadata(c)
	if err != nil {
		return nil, nil, err
	}
	meta = append(meta, moe...)
	if factors != nil {
		v := GGUFVector{Name: ggufRopeFreqs}
		for _, f := range factors {
			v.Values = append(v.Values, float32(f))
		}
		vectors = append(vectors, v)
	}
	return meta, vectors, nil
}

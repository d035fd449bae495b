package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/tokenizer"
)

// A Family is one architecture family Hone runs: how its config.json and its GGUF metadata
// read into a Config, how a Config of it is written as GGUF metadata, and how its block
// differs from Llama's. Each family's descriptor lives in its own file (llama.go, qwen.go,
// mistral.go, phi3.go, gemma.go, moe.go) and is listed in families; ParseConfig and
// ConfigFromGGUF look the family up by config.json's architectures (or model_type) and by
// GGUF's general.architecture. The zero value of every variation field is Llama's block.
type Family struct {
	// Arch is Hone's name of the architecture (Config.Arch).
	Arch string
	// HFArchitectures are the config.json architectures entries (transformers' model classes)
	// read as this family; HFModelTypes the model_type values, read when a config has no
	// architectures list.
	HFArchitectures, HFModelTypes []string
	// GGUFArch is the general.architecture of the llama.cpp GGUF files read as this family
	// ("": none; llama.cpp's converter writes Mistral as llama).
	GGUFArch string

	// FusedProjections: q, k and v are one matrix (qkv_proj) and gate and up another
	// (gate_up_proj), split by rows at load; LoRA adapters target the fused modules, whose
	// deltas the block adds to the parts (Phi-3).
	FusedProjections bool
	// NoOutputBias: with attention biases, q, k and v have them and o_proj has none (Qwen2).
	NoOutputBias bool
	// PermutedQK: llama.cpp's converter reorders the rows of q_proj and k_proj for its RoPE,
	// which rotates adjacent pairs (Llama, and Mistral written as llama).
	PermutedQK bool
	// GGUFVocab are the rules llama.cpp's converter applies to the family's vocabulary (its
	// model class's set_vocab), for the GGUF export.
	GGUFVocab tokenizer.GGUFVocabRules
	// ChatTemplate is the built-in chat template (chattemplate.Builtins) that models of the
	// family without one of their own get when their vocabulary has its markers; "" to go by
	// the vocabulary alone.
	ChatTemplate string

	// parseHF reads the family's config.json: every field but those ParseConfig reads for all
	// (architectures, sizes, vocabulary, tied embeddings, dtype, bos and eos ids).
	parseHF func(h *hfConfig, cfg *Config) error
	// fromGGUF reads what the family's GGUF metadata (and tensor list) adds to the keys every
	// family has (nil: nothing); ggufKeys are the {arch}.* keys it reads beyond ggufArchKeys,
	// ggufTensors the tensors it reads into the Config (not weights). ggufPartialRotary: its
	// rope.dimension_count may be less than the head size (fromGGUF checks it).
	fromGGUF          func(g *ggufConfig, c *Config) error
	ggufKeys          map[string]bool
	ggufTensors       []string
	ggufPartialRotary bool
	// ggufMetadata is the inverse of the GGUF reading, for the export (nil: no GGUF form).
	ggufMetadata func(c *Config) ([]gguf.KV, []GGUFVector, error)
}

// families is the table of architectures, in the order error messages list them. A new
// family is a file with its descriptor and an entry here (docs/architecture.md, "Adding a
// model family").
var families = []*Family{&llamaFamily, &qwen2Family, &qwen3Family, &qwen3MoEFamily, &phi3Family, &mistralFamily, &gemma2Family, &gemma3Family}

// noFamily is the descriptor of an architecture Hone does not know: Llama's block.
var noFamily = &Family{}

// Families returns the table of architectures Hone runs.
func Families() []*Family { return slices.Clone(families) }

// FamilyOf returns the family of Hone's architecture name arch, or nil.
func FamilyOf(arch string) *Family {
	for _, f := range families {
		if f.Arch == arch {
			return f
		}
	}
	return nil
}

// Family returns the family of c's architecture (a descriptor with Llama's block when Arch is
// not one Hone knows, as in a Config written by hand).
func (c *Config) Family() *Family {
	if f := FamilyOf(c.Arch); f != nil {
		return f
	}
	return noFamily
}

// familyForHF returns the family of a config.json: the first architectures entry that names
// one, or without an architectures list its model_type's.
func familyForHF(architectures []string, modelType string) *Family {
	for _, a := range architectures {
		for _, f := range families {
			if slices.Contains(f.HFArchitectures, a) {
				return f
			}
		}
	}
	if len(architectures) == 0 {
		for _, f := range families {
			if slices.Contains(f.HFModelTypes, modelType) {
				return f
			}
		}
	}
	return nil
}

// familyForGGUF returns the family of a GGUF file's general.architecture, or nil.
func familyForGGUF(arch string) *Family {
	for _, f := range families {
		if f.GGUFArch != "" && f.GGUFArch == arch {
			return f
		}
	}
	return nil
}

// familyList lists what each family gives, joined as a sentence ("a, b and c"; sep ", "
// throughout when and is false).
func familyList(names func(f *Family) []string, and bool) string {
	var all []string
	for _, f := range families {
		all = append(all, names(f)...)
	}
	if !and || len(all) < 2 {
		return strings.Join(all, ", ")
	}
	return strings.Join(all[:len(all)-1], ", ") + " and " + all[len(all)-1]
}

// unsupportedHF is ParseConfig's error for a config.json of no family.
func unsupportedHF(architectures []string, modelType string) error {
	name := strings.Join(architectures, ", ")
	if name == "" {
		name = modelType
	}
	if name == "" {
		name = "(none given)"
	}
	return fmt.Errorf("%w %s: Hone runs %s", ErrUnsupported, name, familyList(func(f *Family) []string { return f.HFArchitectures }, true))
}

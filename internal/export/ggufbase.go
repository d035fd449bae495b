package export

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/quant"
)

// A GGUF base (a model served and trained from one GGUF file, quantized or not) exports as
// GGUF only: its merged model as a GGUF file whose metadata (tokenizer included) is the base's,
// or the adapter alone as a GGUF LoRA. A Hugging Face directory would need the tokenizer.json
// and safetensors the file does not hold.

// BaseConfig is the config of a base model: a Hugging Face directory's config.json, or a GGUF
// file's metadata.
func BaseConfig(base string) (*model.Config, error) {
	if !model.IsGGUF(base) {
		return model.LoadConfig(base)
	}
	f, err := gguf.Open(base)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	defer f.Close()
	return model.ConfigFromGGUF(f)
}

// adaptedTensors lists the weights adapter a adapts, by layer and then module, with their
// Hugging Face and GGUF names in c's layout.
func adaptedTensors(c *model.Config, a *model.LoRA) ([]adaptedTensor, error) {
	if a == nil {
		return nil, nil
	}
	if len(a.Layers) != c.NumLayers {
		return nil, fmt.Errorf("export: the adapter has %d layers, the base %d", len(a.Layers), c.NumLayers)
	}
	var out []adaptedTensor
	for l, mods := range a.Layers {
		for _, m := range slices.Sorted(maps.Keys(mods)) {
			hf := fmt.Sprintf("model.layers.%d.%s.%s.weight", l, moduleBlock(m), m)
			g, _, ok := model.GGUFTensorNameFor(c, hf)
			if !ok {
				return nil, fmt.Errorf("export: adapted module %s has no llama.cpp name", hf)
			}
			out = append(out, adaptedTensor{l, m, hf, g})
		}
	}
	return out, nil
}

type adaptedTensor struct {
	layer    int
	module   string
	hf, name string // the weight's Hugging Face and GGUF names
}

// writeGGUFFromGGUF is WriteGGUF for a GGUF base: every metadata key of the base (its
// tokenizer and hyperparameters as they are) with general.file_type and general.name set,
// and its tensors in its order; an adapted weight is dequantized, merged (the adapter's
// product in the base's row order: Llama's q/k rows as llama.cpp's converter reorders them)
// and quantized again. typ "" keeps every tensor's type (an adapted one quantized back to its
// own); otherwise each tensor takes the type GGUFTensorType gives, requantized from its
// dequantized values when that differs from the base's.
func writeGGUFFromGGUF(out, base string, a *model.LoRA, typ, name string, progress Progress) error {
	f, err := gguf.Open(base)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer f.Close()
	cfg, err := model.ConfigFromGGUF(f)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	list, err := adaptedTensors(cfg, a)
	if err != nil {
		return err
	}
	adapted := map[string]adaptedTensor{}
	for _, at := range list {
		adapted[at.name] = at
	}
	var meta []gguf.KV
	hasName := false
	for _, k := range f.Metadata.Keys() {
		v, _ := f.Metadata.Get(k)
		switch {
		case k == "general.file_type" && typ != "":
			v = GGUFTypes[typ]
		case k == "general.name" && name != "":
			v, hasName = name, true
		}
		meta = append(meta, gguf.KV{Key: k, Value: v})
	}
	if name != "" && !hasName {
		meta = append(meta, gguf.KV{Key: "general.name", Value: name})
	}
	if typ != "" && !f.Metadata.Has("general.file_type") {
		meta = append(meta, gguf.KV{Key: "general.file_type", Value: GGUFTypes[typ]})
	}
	_, untied := f.Tensors["output.weight"]
	var tds []gguf.TensorData
	var written int64
	names := f.Names()
	add := func(td gguf.TensorData) {
		tds = append(tds, td)
		written += int64(len(td.Data))
		progress(len(tds), len(names), written)
	}
	if a != nil && a.HeadTokens != nil && !a.TiedTokens() && !untied {
		return fmt.Errorf("export: the adapter has token rows of an LM head of its own, but the base's head is its embedding (tied)")
	}
	merged := 0
	for _, tn := range names {
		ti := f.Tensors[tn]
		raw, err := f.Tensor(tn)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		target := ti.Type
		if typ != "" {
			target = GGUFTensorType(typ, tn, len(ti.Dims), int(ti.Dims[0]), ggufLayer(tn), cfg.NumLayers, !untied)
		}
		rows := ggufTokenRows(a, tn)
		if rows != nil && target == ti.Type {
			// The rows quantized alone into their places; every other row keeps its bytes.
			data, err := mergeGGUFRows(raw, ti.Type, int(ti.Dims[0]), rows, tn)
			if err != nil {
				return err
			}
			add(gguf.TensorData{Name: tn, Dims: ti.Dims, Type: ti.Type, Data: data})
			continue
		}
		ad, isAdapted := adapted[tn]
		if !isAdapted && rows == nil && target == ti.Type {
			add(gguf.TensorData{Name: tn, Dims: ti.Dims, Type: ti.Type, Data: raw})
			continue
		}
		v, err := f.Float32(tn)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if rows != nil {
			cols := int(ti.Dims[0])
			if len(ti.Dims) != 2 || len(rows.Rows) != len(rows.IDs)*cols {
				return fmt.Errorf("export: tensor %s has dimensions %v, the adapter's token rows are %d wide", tn, ti.Dims, len(rows.Rows)/max(1, len(rows.IDs)))
			}
			for i, id := range rows.IDs {
				copy(v[id*cols:(id+1)*cols], rows.Rows[i*cols:(i+1)*cols])
			}
		}
		if isAdapted {
			p := a.Layers[ad.layer][ad.module]
			if len(ti.Dims) != 2 || int(ti.Dims[1]) != p.Out || int(ti.Dims[0]) != p.In {
				return fmt.Errorf("export: weight %s has dimensions %v, the adapter's module %s is %d×%d", tn, ti.Dims, ad.hf, p.Out, p.In)
			}
			// Merged in the Hugging Face row order, the same product on the same values as
			// the export from a directory (so that an f32 base gives its bytes).
			heads := model.GGUFPermutedHeads(cfg, ad.hf)
			if heads > 0 {
				if v, err = model.UnpermuteRowsFromGGUF(v, p.Out, p.In, heads); err != nil {
					return fmt.Errorf("export: %s: %w", tn, err)
				}
			}
			if _, err := a.Merge(ad.layer, ad.module, v); err != nil {
				return err
			}
			if heads > 0 {
				if v, err = model.PermuteRowsForGGUF(v, p.Out, p.In, heads); err != nil {
					return fmt.Errorf("export: %s: %w", tn, err)
				}
			}
			merged++
		}
		data, err := quant.Quantize(target, v, int(ti.Dims[0]))
		if err != nil {
			return fmt.Errorf("export: tensor %s (%s in the base): %w; choose --type f16, q8_0, q4_k or f32", tn, ti.Type, err)
		}
		add(gguf.TensorData{Name: tn, Dims: ti.Dims, Type: target, Data: data})
	}
	if merged != len(adapted) {
		return fmt.Errorf("export: merged %d of the adapter's %d modules: the base lacks some adapted weights", merged, len(adapted))
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(out)), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return gguf.WriteFile(out, meta, tds)
}

// ggufLayer is the layer of a GGUF tensor name (blk.N.…), or -1.
func ggufLayer(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	num, _, _ := strings.Cut(rest, ".")
	l, err := strconv.Atoi(num)
	if err != nil {
		return -1
	}
	return l
}

package export

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/quant"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/tokenizer"
)

// GGUFTypes are the --type values of a GGUF export, and the general.file_type llama.cpp
// records for each (LLAMA_FTYPE_ALL_F32, MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_Q4_K_M).
var GGUFTypes = map[string]uint32{"f32": 0, "f16": 1, "q8_0": 7, "q4_k": 15}

// GGUFTensorType is the type a GGUF export of the given --type gives a tensor, as llama.cpp
// picks it (ne0 is the row length, dims the number of dimensions; layer and layers locate
// a layer's tensor):
//
//   - 1-D tensors (norms, biases, rope_freqs): F32, as convert_hf_to_gguf.py keeps them.
//   - f32, f16: every 2-D weight F32 (F16), as convert_hf_to_gguf.py --outtype f32 (f16).
//   - q8_0: every 2-D weight Q8_0 (F16 when its rows are not whole blocks of 32), as
//     convert_hf_to_gguf.py --outtype q8_0.
//   - q4_k: llama-quantize's Q4_K_M mix without an importance matrix: Q4_K, except Q6_K for
//     the output (the token embedding when tied) and for attn_v and ffn_down in the layers
//     where llama.cpp "uses more bits" (the first and last eighth, every third between).
//     Rows that are not whole 256-element super-blocks take llama.cpp's fallback: Q4_K ->
//     Q5_0, Q6_K -> Q8_0 (Q8_0 directly for the output), F16 when not even 32 divides them.
//     SmolLM2's hidden size 576 is such a row length: its q/k/v/o/gate/up projections are
//     Q5_0, its tied embedding Q8_0, and only ffn_down (rows of 1536) is K-quantized.
func GGUFTensorType(typ, name string, dims, ne0, layer, layers int, tied bool) gguf.TensorType {
	if dims < 2 {
		return gguf.F32
	}
	fallback := func(t gguf.TensorType) gguf.TensorType {
		if ne0%t.BlockSize() == 0 {
			return t
		}
		switch t {
		case gguf.Q4_K:
			t = gguf.Q5_0
		case gguf.Q6_K:
			t = gguf.Q8_0
		}
		if ne0%t.BlockSize() != 0 {
			return gguf.F16
		}
		return t
	}
	switch typ {
	case "f32":
		return gguf.F32
	case "f16":
		return gguf.F16
	case "q8_0":
		return fallback(gguf.Q8_0)
	}
	moreBits := func(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }
	switch {
	case name == "output.weight" || (tied && name == "token_embd.weight"):
		if ne0%256 != 0 {
			return gguf.Q8_0
		}
		return gguf.Q6_K
	case strings.HasSuffix(name, ".attn_v.weight") && moreBits(layer, layers),
		strings.HasSuffix(name, ".ffn_down.weight") && moreBits(layer, layers):
		return fallback(gguf.Q6_K)
	}
	return fallback(gguf.Q4_K)
}

// WriteGGUF writes the base directory with adapter a merged (nil: the base as it is) as one
// GGUF file at out, as llama.cpp's convert_hf_to_gguf.py (and, for q4_k, llama-quantize
// Q4_K_M) would: general.* and {arch}.* metadata from config.json, tokenizer.* from
// tokenizer.json, the tensors under llama.cpp's names (Llama's q/k rows reordered for its
// RoPE) in the types GGUFTensorType gives. out must not exist; it appears whole or not at
// all.
//
// A GGUF base (baseDir a .gguf file) is written from itself (writeGGUFFromGGUF): its metadata,
// its tensors, the adapted ones merged; typ "" keeps its tensors' types.
func WriteGGUF(out, baseDir string, a *model.LoRA, typ, name string) error {
	return WriteGGUFProgress(out, baseDir, a, typ, name, nil)
}

// Progress is told, after each tensor a GGUF export has converted (merged, quantized), how
// many of how many it has done and the bytes written so far; the file is written after the
// last.
type Progress func(done, total int, bytes int64)

// WriteGGUFProgress is WriteGGUF telling progress (nil: nothing) about each tensor.
func WriteGGUFProgress(out, baseDir string, a *model.LoRA, typ, name string, progress Progress) error {
	if progress == nil {
		progress = func(int, int, int64) {}
	}
	fileType, ok := GGUFTypes[typ]
	if !ok && !(typ == "" && model.IsGGUF(baseDir)) {
		return fmt.Errorf("export: GGUF type %q is not one of %s", typ, ggufTypeList())
	}
	if err := checkOutFile(out); err != nil {
		return err
	}
	if model.IsGGUF(baseDir) {
		return writeGGUFFromGGUF(out, baseDir, a, typ, name, progress)
	}
	cfg, err := model.LoadConfig(baseDir)
	if err != nil {
		return err
	}
	meta, vectors, err := model.GGUFMetadata(cfg)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	tok, err := tokenizer.GGUFMetadata(baseDir, cfg.VocabSize, cfg.Family().GGUFVocab)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	head := []gguf.KV{meta[0], {Key: "general.type", Value: "model"}}
	if name != "" {
		head = append(head, gguf.KV{Key: "general.name", Value: name})
	}
	meta = append(append(head, meta[1:]...), gguf.KV{Key: "general.file_type", Value: fileType},
		gguf.KV{Key: "general.quantization_version", Value: uint32(2)})
	meta = append(meta, tok...)

	tensors, closer, err := Merged(baseDir, a)
	if err != nil {
		return err
	}
	defer closer.Close()
	tied := true
	for _, t := range tensors {
		if t.Name == "lm_head.weight" {
			tied = false
		}
	}
	type entry struct {
		layer int
		order string
		td    gguf.TensorData
	}
	var entries []entry
	var written int64
	for i := range tensors {
		t := &tensors[i]
		gname, layer, ok := model.GGUFTensorNameFor(cfg, t.Name)
		if !ok {
			return fmt.Errorf("export: tensor %s has no llama.cpp name", t.Name)
		}
		if tied && gname == "output.weight" {
			progress(i+1, len(tensors), written)
			continue
		}
		v, err := tensorF32(t)
		if err != nil {
			return err
		}
		if cfg.NormPlusOne && strings.HasSuffix(t.Name, "norm.weight") {
			// Gemma scales by 1 + weight; llama.cpp's files hold the sum (the converter adds
			// 1 in the checkpoint's own type, Hone in f32, as transformers computes it). An f32
			// tensor's values are a view of the read-only file: add into a copy.
			v = append([]float32(nil), v...)
			for i := range v {
				v[i]++
			}
		}
		rows, cols := 1, len(v)
		if len(t.Shape) == 2 {
			rows, cols = t.Shape[0], t.Shape[1]
		} else if len(t.Shape) != 1 {
			return fmt.Errorf("export: tensor %s has shape %v (1-D or 2-D expected)", t.Name, t.Shape)
		}
		if heads := model.GGUFPermutedHeads(cfg, t.Name); heads > 0 {
			pr, pc := rows, cols
			if len(t.Shape) == 1 {
				pr, pc = cols, 1
			}
			if v, err = model.PermuteRowsForGGUF(v, pr, pc, heads); err != nil {
				return fmt.Errorf("export: tensor %s: %w", t.Name, err)
			}
		}
		tt := GGUFTensorType(typ, gname, len(t.Shape), cols, layer, cfg.NumLayers, tied)
		data, err := quant.Quantize(tt, v, cols)
		if err != nil {
			return fmt.Errorf("export: tensor %s: %w", t.Name, err)
		}
		dims := []uint64{uint64(cols)}
		if len(t.Shape) == 2 {
			dims = append(dims, uint64(rows))
		}
		entries = append(entries, entry{layer, gname, gguf.TensorData{Name: gname, Dims: dims, Type: tt, Data: data}})
		written += int64(len(data))
		progress(i+1, len(tensors), written)
	}
	for _, vec := range vectors {
		data, _ := quant.Quantize(gguf.F32, vec.Values, len(vec.Values))
		entries = append(entries, entry{-1, vec.Name, gguf.TensorData{Name: vec.Name,
			Dims: []uint64{uint64(len(vec.Values))}, Type: gguf.F32, Data: data}})
	}
	// llama.cpp's order: the globals first, then layer by layer.
	sort.SliceStable(entries, func(i, j int) bool {
		if entries[i].layer != entries[j].layer {
			return entries[i].layer < entries[j].layer
		}
		return entries[i].order < entries[j].order
	})
	tds := make([]gguf.TensorData, len(entries))
	for i, e := range entries {
		tds[i] = e.td
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(out)), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return gguf.WriteFile(out, meta, tds)
}

// WriteGGUFAdapter writes adapter a alone as a llama.cpp LoRA adapter GGUF at out, as
// convert_lora_to_gguf.py writes one (--outtype f32): general.type "adapter", adapter.type
// "lora", adapter.lora.alpha, and per adapted weight blk.N.<name>.weight.lora_a (A, dims
// [in, rank]) and .lora_b (B, dims [rank, out]; for Llama's q/k its rows reordered as the
// base's). llama.cpp scales by alpha/rank, so alpha is written as Scaling·rank (the same
// alpha unless the adapter uses rsLoRA). The base model's directory gives the config.
func WriteGGUFAdapter(out, baseDir string, a *model.LoRA, name string) error {
	if a == nil {
		return fmt.Errorf("export: no adapter")
	}
	if a.HasTokenRows() {
		return fmt.Errorf("export: the adapter has trainable token rows (trainable_token_indices), which a llama.cpp LoRA adapter cannot hold: export the merged model (--format gguf or hf), or train with trainable_tokens off")
	}
	if err := checkOutFile(out); err != nil {
		return err
	}
	cfg, err := BaseConfig(baseDir)
	if err != nil {
		return err
	}
	list, err := adaptedTensors(cfg, a)
	if err != nil {
		return err
	}
	// The base's GGUF architecture (a Mistral is written as llama; a GGUF base's is its
	// own): llama.cpp refuses an adapter of another one.
	arch := cfg.Arch
	if bm, _, err := model.GGUFMetadata(cfg); err == nil {
		arch, _ = bm[0].Value.(string)
	}
	meta := []gguf.KV{{Key: "general.architecture", Value: arch}, {Key: "general.type", Value: "adapter"}}
	if name != "" {
		meta = append(meta, gguf.KV{Key: "general.name", Value: name})
	}
	meta = append(meta, gguf.KV{Key: "adapter.type", Value: "lora"},
		gguf.KV{Key: "adapter.lora.alpha", Value: a.Scaling * float32(a.Rank)},
		gguf.KV{Key: "general.file_type", Value: uint32(0)},
		gguf.KV{Key: "general.quantization_version", Value: uint32(2)})
	var tds []gguf.TensorData
	for _, at := range list {
		p, hf, gname := a.Layers[at.layer][at.module], at.hf, at.name
		b := p.B
		if heads := model.GGUFPermutedHeads(cfg, hf); heads > 0 {
			if b, err = model.PermuteRowsForGGUF(b, p.Out, a.Rank, heads); err != nil {
				return fmt.Errorf("export: %s: %w", hf, err)
			}
		}
		da, _ := quant.Quantize(gguf.F32, p.A, p.In)
		db, _ := quant.Quantize(gguf.F32, b, a.Rank)
		tds = append(tds,
			gguf.TensorData{Name: gname + ".lora_a", Dims: []uint64{uint64(p.In), uint64(a.Rank)}, Type: gguf.F32, Data: da},
			gguf.TensorData{Name: gname + ".lora_b", Dims: []uint64{uint64(a.Rank), uint64(p.Out)}, Type: gguf.F32, Data: db})
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(out)), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return gguf.WriteFile(out, meta, tds)
}

// moduleBlock is the submodule (self_attn or mlp) of a LoRA target module.
func moduleBlock(m string) string {
	switch m {
	case "gate_proj", "up_proj", "down_proj":
		return "mlp"
	}
	return "self_attn"
}

// tensorF32 decodes a safetensors tensor (F32, BF16 or F16) to float32s.
func tensorF32(t *safetensors.Tensor) ([]float32, error) {
	switch t.DType {
	case safetensors.F32:
		return t.F32()
	case safetensors.BF16, safetensors.F16:
		h, err := t.U16()
		if err != nil {
			return nil, fmt.Errorf("export: tensor %s: %w", t.Name, err)
		}
		half := gemm.BF16
		if t.DType == safetensors.F16 {
			half = gemm.F16
		}
		v := make([]float32, len(h))
		half.Decode(v, h)
		return v, nil
	}
	return nil, fmt.Errorf("export: tensor %s has dtype %s (want F32, BF16 or F16)", t.Name, t.DType)
}

// checkOutFile refuses an output file that exists.
func checkOutFile(out string) error {
	if out == "" {
		return fmt.Errorf("export: no output file")
	}
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("export: %s exists; give a new file name", out)
	}
	return nil
}

func ggufTypeList() string {
	names := make([]string, 0, len(GGUFTypes))
	for n := range GGUFTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Package export writes a trained model as a Hugging Face model directory: a base model
// directory with a LoRA adapter merged into its weights (W' = W + scaling·B·A), which
// transformers, vLLM, llama.cpp's converter and Hone itself load as a plain model.
//
// It works on the base's safetensors tensors, not on a loaded model.Model: every tensor is
// written under the name and in the dtype it was stored with (norms, biases, a tied model's
// single embedding), and only the adapted projections are decoded, merged in f32 and encoded
// back to their dtype (F32, BF16 or F16, rounded to nearest even). It sits beside
// internal/model (which it uses for the adapter and the config) rather than in it, because
// writing directories and copying tokenizer files is not the engine's business.
package export

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/safetensors"
)

// CopiedFiles are the base directory's files copied unchanged, when present (config.json
// must be).
var CopiedFiles = []string{"config.json", "generation_config.json", "tokenizer.json",
	"tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"}

// ErrOutNotEmpty is returned when the output directory exists and holds files.
var ErrOutNotEmpty = errors.New("export: the output directory exists and is not empty")

// Merged returns the base directory's tensors with adapter a merged into the projections it
// adapts. Unchanged tensors are views of the base's mapped files, valid until the returned
// closer is closed. A nil adapter returns the base's tensors as they are.
func Merged(baseDir string, a *model.LoRA) ([]safetensors.Tensor, io.Closer, error) {
	if model.IsGGUF(baseDir) {
		return nil, nil, fmt.Errorf("export: the base %s is a GGUF file; export needs a Hugging Face directory (config.json and safetensors)", baseDir)
	}
	cfg, err := model.LoadConfig(baseDir)
	if err != nil {
		return nil, nil, err
	}
	if a != nil && len(a.Layers) != cfg.NumLayers {
		return nil, nil, fmt.Errorf("export: the adapter has %d layers, the base %d", len(a.Layers), cfg.NumLayers)
	}
	f, err := safetensors.OpenDir(baseDir)
	if err != nil {
		return nil, nil, fmt.Errorf("export: %w", err)
	}
	var out []safetensors.Tensor
	merged, embedRows := 0, false
	for _, name := range f.Names() {
		t, _ := f.Tensor(name)
		if rows := tokenRowsFor(a, name); rows != nil {
			m, err := mergeTokenRows(t, rows)
			if err != nil {
				f.Close()
				return nil, nil, err
			}
			out = append(out, m)
			embedRows = embedRows || rows == a.EmbedTokens
			continue
		}
		layer, module, ok := projection(name)
		if ok && a != nil && layer < len(a.Layers) && a.Layers[layer][module] != nil {
			m, err := mergeTensor(t, a, layer, module)
			if err != nil {
				f.Close()
				return nil, nil, err
			}
			out = append(out, m)
			merged++
			continue
		}
		out = append(out, *t)
	}
	if a != nil {
		want := 0
		for _, mods := range a.Layers {
			want += len(mods)
		}
		if merged != want {
			f.Close()
			return nil, nil, fmt.Errorf("export: merged %d of the adapter's %d modules: the base lacks some adapted weights", merged, want)
		}
		if err := checkRowsMerged(a, embedRows, out); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	return out, f, nil
}

// projection parses model.layers.<l>.(self_attn|mlp).<module>.weight.
func projection(name string) (layer int, module string, ok bool) {
	rest, found := strings.CutPrefix(name, "model.layers.")
	if !found {
		return 0, "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 4 || (parts[1] != "self_attn" && parts[1] != "mlp") || parts[3] != "weight" {
		return 0, "", false
	}
	l, err := strconv.Atoi(parts[0])
	if err != nil || l < 0 {
		return 0, "", false
	}
	return l, parts[2], true
}

// mergeTensor is t with the adapter's module of layer merged in, in t's dtype.
func mergeTensor(t *safetensors.Tensor, a *model.LoRA, layer int, module string) (safetensors.Tensor, error) {
	p := a.Layers[layer][module]
	if len(t.Shape) != 2 || t.Shape[0] != p.Out || t.Shape[1] != p.In {
		return safetensors.Tensor{}, fmt.Errorf("export: weight %s has shape %v, the adapter's module is %d×%d", t.Name, t.Shape, p.Out, p.In)
	}
	var w []float32
	var half gemm.Half
	switch t.DType {
	case safetensors.F32:
		v, err := t.F32()
		if err != nil {
			return safetensors.Tensor{}, fmt.Errorf("export: weight %s: %w", t.Name, err)
		}
		w = append([]float32(nil), v...)
	case safetensors.BF16, safetensors.F16:
		half = gemm.BF16
		if t.DType == safetensors.F16 {
			half = gemm.F16
		}
		v, err := t.U16()
		if err != nil {
			return safetensors.Tensor{}, fmt.Errorf("export: weight %s: %w", t.Name, err)
		}
		w = make([]float32, len(v))
		half.Decode(w, v)
	default:
		return safetensors.Tensor{}, fmt.Errorf("export: weight %s has dtype %s (want F32, BF16 or F16)", t.Name, t.DType)
	}
	if _, err := a.Merge(layer, module, w); err != nil {
		return safetensors.Tensor{}, err
	}
	if t.DType == safetensors.F32 {
		return safetensors.FromF32(t.Name, t.Shape, w), nil
	}
	h := make([]uint16, len(w))
	half.Encode(h, w)
	return safetensors.FromU16(t.Name, t.DType, t.Shape, h), nil
}

// Write writes the base directory with adapter a merged (nil: the base as it is) to out as a
// Hugging Face model directory: the CopiedFiles present in the base and model.safetensors
// (one file, every tensor under its Hugging Face name and the base's dtype). out must not
// exist or be an empty directory; it appears whole or not at all (everything is written into
// a temporary directory beside it, synced, and renamed).
func Write(out, baseDir string, a *model.LoRA) error {
	if err := checkOut(out); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(baseDir, "config.json")); err != nil && !model.IsGGUF(baseDir) {
		return fmt.Errorf("export: the base %s is not a model directory (no config.json)", baseDir)
	}
	tensors, closer, err := Merged(baseDir, a)
	if err != nil {
		return err
	}
	defer closer.Close()
	parent := filepath.Dir(filepath.Clean(out))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-"+filepath.Base(out)+"-*")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	for _, name := range CopiedFiles {
		data, err := os.ReadFile(filepath.Join(baseDir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := safetensors.WriteFileAtomic(filepath.Join(tmp, name), data, 0o644); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	if err := safetensors.Write(filepath.Join(tmp, "model.safetensors"), tensors, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	// An empty out (checked above) is replaced; rename(2) would also take it on Linux, but
	// not everywhere.
	if err := os.Remove(out); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("export: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if d, err := os.Open(parent); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// checkOut refuses an output path that exists and is not an empty directory.
func checkOut(out string) error {
	if out == "" {
		return fmt.Errorf("export: no output directory")
	}
	st, err := os.Stat(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("export: %s exists and is not a directory", out)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("%w: %s", ErrOutNotEmpty, out)
	}
	return nil
}

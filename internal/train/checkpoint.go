package train

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/safetensors"
)

// peftTensor is PEFT's name of one adapter matrix.
func peftTensor(layer int, module, ab string) string {
	block := "self_attn"
	switch module {
	case "gate_proj", "up_proj", "down_proj", "gate_up_proj":
		block = "mlp"
	}
	return fmt.Sprintf("base_model.model.model.layers.%d.%s.%s.lora_%s.weight", layer, block, module, ab)
}

// Checkpoint is what SaveCheckpoint writes besides the adapter.
type Checkpoint struct {
	BaseModel string  // base_model_name_or_path
	Dropout   float64 // lora_dropout recorded in the config
	Optimizer *AdamW  // saved beside the adapter when not nil
	// Files are more files of the directory (name → contents), written with the rest.
	Files map[string][]byte
}

// SaveCheckpoint writes adapter a to dir in PEFT's layout — adapter_config.json and
// adapter_model.safetensors (f32, PEFT's tensor names) — plus the optimizer state, so that
// HF peft, Hone's inference engine (model.LoadLoRA) and the next training step read it. The
// directory appears whole or not at all: everything is written into a temporary directory
// beside it, synced, and renamed; an existing dir is replaced.
func SaveCheckpoint(dir string, a *model.LoRA, c Checkpoint) error {
	if err := CheckFinite(a); err != nil { // never write an adapter that cannot be served
		return err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-"+filepath.Base(dir)+"-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var ts []safetensors.Tensor
	for l, layer := range a.Layers {
		for _, mod := range model.AllModules {
			p := layer[mod]
			if p == nil {
				continue
			}
			ts = append(ts, safetensors.FromF32(peftTensor(l, mod, "A"), []int{a.Rank, p.In}, p.A),
				safetensors.FromF32(peftTensor(l, mod, "B"), []int{p.Out, a.Rank}, p.B))
		}
	}
	// Token rows as PEFT's TrainableTokensWrapper saves them: the embedding's (which a tied
	// LM head shares) and an untied head's, named by trainable_token_indices.
	var indices model.TokenIndices
	if t := a.EmbedTokens; t != nil {
		ts = append(ts, safetensors.FromF32(model.PeftEmbedTokens, []int{len(t.IDs), len(t.Rows) / len(t.IDs)}, t.Rows))
		indices = model.TokenIndices{"embed_tokens": t.IDs}
	}
	if t := a.HeadTokens; t != nil && !a.TiedTokens() {
		ts = append(ts, safetensors.FromF32(model.PeftHeadTokens, []int{len(t.IDs), len(t.Rows) / len(t.IDs)}, t.Rows))
		if indices == nil {
			indices = model.TokenIndices{}
		}
		indices["lm_head"] = t.IDs
	}
	if err := safetensors.Write(filepath.Join(tmp, "adapter_model.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	cfg := model.AdapterConfig{PeftType: "LORA", TaskType: "CAUSAL_LM", BaseModelNameOrPath: c.BaseModel,
		R: a.Rank, LoraAlpha: a.Alpha, LoraDropout: c.Dropout, TargetModules: a.Targets, Bias: "none",
		InferenceMode: true, InitLoraWeights: true, TrainableTokenIndices: indices}
	js, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := safetensors.WriteFileAtomic(filepath.Join(tmp, "adapter_config.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if c.Optimizer != nil && c.Optimizer.m != nil {
		if err := c.Optimizer.Save(tmp); err != nil {
			return err
		}
	}
	for name, data := range c.Files {
		if !filepath.IsLocal(name) || filepath.Base(name) != name {
			return fmt.Errorf("train: checkpoint file name %q", name)
		}
		if err := safetensors.WriteFileAtomic(filepath.Join(tmp, name), data, 0o644); err != nil {
			return err
		}
	}
	old := ""
	if _, err := os.Stat(dir); err == nil {
		old = dir + ".old"
		os.RemoveAll(old)
		if err := os.Rename(dir, old); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			os.Rename(old, dir)
		}
		return err
	}
	if old != "" {
		os.RemoveAll(old)
	}
	if d, err := os.Open(parent); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// LoadCheckpoint reads an adapter (and its optimizer state, nil when absent) for training.
func LoadCheckpoint(dir string, cfg *model.Config) (*model.LoRA, *AdamW, error) {
	a, err := model.LoadLoRA(dir, cfg)
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, optimizerFile)); err != nil {
		return a, nil, nil
	}
	o, err := LoadAdamW(dir, a)
	if err != nil {
		return nil, nil, err
	}
	return a, o, nil
}

package model

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/safetensors"
)

// LoRA is a low-rank adapter in PEFT's layout: for each adapted module of each layer,
// y += Scaling · (x·Aᵀ)·Bᵀ with A (Rank × In) and B (Out × Rank).
type LoRA struct {
	Name    string
	Rank    int
	Alpha   float64
	Scaling float32
	// Targets are the adapted modules among q_proj, k_proj, v_proj, o_proj, gate_proj,
	// up_proj, down_proj.
	Targets []string
	// Layers[l][module] is the pair of a layer's module (absent when not adapted).
	Layers []map[string]*LoRAPair
	// EmbedTokens and HeadTokens, when not nil, are trainable token rows (TokenRows) of the
	// input embedding and of the LM head. A model with tied embeddings has one set, both
	// fields pointing at it, as PEFT ties the LM head's token adapter to the embedding's.
	EmbedTokens, HeadTokens *TokenRows

	id atomic.Uint64
}

var loraIDs atomic.Uint64

// Changed gives the adapter a new CacheID: call it after changing its weights in place (a
// training step), so caches keyed by the old identity are not reused.
func (l *LoRA) Changed() { l.id.Store(loraIDs.Add(1)) }

// CacheID is a number unique to this adapter for the life of the process (never reused),
// for keys of caches that must not mix adapters, such as the KV prefix index.
func (l *LoRA) CacheID() uint64 {
	if id := l.id.Load(); id != 0 {
		return id
	}
	l.id.CompareAndSwap(0, loraIDs.Add(1))
	return l.id.Load()
}

// LoRAPair is one adapted module.
type LoRAPair struct {
	A, B    []float32 // Rank×In, Out×Rank, row-major
	In, Out int
}

// Modules are the module names a LoRA may target (Llama, Qwen; AllModules adds Phi-3's fused
// ones, TargetModules gives a model's own).
var Modules = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// ModuleShape returns the (out, in) of a module for cfg.
func ModuleShape(cfg *Config, module string) (out, in int, ok bool) {
	if cfg.Family().FusedProjections {
		return phi3ModuleShape(cfg, module)
	}
	switch module {
	case "q_proj":
		return cfg.QDim(), cfg.HiddenSize, true
	case "k_proj", "v_proj":
		return cfg.KVDim(), cfg.HiddenSize, true
	case "o_proj":
		return cfg.HiddenSize, cfg.QDim(), true
	case "gate_proj", "up_proj":
		return cfg.IntermediateSize, cfg.HiddenSize, true
	case "down_proj":
		return cfg.HiddenSize, cfg.IntermediateSize, true
	}
	return 0, 0, false
}

// AdapterConfig is PEFT's adapter_config.json (the fields Hone reads and writes).
type AdapterConfig struct {
	PeftType            string   `json:"peft_type"`
	TaskType            string   `json:"task_type"`
	BaseModelNameOrPath string   `json:"base_model_name_or_path"`
	R                   int      `json:"r"`
	LoraAlpha           float64  `json:"lora_alpha"`
	LoraDropout         float64  `json:"lora_dropout"`
	TargetModules       []string `json:"target_modules"`
	Bias                string   `json:"bias"`
	UseRSLoRA           bool     `json:"use_rslora"`
	FanInFanOut         bool     `json:"fan_in_fan_out"`
	InferenceMode       bool     `json:"inference_mode"`
	InitLoraWeights     bool     `json:"init_lora_weights"`
	ModulesToSave       []string `json:"modules_to_save"`
	LayersToTransform   []int    `json:"layers_to_transform"`
	Revision            *string  `json:"revision"`
	// TrainableTokenIndices are the tokens whose embedding and LM head rows the adapter
	// holds (TokenRows), by module.
	TrainableTokenIndices TokenIndices `json:"trainable_token_indices"`
	Layers                *int         `json:"-"`
}

// Scaling is alpha/r, or alpha/√r with rsLoRA.
func (a *AdapterConfig) Scaling() float32 {
	if a.UseRSLoRA {
		return float32(a.LoraAlpha / math.Sqrt(float64(a.R)))
	}
	return float32(a.LoraAlpha / float64(a.R))
}

var peftName = regexp.MustCompile(`^base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$`)

// LoadLoRA reads a PEFT adapter directory (adapter_config.json, adapter_model.safetensors)
// for a model of cfg; weights are kept in f32.
func LoadLoRA(dir string, cfg *Config) (*LoRA, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	if err != nil {
		return nil, fmt.Errorf("model: LoRA: %w", err)
	}
	var ac AdapterConfig
	if err := json.Unmarshal(raw, &ac); err != nil {
		return nil, fmt.Errorf("model: LoRA adapter_config.json: %w", err)
	}
	if ac.PeftType != "" && ac.PeftType != "LORA" {
		return nil, fmt.Errorf("model: adapter type %q is not supported (LORA only)", ac.PeftType)
	}
	if ac.R <= 0 {
		return nil, fmt.Errorf("model: LoRA adapter_config.json: r must be positive")
	}
	if ac.FanInFanOut {
		return nil, fmt.Errorf("model: LoRA with fan_in_fan_out is not supported")
	}
	if len(ac.ModulesToSave) > 0 {
		return nil, fmt.Errorf("model: LoRA modules_to_save %v is not supported", ac.ModulesToSave)
	}
	f, err := safetensors.Open(filepath.Join(dir, "adapter_model.safetensors"))
	if err != nil {
		return nil, fmt.Errorf("model: LoRA: %w", err)
	}
	defer f.Close()
	lo := &LoRA{Name: filepath.Base(dir), Rank: ac.R, Alpha: ac.LoraAlpha, Scaling: ac.Scaling(),
		Layers: make([]map[string]*LoRAPair, cfg.NumLayers)}
	for i := range lo.Layers {
		lo.Layers[i] = map[string]*LoRAPair{}
	}
	targets := map[string]bool{}
	tokenNames, err := lo.readTokenRows(f, &ac, cfg)
	if err != nil {
		return nil, err
	}
	for _, name := range f.Names() {
		if tokenNames[name] {
			continue
		}
		m := peftName.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("model: LoRA tensor %q is not a PEFT LoRA weight of a decoder layer", name)
		}
		layer, _ := strconv.Atoi(m[1])
		module, ab := m[3], m[4]
		out, in, ok := ModuleShape(cfg, module)
		if !ok || layer >= cfg.NumLayers || !cfg.HasModule(layer, module) {
			return nil, fmt.Errorf("model: LoRA tensor %q does not match the model", name)
		}
		want := []int{ac.R, in}
		if ab == "B" {
			want = []int{out, ac.R}
		}
		t, _ := f.Tensor(name)
		w, err := tensorWeight(t, want[0], want[1])
		if err != nil {
			return nil, fmt.Errorf("model: LoRA tensor %q %w", name, err)
		}
		vals := w.Floats()
		p := lo.Layers[layer][module]
		if p == nil {
			p = &LoRAPair{In: in, Out: out}
			lo.Layers[layer][module] = p
		}
		if len(t.Shape) != 2 || t.Shape[0] != want[0] || t.Shape[1] != want[1] {
			return nil, fmt.Errorf("model: LoRA tensor %q has shape %v, want %v", name, t.Shape, want)
		}
		if ab == "A" {
			p.A = vals
		} else {
			p.B = vals
		}
		targets[module] = true
	}
	for l, mods := range lo.Layers {
		for mod, p := range mods {
			if p.A == nil || p.B == nil {
				return nil, fmt.Errorf("model: LoRA layer %d %s lacks lora_A or lora_B", l, mod)
			}
		}
	}
	for t := range targets {
		lo.Targets = append(lo.Targets, t)
	}
	sort.Strings(lo.Targets)
	return lo, nil
}

// readTokenRows reads the trainable token rows of adapter_config.json's
// trainable_token_indices from f (PEFT's token_adapter tensors) into lo, and returns the
// names of the tensors read. The rows of an embedding tied to the LM head are both (PEFT
// saves only the embedding's); a model with an LM head of its own has rows of the embedding,
// of the head, or of both.
func (lo *LoRA) readTokenRows(f *safetensors.File, ac *AdapterConfig, cfg *Config) (map[string]bool, error) {
	names := map[string]bool{}
	for key, ids := range ac.TrainableTokenIndices {
		module, ok := tokenModule(key)
		if !ok {
			return nil, fmt.Errorf("model: LoRA trainable_token_indices names %q: Hone trains the rows of embed_tokens and lm_head", key)
		}
		name := PeftEmbedTokens
		if module == "lm_head" {
			if cfg.TieWordEmbeddings {
				return nil, fmt.Errorf("model: LoRA trainable_token_indices names lm_head, which is the embedding in this model (tied): name embed_tokens")
			}
			name = PeftHeadTokens
		}
		t, ok := f.Tensor(name)
		if !ok {
			return nil, fmt.Errorf("model: LoRA trainable_token_indices names %s but the adapter has no tensor %s", key, name)
		}
		w, err := tensorWeight(t, len(ids), cfg.HiddenSize)
		if err != nil {
			return nil, fmt.Errorf("model: LoRA tensor %q %w", name, err)
		}
		if len(t.Shape) != 2 || t.Shape[0] != len(ids) || t.Shape[1] != cfg.HiddenSize {
			return nil, fmt.Errorf("model: LoRA tensor %q has shape %v, want [%d %d]", name, t.Shape, len(ids), cfg.HiddenSize)
		}
		rows := &TokenRows{IDs: slices.Clone(ids), Rows: w.Floats()}
		if err := rows.check(cfg, module); err != nil {
			return nil, err
		}
		if module == "lm_head" {
			lo.HeadTokens = rows
		} else {
			lo.EmbedTokens = rows
			if cfg.TieWordEmbeddings {
				lo.HeadTokens = rows
			}
		}
		names[name] = true
	}
	for _, name := range []string{PeftEmbedTokens, PeftHeadTokens} {
		if _, ok := f.Tensor(name); ok && !names[name] {
			return nil, fmt.Errorf("model: LoRA tensor %q is not named by adapter_config.json's trainable_token_indices", name)
		}
	}
	return names, nil
}

// check verifies the adapter fits cfg.
func (a *LoRA) check(cfg *Config) error {
	if len(a.Layers) != cfg.NumLayers {
		return fmt.Errorf("model: LoRA %s has %d layers, the model %d", a.Name, len(a.Layers), cfg.NumLayers)
	}
	if err := a.EmbedTokens.check(cfg, "embedding"); err != nil {
		return err
	}
	return a.HeadTokens.check(cfg, "LM head")
}

// AddDelta adds the adapter's delta for module of layer l to out (rows rows of width Out):
// out += Scaling·(x·Aᵀ)·Bᵀ for the input x (rows of width In); tmp (rows × Rank) is scratch,
// allocated when nil. Nothing is added when the module is not adapted.
func (a *LoRA) AddDelta(l int, module string, x []float32, rows int, out, tmp []float32) {
	a.addDelta(l, module, x, rows, out, tmp, gemm.Sgemm)
}

// AddDeltaMany is AddDelta for training's passes of many rows: the second product, rank
// deep, on gemm's blocked path (gemm.SgemmBlocked), which the dot kernels' reductions make
// several times slower at that depth. Its sums are not AddDelta's (inference's, the same
// bits at every row count), so a pass uses one or the other throughout.
func (a *LoRA) AddDeltaMany(l int, module string, x []float32, rows int, out, tmp []float32) {
	a.addDelta(l, module, x, rows, out, tmp, gemm.SgemmBlocked)
}

// addDelta is AddDelta with the rank-deep second product done by second.
func (a *LoRA) addDelta(l int, module string, x []float32, rows int, out, tmp []float32,
	second func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)) {
	p := a.Layers[l][module]
	if p == nil {
		return
	}
	r := a.Rank
	if tmp == nil {
		tmp = make([]float32, rows*r)
	}
	gemm.Sgemm(false, true, rows, r, p.In, 1, x, p.In, p.A, p.In, 0, tmp, r)
	second(false, true, rows, p.Out, r, a.Scaling, tmp, r, p.B, r, 1, out, p.Out)
}

// Merge adds the adapter's delta for module of layer l into w, that module's weight as f32
// (Out × In, row-major, the Hugging Face layout): w += Scaling·B·A, so that x·wᵀ equals
// x·Wᵀ + Scaling·(x·Aᵀ)·Bᵀ (AddDelta) up to rounding. It reports whether the module is
// adapted (w is unchanged when not).
func (a *LoRA) Merge(l int, module string, w []float32) (bool, error) {
	if l < 0 || l >= len(a.Layers) {
		return false, nil
	}
	p := a.Layers[l][module]
	if p == nil {
		return false, nil
	}
	if len(w) != p.Out*p.In {
		return false, fmt.Errorf("model: LoRA layer %d %s is %d×%d, the weight has %d values", l, module, p.Out, p.In, len(w))
	}
	gemm.Sgemm(false, false, p.Out, p.In, a.Rank, a.Scaling, p.B, a.Rank, p.A, p.In, 1, w, p.In)
	return true, nil
}

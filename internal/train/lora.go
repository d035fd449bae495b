// Package train fine-tunes LoRA adapters on Hone's own engine: a forward pass over whole
// sequences that keeps what the backward pass needs (each layer's input, the rest recomputed
// layer by layer), the backward pass through RMSNorm, attention with RoPE and grouped-query
// heads, Qwen3's q/k norms and the SwiGLU MLP into the adapters' A and B matrices (the base
// weights stay frozen, f32 or bf16), a language-model head whose cross-entropy is computed in
// chunks of rows so the logits of a long sequence are never held at once, AdamW with
// schedules and clipping, SFT and RL (ART) losses, and PEFT-compatible checkpoints.
package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/honeai/hone/internal/model"
)

// LoRAConfig describes the adapter to train.
type LoRAConfig struct {
	Rank    int      // r (default 8)
	Alpha   float64  // lora_alpha (default 16)
	Dropout float64  // lora_dropout on the adapter's input, training only
	Targets []string // modules among q/k/v/o/gate/up/down_proj, Phi-3's qkv/o/gate_up/down_proj (default: all of the model's)
	Seed    uint64   // initialisation
}

func (c *LoRAConfig) defaults() {
	if c.Rank <= 0 {
		c.Rank = 8
	}
	if c.Alpha == 0 {
		c.Alpha = 16
	}
	if len(c.Targets) == 0 {
		c.Targets = slices.Clone(model.Modules)
	}
}

// NewLoRA makes a fresh adapter for cfg as PEFT initialises one: A uniform in ±1/√in
// (Kaiming-uniform with a=√5) and B zero, so the adapted model starts equal to the base.
func NewLoRA(cfg *model.Config, c LoRAConfig) (*model.LoRA, error) {
	defaulted := len(c.Targets) == 0
	if defaulted {
		c.Targets = model.TargetModules(cfg)
	}
	c.defaults()
	var err error
	if c.Targets, err = moeTargets(cfg, c.Targets, defaulted); err != nil {
		return nil, err
	}
	for _, t := range c.Targets {
		if _, _, ok := model.ModuleShape(cfg, t); !ok {
			return nil, fmt.Errorf("train: unknown LoRA target module %q (use %v)", t, model.TargetModules(cfg))
		}
	}
	if c.Dropout < 0 || c.Dropout >= 1 {
		return nil, fmt.Errorf("train: lora dropout must be in [0, 1), got %v", c.Dropout)
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x4c6f5241))
	a := &model.LoRA{Name: "train", Rank: c.Rank, Alpha: c.Alpha, Scaling: float32(c.Alpha / float64(c.Rank)),
		Targets: slices.Clone(c.Targets), Layers: make([]map[string]*model.LoRAPair, cfg.NumLayers)}
	for l := range a.Layers {
		a.Layers[l] = map[string]*model.LoRAPair{}
		for _, t := range model.AllModules {
			if !slices.Contains(c.Targets, t) {
				continue
			}
			out, in, _ := model.ModuleShape(cfg, t)
			p := &model.LoRAPair{In: in, Out: out, A: make([]float32, c.Rank*in), B: make([]float32, out*c.Rank)}
			bound := 1 / math.Sqrt(float64(in))
			for i := range p.A {
				p.A[i] = float32((rng.Float64()*2 - 1) * bound)
			}
			a.Layers[l][t] = p
		}
	}
	return a, nil
}

// params lists an adapter's trainable tensors in a fixed order (layer, module, A then B).
func params(a *model.LoRA) [][]float32 {
	var out [][]float32
	for _, layer := range a.Layers {
		for _, t := range model.AllModules {
			if p := layer[t]; p != nil {
				out = append(out, p.A, p.B)
			}
		}
	}
	return out
}

// Grads holds gradients shaped like an adapter.
type Grads struct {
	Layers []map[string]*model.LoRAPair
	// Embed and Head are the gradients of the adapter's token rows (EmbedTokens, HeadTokens;
	// one slice when they are tied), nil when it has none.
	Embed, Head []float32
}

// NewGrads returns zero gradients for a.
func NewGrads(a *model.LoRA) *Grads {
	g := &Grads{Layers: make([]map[string]*model.LoRAPair, len(a.Layers))}
	for l, layer := range a.Layers {
		g.Layers[l] = map[string]*model.LoRAPair{}
		for t, p := range layer {
			g.Layers[l][t] = &model.LoRAPair{In: p.In, Out: p.Out, A: make([]float32, len(p.A)), B: make([]float32, len(p.B))}
		}
	}
	if a.EmbedTokens != nil {
		g.Embed = make([]float32, len(a.EmbedTokens.Rows))
	}
	switch {
	case a.TiedTokens():
		g.Head = g.Embed
	case a.HeadTokens != nil:
		g.Head = make([]float32, len(a.HeadTokens.Rows))
	}
	return g
}

// list is every gradient: the adapter matrices' in params' order, then the token rows'
// (tokenParams' order).
func (g *Grads) list() [][]float32 {
	return append(params(&model.LoRA{Layers: g.Layers}), g.tokens()...)
}

// tokens are the token rows' gradients, each slice once.
func (g *Grads) tokens() [][]float32 {
	var out [][]float32
	if g.Embed != nil {
		out = append(out, g.Embed)
	}
	if g.Head != nil && (g.Embed == nil || &g.Head[0] != &g.Embed[0]) {
		out = append(out, g.Head)
	}
	return out
}

// Zero clears the gradients.
func (g *Grads) Zero() {
	for _, t := range g.list() {
		clear(t)
	}
}

// Norm is the global L2 norm.
func (g *Grads) Norm() float64 {
	s := 0.0
	for _, t := range g.list() {
		for _, v := range t {
			s += float64(v) * float64(v)
		}
	}
	return math.Sqrt(s)
}

// Scale multiplies every gradient by f.
func (g *Grads) Scale(f float32) {
	for _, t := range g.list() {
		for i := range t {
			t[i] *= f
		}
	}
}

// Clip scales the gradients so their global norm is at most max (max <= 0: no clipping) and
// returns the norm before clipping.
func (g *Grads) Clip(max float64) float64 {
	n := g.Norm()
	if max > 0 && n > max {
		g.Scale(float32(max / (n + 1e-6)))
	}
	return n
}

package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kernels"
	"github.com/honeai/hone/internal/quant"
)

// Qwen3-MoE (Qwen3MoeForCausalLM): Qwen3's attention (per-head q/k norms) with, on its sparse
// layers, a routed mixture of SwiGLU experts in place of the MLP:
//
//	p = softmax(h2·Wrᵀ) (in f32); the top_k experts of each token by p, their weights
//	w = p[top] (divided by their sum with norm_topk_prob); out = Σ w_k · expert_k(h2)
//
// Layer l is sparse when num_experts > 0, l is not in mlp_only_layers and (l+1) is a multiple
// of decoder_sparse_step; the other layers have the dense MLP of intermediate_size.

// qwen3MoEFamily is Qwen3-MoE (above): Qwen3's config and attention, and the experts.
var qwen3MoEFamily = Family{
	Arch:            "qwen3moe",
	HFArchitectures: []string{"Qwen3MoeForCausalLM"},
	HFModelTypes:    []string{"qwen3_moe"},
	GGUFArch:        "qwen3moe",
	ChatTemplate:    "qwen3",
	parseHF: func(h *hfConfig, cfg *Config) error {
		cfg.AttentionBias, cfg.QKNorm = h.AttentionBias, true
		if err := parseQwen(h, cfg, decoderDefaults{rmsNormEps: 1e-6, maxPositions: 32768}); err != nil {
			return err
		}
		return parseQwen3MoE(h.raw, cfg)
	},
	fromGGUF: func(g *ggufConfig, c *Config) error {
		if err := qwen3FromGGUF(g, c); err != nil {
			return err
		}
		return moeFromGGUF(g.f, c)
	},
	ggufKeys:     ggufMoEKeys,
	ggufMetadata: func(c *Config) ([]gguf.KV, []GGUFVector, error) { return ggufDecoderMetadata(c, "qwen3moe") },
}

// MoEConfig is the routed-experts part of a Config (nil for dense architectures).
type MoEConfig struct {
	NumExperts   int    // num_experts
	TopK         int    // num_experts_per_tok
	Intermediate int    // moe_intermediate_size: each expert's hidden width
	NormTopK     bool   // norm_topk_prob: the top-k weights are divided by their sum
	Sparse       []bool // per layer: routed experts (true) or the dense MLP
}

// SparseLayer reports whether layer l has routed experts instead of the dense MLP.
func (c *Config) SparseLayer(l int) bool {
	return c.MoE != nil && l >= 0 && l < len(c.MoE.Sparse) && c.MoE.Sparse[l]
}

// HasModule reports whether layer l has the LoRA target module: a sparse layer has no
// gate/up/down projections of its own (its experts are not adapted).
func (c *Config) HasModule(l int, module string) bool {
	switch module {
	case "gate_proj", "up_proj", "down_proj":
		return !c.SparseLayer(l)
	}
	return true
}

// parseQwen3MoE reads Qwen3MoeConfig's expert fields with transformers' defaults, and refuses
// a sliding window that could bind (Qwen3-MoE applies it to every layer when
// use_sliding_window is true). output_router_logits and router_aux_loss_coef only add the
// load-balancing loss of full training; they do not change the forward pass.
func parseQwen3MoE(raw map[string]json.RawMessage, cfg *Config) error {
	bad := func(format string, a ...any) error { return fmt.Errorf("model: config.json: "+format, a...) }
	num := func(key string, def int) (int, bool, error) {
		v, ok := raw[key]
		if !ok || isNullJSON(v) {
			return def, false, nil
		}
		var n int
		if err := json.Unmarshal(v, &n); err != nil {
			return 0, false, bad("%s must be an integer", key)
		}
		return n, true, nil
	}
	mc := &MoEConfig{}
	var err error
	var has, hasLocal bool
	var local int
	if mc.NumExperts, has, err = num("num_experts", 128); err != nil {
		return err
	}
	if local, hasLocal, err = num("num_local_experts", 0); err != nil {
		return err
	}
	switch {
	case hasLocal && has && local != mc.NumExperts:
		return bad("num_experts %d and num_local_experts %d differ", mc.NumExperts, local)
	case hasLocal:
		mc.NumExperts = local
	}
	if mc.TopK, _, err = num("num_experts_per_tok", 8); err != nil {
		return err
	}
	if mc.Intermediate, _, err = num("moe_intermediate_size", 768); err != nil {
		return err
	}
	step, _, err := num("decoder_sparse_step", 1)
	if err != nil {
		return err
	}
	if v, ok := raw["norm_topk_prob"]; ok && !isNullJSON(v) {
		if err := json.Unmarshal(v, &mc.NormTopK); err != nil {
			return bad("norm_topk_prob must be a boolean")
		}
	}
	var mlpOnly []int
	if v, ok := raw["mlp_only_layers"]; ok && !isNullJSON(v) {
		if err := json.Unmarshal(v, &mlpOnly); err != nil {
			return bad("mlp_only_layers must be a list of layer indices")
		}
	}
	if mc.NumExperts < 0 {
		return bad("num_experts must not be negative, got %d", mc.NumExperts)
	}
	if mc.NumExperts > 0 {
		if step < 1 {
			return bad("decoder_sparse_step must be positive, got %d", step)
		}
		if mc.TopK < 1 || mc.TopK > mc.NumExperts {
			return bad("num_experts_per_tok %d must be between 1 and num_experts %d", mc.TopK, mc.NumExperts)
		}
		if mc.Intermediate <= 0 {
			return bad("moe_intermediate_size must be positive, got %d", mc.Intermediate)
		}
	}
	mc.Sparse = make([]bool, max(cfg.NumLayers, 0))
	for l := range mc.Sparse {
		mc.Sparse[l] = mc.NumExperts > 0 && (l+1)%step == 0 && !containsInt(mlpOnly, l)
	}
	var use bool
	if v, ok := raw["use_sliding_window"]; ok && !isNullJSON(v) {
		if err := json.Unmarshal(v, &use); err != nil {
			return bad("use_sliding_window must be a boolean")
		}
	}
	if use {
		window := 4096
		if v, ok := raw["sliding_window"]; ok {
			if isNullJSON(v) {
				window = math.MaxInt
			} else if err := json.Unmarshal(v, &window); err != nil {
				return bad("sliding_window must be an integer")
			}
		}
		if window < cfg.MaxPositionEmbeddings {
			return bad("sliding_window %d (use_sliding_window is true) is not supported: Hone attends to every earlier position", window)
		}
	}
	cfg.MoE = mc
	return nil
}

// MoELayer is a sparse layer's router and experts.
type MoELayer struct {
	Router  []float32 // num_experts × hidden, f32 (mlp.gate.weight)
	Experts []Expert
}

// Expert is one SwiGLU expert: down(silu(gate(x))·up(x)).
type Expert struct {
	Gate, Up, Down Linear
	gateUp         *fused
}

// MoEBuffers are a sparse layer's working buffers for T rows (LayerBuffers.MoE). Assignments
// (a token's k-th expert, numbered t·K+k) are grouped by expert: Order lists them expert by
// expert, expert e's from Start[e] to Start[e+1], and the per-assignment buffers (X, Gate,
// Up, ExpGate, Act, Y) hold one row per assignment in that order, so each expert multiplies
// its group of rows at once and its weights are read once per pass. Slices too short are
// (re)allocated; the trainer provides them and keeps Probs, Idx, Wt, Order, Start, Gate, Up,
// ExpGate and Y for the backward pass (ExpGate set: kept).
type MoEBuffers struct {
	Probs   []float32 // T × E: the router's softmax
	Idx     []int32   // T × K: the chosen experts, by decreasing probability
	Wt      []float32 // T × K: their weights
	Order   []int32   // T·K assignments grouped by expert
	Start   []int     // E+1
	X       []float32 // T·K × hidden: the assignments' inputs
	Gate    []float32 // T·K × moe_intermediate
	Up      []float32
	ExpGate []float32 // optional: e^(−Gate), kept for training
	Act     []float32 // silu(Gate)·Up (may be Gate)
	Y       []float32 // T·K × hidden: each expert's output, before its weight
	Tmp     []float32 // T·K × 2·moe_intermediate

	next           []int           // Route's scratch
	gateUps, downs []*quant.Matrix // a decode step's routed experts' matrices (moeOneRow)
}

func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

func (mb *MoEBuffers) size(T, E, K, H, I int) {
	n := T * K
	mb.Probs, mb.Wt = grow(mb.Probs, T*E), grow(mb.Wt, n)
	mb.Idx, mb.Order, mb.Start = grow(mb.Idx, n), grow(mb.Order, n), grow(mb.Start, E+1)
	mb.X, mb.Y = grow(mb.X, n*H), grow(mb.Y, n*H)
	mb.Gate, mb.Up = grow(mb.Gate, n*I), grow(mb.Up, n*I)
	if mb.ExpGate != nil {
		mb.ExpGate = grow(mb.ExpGate, n*I)
	}
	if mb.Act == nil {
		mb.Act = mb.Gate
	} else {
		mb.Act = grow(mb.Act, n*I)
	}
	mb.Tmp = grow(mb.Tmp, n*2*I)
}

// Route computes, for T rows of h (T × hidden), the router's probabilities (softmax in f32,
// as transformers computes them whatever the weights' dtype), each row's top-k experts and
// their weights, and groups the assignments by expert (mb.Order, mb.Start).
func (ml *MoELayer) Route(mc *MoEConfig, h []float32, T, H int, mb *MoEBuffers) {
	E, K := mc.NumExperts, mc.TopK
	gemm.Sgemm(false, true, T, E, H, 1, h, H, ml.Router, H, 0, mb.Probs, E)
	kernels.ParallelFor(T, 16, func(t int) {
		p := mb.Probs[t*E : (t+1)*E]
		kernels.Softmax(p)
		idx, wt := mb.Idx[t*K:(t+1)*K], mb.Wt[t*K:(t+1)*K]
		// Top k by selection: the largest first, the lower index on ties.
		for k := range K {
			best := -1
			for e, v := range p {
				taken := false
				for _, j := range idx[:k] {
					if int(j) == e {
						taken = true
						break
					}
				}
				if !taken && (best < 0 || v > p[best]) {
					best = e
				}
			}
			idx[k], wt[k] = int32(best), p[best]
		}
		if mc.NormTopK {
			var s float32
			for _, v := range wt {
				s += v
			}
			for k := range wt {
				wt[k] /= s
			}
		}
	})
	clear(mb.Start)
	for _, e := range mb.Idx[:T*K] {
		mb.Start[e+1]++
	}
	for e := 0; e < E; e++ {
		mb.Start[e+1] += mb.Start[e]
	}
	mb.next = grow(mb.next, E)
	copy(mb.next, mb.Start[:E])
	for a, e := range mb.Idx[:T*K] {
		mb.Order[mb.next[e]] = int32(a)
		mb.next[e]++
	}
}

// moeForward adds the routed experts' output for h (T × hidden, the MLP norm's output) to the
// residual stream x. Each expert multiplies the rows routed to it as one product.
func (m *Model) moeForward(l int, h, x []float32, T int, bf16 bool, b *LayerBuffers) {
	c := &m.Config
	mc := c.MoE
	ml := m.Layers[l].MoE
	H, I, E, K := c.HiddenSize, mc.Intermediate, mc.NumExperts, mc.TopK
	if b.MoE == nil {
		b.MoE = &MoEBuffers{}
	}
	mb := b.MoE
	mb.size(T, E, K, H, I)
	ml.Route(mc, h, T, H, mb)
	// A single row: two products for all its experts (moedecode.go).
	if T != 1 || !moeOneRow(ml, mb, h, E, K, H, I) {
		m.moeExperts(ml, mb, h, T, bf16, E, K, H, I)
	}
	for j, a := range mb.Order[:T*K] {
		t := int(a) / K
		kernels.Axpy(mb.Wt[a], mb.Y[j*H:(j+1)*H], x[t*H:(t+1)*H])
	}
}

// moeExperts computes each routed row's expert output into mb.Y (in Order), each expert
// multiplying the rows routed to it as one product.
func (m *Model) moeExperts(ml *MoELayer, mb *MoEBuffers, h []float32, T int, bf16 bool, E, K, H, I int) {
	for j, a := range mb.Order[:T*K] {
		t := int(a) / K
		copy(mb.X[j*H:(j+1)*H], h[t*H:(t+1)*H])
	}
	for e := range E {
		j0, j1 := mb.Start[e], mb.Start[e+1]
		n := j1 - j0
		if n == 0 {
			continue
		}
		ex := &ml.Experts[e]
		g, u := mb.Gate[j0*I:j1*I], mb.Up[j0*I:j1*I]
		ex.gateUp.forward(bf16, mb.X[j0*H:j1*H], n, mb.Tmp, g, u)
		var eg []float32
		if mb.ExpGate != nil {
			eg = mb.ExpGate[j0*I : j1*I]
		}
		act := mb.Act[j0*I : j1*I]
		kernels.SwiGLU(act, eg, g, u)
		ex.Down.Forward(bf16, act, n, mb.Y[j0*H:j1*H], false)
	}
}

func (ml *MoELayer) prepack() {
	if ml == nil {
		return
	}
	for i := range ml.Experts {
		ml.Experts[i].gateUp.packed()
		ml.Experts[i].Down.Packed()
	}
}

// letGo makes the experts' values live in their serving packs (fused.letGo, Linear.letGo)
// and returns the bytes let go; call with packMu held.
func (ml *MoELayer) letGo() int64 {
	var n int64
	for i := range ml.Experts {
		n += ml.Experts[i].gateUp.letGo()
		n += ml.Experts[i].Down.letGo()
	}
	return n
}

// bytes is the memory the router and experts hold (packed copies included); call with packMu
// held.
func (ml *MoELayer) bytes(packed func(*gemm.PackedB)) int64 {
	if ml == nil {
		return 0
	}
	n := int64(len(ml.Router)) * 4
	for i := range ml.Experts {
		ex := &ml.Experts[i]
		for _, l := range []*Linear{&ex.Gate, &ex.Up, &ex.Down} {
			n += l.W.Bytes()
			if l.restored != nil {
				n += l.restored.Bytes()
			}
			packed(l.P)
			packed(l.pairsT)
			packed(l.pairsN)
		}
		packed(ex.gateUp.P)
		packed(ex.gateUp.pairs)
	}
	return n
}

// Hone's names for the merged expert tensors of a GGUF (3-D: experts × rows × cols), which
// Hugging Face checkpoints store one expert at a time (mlp.experts.E.gate_proj.weight).
const (
	moeGateExps = "mlp.experts.gate_proj.weight"
	moeUpExps   = "mlp.experts.up_proj.weight"
	moeDownExps = "mlp.experts.down_proj.weight"
)

func init() {
	GGUFLayerNames["mlp.gate.weight"] = "ffn_gate_inp.weight"
	GGUFLayerNames[moeGateExps] = "ffn_gate_exps.weight"
	GGUFLayerNames[moeUpExps] = "ffn_up_exps.weight"
	GGUFLayerNames[moeDownExps] = "ffn_down_exps.weight"
}

// moeLayer loads sparse layer p's router and experts: from per-expert tensors (Hugging Face)
// or from merged 3-D tensors (GGUF), each expert then a view of its slice.
func (ld *loader) moeLayer(p string, c *Config) (*MoELayer, error) {
	mc := c.MoE
	E, I, H := mc.NumExperts, mc.Intermediate, c.HiddenSize
	ml := &MoELayer{Experts: make([]Expert, E)}
	if err := ld.tensor(p+"mlp.gate.weight", E, H); err != nil {
		return nil, err
	}
	rw, err := ld.src.weight(p+"mlp.gate.weight", E, H)
	if err != nil {
		return nil, fmt.Errorf("model: weight %smlp.gate.weight %w", p, err)
	}
	ml.Router = rw.Floats() // the router stays f32: its probabilities choose the experts
	if _, ok := ld.src.shape(p + moeGateExps); ok {
		for _, part := range []struct {
			name      string
			rows, col int
			set       func(e *Expert, w Weight)
		}{
			{moeGateExps, I, H, func(e *Expert, w Weight) { e.Gate.W = w }},
			{moeUpExps, I, H, func(e *Expert, w Weight) { e.Up.W = w }},
			{moeDownExps, H, I, func(e *Expert, w Weight) { e.Down.W = w }},
		} {
			ws, err := ld.experts(p+part.name, E, part.rows, part.col)
			if err != nil {
				return nil, err
			}
			for e := range ws {
				part.set(&ml.Experts[e], ws[e])
			}
		}
	} else {
		for e := range E {
			ex := &ml.Experts[e]
			q := fmt.Sprintf("%smlp.experts.%d.", p, e)
			if ex.Gate, err = ld.linear(q+"gate_proj", I, H, false); err != nil {
				return nil, err
			}
			if ex.Up, err = ld.linear(q+"up_proj", I, H, false); err != nil {
				return nil, err
			}
			if ex.Down, err = ld.linear(q+"down_proj", H, I, false); err != nil {
				return nil, err
			}
		}
	}
	for e := range ml.Experts {
		ex := &ml.Experts[e]
		ex.gateUp = fuse(&ex.Gate, &ex.Up)
	}
	return ml, nil
}

// experts loads a merged E × rows × cols tensor as E weights, each a view of its expert's
// slice (a quantized tensor's experts are whole rows of blocks: per-expert quant.Matrix
// views of the file and of its packed copy, quant.Matrix.RowsView).
func (ld *loader) experts(name string, E, rows, cols int) ([]Weight, error) {
	if err := ld.tensor(name, E, rows, cols); err != nil {
		return nil, err
	}
	w, err := ld.src.weight(name, E*rows, cols)
	if err != nil {
		return nil, fmt.Errorf("model: weight %s %w", name, err)
	}
	out := make([]Weight, E)
	n := rows * cols
	for e := range out {
		v := Weight{Rows: rows, Cols: cols}
		switch {
		case w.Q != nil:
			v.Q = w.Q.RowsView(e*rows, (e+1)*rows) // the merged tensor's packed copy too
		case w.F32 != nil:
			v.F32 = w.F32[e*n : (e+1)*n : (e+1)*n]
		default:
			v.Half, v.Kind = w.Half[e*n:(e+1)*n:(e+1)*n], w.Kind
		}
		if ld.quantize != gguf.F32 && v.Q == nil {
			if v, err = quantizeWeight(v, ld.quantize); err != nil {
				return nil, fmt.Errorf("model: weight %s %w", name, err)
			}
		}
		switch {
		case v.Q != nil && ld.dtype == DTypeF32:
			v = Weight{Rows: rows, Cols: cols, F32: v.Floats()}
		case v.Q != nil && ld.dtype == DTypeBF16:
			v = Weight{Rows: rows, Cols: cols, Half: bf16Rows(&v), Kind: gemm.BF16}
		case v.F32 != nil && ld.dtype == DTypeBF16:
			v.Half, v.Kind = make([]uint16, len(v.F32)), gemm.BF16
			gemm.BF16.Encode(v.Half, v.F32)
			v.F32 = nil
		case v.Half != nil && ld.dtype == DTypeF32:
			v.F32, v.Half, v.Kind = v.Floats(), nil, 0
		}
		out[e] = v
	}
	if ld.quantize != gguf.F32 && w.Q == nil && !slices.ContainsFunc(out, func(v Weight) bool { return v.Q == nil }) ||
		w.Q != nil && ld.dtype != DTypeAuto { // quantized, or a GGUF's converted: the file's pages are not read again
		ld.release(name)
	}
	return out, nil
}

// ggufMoEKeys are the {arch}.* keys of llama.cpp's qwen3moe that Hone reads.
var ggufMoEKeys = map[string]bool{"expert_count": true, "expert_used_count": true, "expert_feed_forward_length": true}

// moeFromGGUF reads a qwen3moe GGUF's expert hyperparameters. llama.cpp's qwen3moe always
// normalises the top-k weights (norm_topk_prob true, as Qwen3-MoE's released configs) and has
// no dense-layer list: a layer is sparse when it has the router tensor ffn_gate_inp.
func moeFromGGUF(f *gguf.File, c *Config) error {
	md := f.Metadata
	get := func(key string) (int, error) {
		v, err := md.Uint(c.Arch + "." + key)
		if err != nil {
			return 0, fmt.Errorf("model: %w", err)
		}
		if v > math.MaxInt32 {
			return 0, fmt.Errorf("model: %s: metadata key %s.%s is %d, too large", f.Name, c.Arch, key, v)
		}
		return int(v), nil
	}
	mc := &MoEConfig{NormTopK: true, Sparse: make([]bool, c.NumLayers)}
	var err error
	if mc.NumExperts, err = get("expert_count"); err != nil {
		return err
	}
	if mc.TopK, err = get("expert_used_count"); err != nil {
		return err
	}
	if mc.Intermediate, err = get("expert_feed_forward_length"); err != nil {
		return err
	}
	if mc.NumExperts < 1 || mc.TopK < 1 || mc.TopK > mc.NumExperts || mc.Intermediate < 1 {
		return fmt.Errorf("model: %s: expert_count %d, expert_used_count %d, expert_feed_forward_length %d: want 1 ≤ used ≤ count and a positive length", f.Name, mc.NumExperts, mc.TopK, mc.Intermediate)
	}
	for l := range mc.Sparse {
		_, mc.Sparse[l] = f.Tensors[fmt.Sprintf("blk.%d.ffn_gate_inp.weight", l)]
	}
	c.MoE = mc
	return nil
}

// GGUFMoEMetadata is the qwen3moe expert metadata llama.cpp's converter writes for c (nil for
// a dense config); an error where llama.cpp's qwen3moe cannot compute c (norm_topk_prob
// false).
func GGUFMoEMetadata(c *Config) ([]gguf.KV, error) {
	if c.MoE == nil {
		return nil, nil
	}
	if !c.MoE.NormTopK {
		return nil, errors.New("model: llama.cpp's qwen3moe always normalises the top-k weights: norm_topk_prob false has no GGUF form")
	}
	a := c.Arch + "."
	return []gguf.KV{
		{Key: a + "expert_count", Value: uint32(c.MoE.NumExperts)},
		{Key: a + "expert_used_count", Value: uint32(c.MoE.TopK)},
		{Key: a + "expert_feed_forward_length", Value: uint32(c.MoE.Intermediate)},
	}, nil
}

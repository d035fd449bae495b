package model

// Phi-3 and Phi-4-mini (Phi3ForCausalLM): a Llama-style block whose q/k/v projections are one
// fused matrix (qkv_proj: the query rows, then the key rows, then the value rows) and whose
// gate and up projections are one (gate_up_proj: the gate rows, then the up rows); no biases;
// RoPE over the first partial_rotary_factor of each head (Phi-4-mini: 3/4), optionally
// LongRoPE (rope_scaling type longrope: per-frequency divisors, short_factor for sequences up
// to original_max_position_embeddings and long_factor past it, and cos/sin scaled by an
// attention factor).
//
// The fused weights are split by rows at load into Layer.Q/K/V and Gate/Up (views, no copy),
// so the forward and backward passes are the shared ones; LoRA adapters keep PEFT's Phi-3
// module names (qkv_proj, o_proj, gate_up_proj, down_proj): a qkv_proj adapter's delta is
// computed over the fused width and added to q, k and v (adaptFused), so adapters load and
// save as peft writes them.

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/honeai/hone/internal/kernels"
	"github.com/honeai/hone/internal/quant"
	"github.com/honeai/hone/internal/tokenizer"
)

// phi3RopeKeys are the RoPE dictionary keys Phi-3 reads; any other key is refused by name.
var phi3RopeKeys = []string{"rope_type", "type", "rope_theta", "partial_rotary_factor", "short_factor",
	"long_factor", "factor", "attention_factor", "original_max_position_embeddings"}

// phi3Family is Phi-3 and Phi-4-mini (above): fused projections, partial rotary dimensions,
// LongRoPE, a window on every layer.
var phi3Family = Family{
	Arch:              "phi3",
	HFArchitectures:   []string{"Phi3ForCausalLM"},
	HFModelTypes:      []string{"phi3"},
	GGUFArch:          "phi3",
	FusedProjections:  true,
	GGUFVocab:         tokenizer.GGUFVocabRules{Phi3AddedTokens: true},
	ChatTemplate:      "phi3",
	parseHF:           parsePhi3,
	fromGGUF:          phi3FromGGUF,
	ggufKeys:          phi3GGUFKeys,
	ggufTensors:       []string{ggufRopeShort, ggufRopeLong},
	ggufPartialRotary: true,
	ggufMetadata:      phi3GGUFMetadata,
}

// parsePhi3 reads Phi3Config: the Llama-style fields with its defaults
// (max_position_embeddings 4096, rms_norm_eps 1e-5), sliding_window, and RoPE (rope_theta,
// partial_rotary_factor, rope_scaling default or longrope; Phi3Config maps the legacy types
// "su" and "yarn" to longrope).
func parsePhi3(h *hfConfig, cfg *Config) error {
	if _, err := h.parseDecoder(cfg, decoderDefaults{rmsNormEps: 1e-5, maxPositions: 4096}); err != nil {
		return err
	}
	raw := h.raw
	bad := func(format string, a ...any) error {
		return fmt.Errorf("model: config.json: "+format, a...)
	}
	// Phi3Attention attends within sliding_window when it is set (every layer, as Mistral's
	// do); a window at least max_position_embeddings long never excludes a position Hone
	// accepts, so it is dropped.
	if v, ok := raw["sliding_window"]; ok && !isNullJSON(v) {
		var w int
		if err := json.Unmarshal(v, &w); err != nil || w <= 0 {
			return bad("sliding_window must be a positive integer or null")
		}
		if w < cfg.MaxPositionEmbeddings {
			cfg.SlidingWindow = w
		}
	}
	field := "rope_scaling"
	dict := raw["rope_scaling"]
	var probe map[string]json.RawMessage
	if isNullJSON(dict) || (json.Unmarshal(dict, &probe) == nil && len(probe) == 0) {
		field, dict = "rope_parameters", raw["rope_parameters"]
	}
	var params ropeParams
	if !isNullJSON(dict) {
		if err := json.Unmarshal(dict, &params); err != nil {
			return bad("%s must be an object: %w", field, err)
		}
	}
	for k := range params {
		if !slices.Contains(phi3RopeKeys, k) {
			return bad("%s.%s is not supported for Phi-3", field, k)
		}
	}
	topFloat := func(key string) (float64, bool, error) {
		v, ok := raw[key]
		if !ok || isNullJSON(v) {
			return 0, false, nil
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return 0, false, bad("%s must be a number", key)
		}
		return f, true, nil
	}
	theta, ok, err := params.float("rope_theta")
	if err != nil {
		return bad("%s.%v", field, err)
	}
	if !ok {
		theta = 10000
		if t, ok, err := topFloat("rope_theta"); err != nil {
			return err
		} else if ok {
			theta = t
		}
	}
	if math.IsNaN(theta) || math.IsInf(theta, 0) || theta <= 1 {
		return bad("rope_theta must be a number above 1, got %v", theta)
	}
	cfg.RopeTheta = theta
	// partial_rotary_factor: the dictionary's value, else the top-level one (Phi3Config's
	// setdefault); two different values are refused rather than one picked.
	prf, ok, err := params.float("partial_rotary_factor")
	if err != nil {
		return bad("%s.%v", field, err)
	}
	if top, tok, err := topFloat("partial_rotary_factor"); err != nil {
		return err
	} else if tok {
		if ok && top != prf {
			return bad("partial_rotary_factor %v and %s.partial_rotary_factor %v differ", top, field, prf)
		}
		prf, ok = top, true
	}
	if !ok {
		prf = 1
	}
	rot := int(float64(cfg.HeadDim) * prf)
	if math.IsNaN(prf) || prf <= 0 || prf > 1 || rot < 2 || rot%2 != 0 {
		return bad("partial_rotary_factor %v gives %d rotary dimensions of a %d-wide head (want an even number from 2 to the head size)", prf, rot, cfg.HeadDim)
	}
	if rot != cfg.HeadDim {
		cfg.RotaryDim = rot
	}
	kind, err := params.str("rope_type")
	if err != nil {
		return bad("%s.%v", field, err)
	}
	if kind == "" {
		if kind, err = params.str("type"); err != nil {
			return bad("%s.%v", field, err)
		}
	}
	switch kind {
	case "", "default":
		cfg.RopeScaling = nil
		return nil
	case "longrope", "su", "yarn": // Phi3Config turns the legacy "su" and "yarn" into longrope
	default:
		return bad("%s rope_type %q is not supported for Phi-3 (default, longrope)", field, kind)
	}
	rs := &RopeScaling{Type: "longrope"}
	for key, dst := range map[string]*[]float64{"short_factor": &rs.ShortFactor, "long_factor": &rs.LongFactor} {
		v, ok := params[key]
		if !ok || isNullJSON(v) {
			return bad("%s longrope needs %s", field, key)
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return bad("%s.%s must be a list of numbers", field, key)
		}
	}
	// Phi3Config's original_max_position_embeddings (top level, default 4096) wins over the
	// dictionary's.
	omax := 4096.0
	if v, ok, err := topFloat("original_max_position_embeddings"); err != nil {
		return err
	} else if ok {
		omax = v
	}
	if omax != math.Trunc(omax) || omax < 2 || omax > 1<<40 {
		return bad("original_max_position_embeddings must be an integer above 1")
	}
	rs.OriginalMaxPositionEmbeddings = int(omax)
	factor, ok, err := params.float("factor")
	if err != nil {
		return bad("%s.%v", field, err)
	}
	if !ok {
		factor = float64(cfg.MaxPositionEmbeddings) / omax
	}
	rs.Factor = factor
	af, ok, err := params.float("attention_factor")
	if err != nil {
		return bad("%s.%v", field, err)
	}
	if !ok {
		af = 1
		if factor > 1 {
			af = math.Sqrt(1 + math.Log(factor)/math.Log(omax))
		}
	}
	rs.AttentionFactor = af
	cfg.RopeScaling = rs
	return nil
}

// RotaryDims is how many leading dimensions of each head RoPE rotates.
func (c *Config) RotaryDims() int {
	if c.RotaryDim > 0 {
		return c.RotaryDim
	}
	return c.HeadDim
}

func (c *Config) validateLongRope() error {
	r := c.RopeScaling
	half := c.RotaryDims() / 2
	for name, f := range map[string][]float64{"short_factor": r.ShortFactor, "long_factor": r.LongFactor} {
		if len(f) != half {
			return fmt.Errorf("model: config.json: rope_scaling longrope %s has %d values, want %d (half the rotary dimensions)", name, len(f), half)
		}
		for i, v := range f {
			if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
				return fmt.Errorf("model: config.json: rope_scaling longrope %s[%d] is %v, not finite and positive", name, i, v)
			}
		}
	}
	if r.OriginalMaxPositionEmbeddings <= 0 || math.IsNaN(r.AttentionFactor) || math.IsInf(r.AttentionFactor, 0) || r.AttentionFactor <= 0 {
		return fmt.Errorf("model: config.json: rope_scaling longrope needs original_max_position_embeddings and a positive attention factor")
	}
	return nil
}

// rowRange returns rows [r0, r1) of w as a view (no copy).
func (w Weight) rowRange(r0, r1 int) Weight {
	out := Weight{Rows: r1 - r0, Cols: w.Cols, Kind: w.Kind}
	switch {
	case w.Q != nil:
		per := len(w.Q.Data) / w.Q.Rows
		out.Q = &quant.Matrix{Type: w.Q.Type, Rows: r1 - r0, Cols: w.Cols, Data: w.Q.Data[r0*per : r1*per : r1*per]}
	case w.F32 != nil:
		out.F32 = w.F32[r0*w.Cols : r1*w.Cols : r1*w.Cols]
	default:
		out.Half = w.Half[r0*w.Cols : r1*w.Cols : r1*w.Cols]
	}
	return out
}

// phi3Layer loads layer L's projections from Phi-3's fused tensors (prefix p): qkv_proj split
// into Q, K and V, gate_up_proj into Gate and Up.
func (ld *loader) phi3Layer(L *Layer, p string, c *Config) error {
	qd, kvd, H, I := c.QDim(), c.KVDim(), c.HiddenSize, c.IntermediateSize
	qkv, err := ld.matrix(p+"self_attn.qkv_proj.weight", qd+2*kvd, H)
	if err != nil {
		return err
	}
	L.Q, L.K, L.V = Linear{W: qkv.rowRange(0, qd)}, Linear{W: qkv.rowRange(qd, qd+kvd)}, Linear{W: qkv.rowRange(qd+kvd, qd+2*kvd)}
	if L.O, err = ld.linear(p+"self_attn.o_proj", H, qd, false); err != nil {
		return err
	}
	gu, err := ld.matrix(p+"mlp.gate_up_proj.weight", 2*I, H)
	if err != nil {
		return err
	}
	L.Gate, L.Up = Linear{W: gu.rowRange(0, I)}, Linear{W: gu.rowRange(I, 2*I)}
	if L.Down, err = ld.linear(p+"mlp.down_proj", H, I, false); err != nil {
		return err
	}
	L.qkv = fuse(&L.Q, &L.K, &L.V)
	L.gateUp = fuse(&L.Gate, &L.Up)
	return nil
}

// ropeVariants replaces the rotary table for partial rotary dimensions and LongRoPE: the
// short table (m.Rope) and, with LongRoPE, the long one (used by rows of sequences longer
// than original_max_position_embeddings, see RopeFor), both scaled by the attention factor.
func (m *Model) ropeVariants() {
	c := &m.Config
	rs := c.RopeScaling
	long := rs != nil && rs.Kind() == "longrope"
	if c.RotaryDim == 0 && !long {
		return
	}
	table := func(factors []float64) *kernels.Table {
		r := kernels.NewRope(c.RotaryDims(), c.RopeTheta)
		if factors != nil {
			r.DivideFreqs(factors)
		}
		t := r.Table(c.MaxPositionEmbeddings)
		if long && rs.AttentionFactor != 1 {
			t.Scale(float32(rs.AttentionFactor))
		}
		return t
	}
	if !long {
		m.Rope = table(nil)
		return
	}
	m.Rope, m.ropeLong, m.longAfter = table(rs.ShortFactor), table(rs.LongFactor), rs.OriginalMaxPositionEmbeddings
}

// RopeFor returns the rotary table of row r, whose sequence is ctx[r] positions long in this
// pass (transformers picks LongRoPE's long factors from the largest position of a forward
// call); ctx may be nil (the short table).
func (m *Model) RopeFor(base *kernels.Table, ctx []int, r int) *kernels.Table {
	if m.ropeLong != nil && ctx != nil && ctx[r] > m.longAfter {
		return m.ropeLong
	}
	return base
}

// NeedsRopeContext reports whether the rotary table depends on the sequence's length
// (LongRoPE): passes must then set LayerBuffers.Ctx.
func (m *Model) NeedsRopeContext() bool { return m.ropeLong != nil }

// rowContexts is, for each row of a batch, the length its sequence reaches in this pass (nil
// when the rotary table does not depend on it).
func (m *Model) rowContexts(steps []Step, T int) []int {
	if m.ropeLong == nil {
		return nil
	}
	ctx := make([]int, 0, T)
	for _, st := range steps {
		n := st.Seq.Len() + len(st.Tokens)
		for range st.Tokens {
			ctx = append(ctx, n)
		}
	}
	return ctx
}

// adaptFused adds the adapter delta of a fused module (Phi-3's qkv_proj or gate_up_proj) of
// layer l for the input rows in (T rows) to outs, the module's output split by columns
// (q, k, v or gate, up); tmp (at least T × the fused width) is scratch.
func (m *Model) adaptFused(ad Adapters, l int, module string, in []float32, T int, tmp []float32, outs ...[]float32) {
	if ad == nil {
		return
	}
	n := 0
	for _, o := range outs {
		n += len(o) / T
	}
	t := tmp[:T*n]
	clear(t)
	ad.AddDelta(l, module, in, t)
	kernels.ParallelFor(T, 64, func(r int) {
		c := 0
		for _, o := range outs {
			w := len(o) / T
			kernels.Add(o[r*w:(r+1)*w], t[r*n+c:r*n+c+w])
			c += w
		}
	})
}

// AllModules are every module name a LoRA of some architecture may target, in a fixed
// order: Modules, then Phi-3's fused qkv_proj and gate_up_proj.
var AllModules = append(slices.Clone(Modules), "qkv_proj", "gate_up_proj")

// phi3ModuleShape is ModuleShape for Phi-3: PEFT's module names of Phi3ForCausalLM.
func phi3ModuleShape(cfg *Config, module string) (out, in int, ok bool) {
	switch module {
	case "qkv_proj":
		return cfg.QDim() + 2*cfg.KVDim(), cfg.HiddenSize, true
	case "o_proj":
		return cfg.HiddenSize, cfg.QDim(), true
	case "gate_up_proj":
		return 2 * cfg.IntermediateSize, cfg.HiddenSize, true
	case "down_proj":
		return cfg.HiddenSize, cfg.IntermediateSize, true
	}
	return 0, 0, false
}

// TargetModules are the modules a LoRA of a cfg model may target (all of them: the default
// of training): q/k/v/o/gate/up/down_proj, or for Phi-3 qkv/o/gate_up/down_proj.
func TargetModules(cfg *Config) []string {
	var out []string
	for _, mod := range AllModules {
		if _, _, ok := ModuleShape(cfg, mod); ok {
			out = append(out, mod)
		}
	}
	return out
}

package model

import "github.com/honeai/hone/internal/kernels"

// Adapters adds low-rank (LoRA) deltas to the outputs of a layer's projections in a forward
// pass: AddDelta adds, for module (one of Modules) of layer l, the deltas of the pass's input
// rows x (rows × the module's In) to out (rows × its Out). The inference forward adds each
// step's adapter to the step's rows; the trainer adds the adapter being trained, with dropout
// on its inputs.
type Adapters interface {
	AddDelta(l int, module string, x, out []float32)
}

// LayerBuffers are the buffers one layer's forward pass (LayerForward) works in, for rows
// rows; the caller owns them. The inference forward reuses one set for every layer (H1, H2 and
// Out may then be one buffer, and Act may be Gate); the trainer keeps a set per layer as the
// activations its backward pass reads. The optional buffers (nil: not kept) are what only
// training needs.
type LayerBuffers struct {
	H1   []float32 // rows × hidden: RMSNorm(x)·AttnNorm, the input of q, k and v
	Rms1 []float32 // optional, rows: each row's RMSNorm scale 1/√(mean(x²)+eps)
	// Q (rows × QDim), K and V (rows × KVDim): the projections (adapters and biases included),
	// Q and K after the per-head norms and RoPE.
	Q, K, V []float32
	// QPre and KPre (optional, used when the layer has q/k norms): Q and K before the per-head
	// norms and RoPE.
	QPre, KPre []float32
	Attn       []float32 // rows × QDim: the attention output, written by the caller's attend
	XMid       []float32 // optional, rows × hidden: the residual stream after attention
	H2         []float32 // rows × hidden: RMSNorm(x)·MLPNorm, the input of gate and up
	Rms2       []float32 // optional, rows: the scales of that norm
	Gate, Up   []float32 // rows × intermediate
	Act        []float32 // rows × intermediate: silu(Gate)·Up, the input of down (may be Gate)
	Tmp        []float32 // scratch, rows × max(QDim+2·KVDim, 2·intermediate): fused products
	Out        []float32 // scratch, rows × hidden: a sublayer's output before the residual add
	// Ctx (optional, rows): the length of each row's sequence in this pass, which picks the
	// rotary table under LongRoPE (Model.RopeFor); nil otherwise.
	Ctx []int
	// PostAttnIn, PostMLPIn (optional, rows × hidden) and their scales PostAttnRms,
	// PostMLPRms (rows): the o and down projections' outputs before the post norms (Gemma).
	PostAttnIn, PostAttnRms, PostMLPIn, PostMLPRms []float32

	MoE *MoEBuffers // a sparse layer's routing and experts' buffers (allocated when nil)
}

// LayerForward runs layer l over x (rows × hidden, one row per position in pos) in place, the
// one definition of a transformer block for inference and training:
//
//	h1 = RMSNorm(x)·AttnNorm; q, k, v = h1·Wᵀ (+ bias, + adapters)
//	q, k = RoPE(RMSNorm_head(q, k)·QNorm/KNorm) (QKNormRoPE; the head norms: Qwen3)
//	attn = attend(q, k, v);    x += attn·Woᵀ (+ adapter)
//	h2 = RMSNorm(x)·MLPNorm;   x += (silu(h2·Wgᵀ)·(h2·Wuᵀ))·Wdᵀ (+ adapters)
//
// attend computes b.Attn from b.Q, b.K and b.V: the inference forward over its paged KV cache,
// the trainer over whole sequences. bf16 runs the projections in bf16 arithmetic (bf16
// weights only; see Linear.PairsPacked). ad may be nil.
func (m *Model) LayerForward(l int, x []float32, pos []int, bf16 bool, b *LayerBuffers, ad Adapters, attend func()) {
	c := &m.Config
	fused := c.Family().FusedProjections
	L := &m.Layers[l]
	T, H, I := len(pos), c.HiddenSize, c.IntermediateSize
	qd, kvd := c.QDim(), c.KVDim()
	eps := float32(c.RMSNormEps)
	adapt := func(module string, in, out []float32) {
		if ad != nil {
			ad.AddDelta(l, module, in, out)
		}
	}
	q, k := b.Q[:T*qd], b.K[:T*kvd]
	kernels.RMSNormRows(b.H1, b.Rms1, x, T, H, L.AttnNorm, eps)
	h := b.H1[:T*H]
	L.qkv.forward(bf16, h, T, b.Tmp, q, k, b.V)
	adapt("q_proj", h, q)
	adapt("k_proj", h, k)
	adapt("v_proj", h, b.V[:T*kvd])
	if fused {
		m.adaptFused(ad, l, "qkv_proj", h, T, b.Tmp, q, k, b.V[:T*kvd])
	}
	if L.QNorm != nil && b.QPre != nil {
		copy(b.QPre, q)
		copy(b.KPre, k)
	}
	m.qkNormRoPE(l, q, k, pos, b.Ctx)
	attend()
	residual(&L.O, "o_proj", bf16, b.Attn[:T*qd], T, x, b.Out[:T*H], adapt, postNorm{L.PostAttnNorm, b.PostAttnIn, b.PostAttnRms, eps})
	if b.XMid != nil {
		copy(b.XMid, x)
	}
	kernels.RMSNormRows(b.H2, b.Rms2, x, T, H, L.MLPNorm, eps)
	h = b.H2[:T*H]
	if L.MoE != nil {
		m.moeForward(l, h, x, T, bf16, b)
		return
	}
	g, u, act := b.Gate[:T*I], b.Up[:T*I], b.Act[:T*I]
	L.gateUp.forward(bf16, h, T, b.Tmp, g, u)
	adapt("gate_proj", h, g)
	adapt("up_proj", h, u)
	if fused {
		m.adaptFused(ad, l, "gate_up_proj", h, T, b.Tmp, g, u)
	}
	m.activate(act, g, u)
	residual(&L.Down, "down_proj", bf16, act, T, x, b.Out[:T*H], adapt, postNorm{L.PostMLPNorm, b.PostMLPIn, b.PostMLPRms, eps})
}

// residual adds lin's output for in (rows rows, with module's adapter deltas) to x, through
// out.
func residual(lin *Linear, module string, bf16 bool, in []float32, rows int, x, out []float32, adapt func(module string, in, out []float32), post postNorm) {
	lin.Forward(bf16, in, rows, out, false)
	adapt(module, in, out)
	post.apply(out, rows)
	kernels.Add(x, out)
}

// QKNormRoPE prepares layer l's queries q (rows × QDim) and keys k (rows × KVDim) for
// attention, in place: each head is normalised with the layer's per-head RMSNorm where it has
// one (Qwen3's QNorm and KNorm), then rotated for its row's position pos[r].
func (m *Model) QKNormRoPE(l int, q, k []float32, pos []int) { m.qkNormRoPE(l, q, k, pos, nil) }

// qkNormRoPE is QKNormRoPE with each row's sequence length (ctx, nil when not needed), which
// picks its rotary table (RopeFor).
func (m *Model) qkNormRoPE(l int, q, k []float32, pos, ctx []int) {
	c := &m.Config
	L := &m.Layers[l]
	hd, qd, kvd := c.HeadDim, c.QDim(), c.KVDim()
	eps := float32(c.RMSNormEps)
	rope := m.RopeAt(l)
	kernels.ParallelFor(len(pos), 16, func(r int) {
		for h := 0; h < c.NumHeads; h++ {
			head := q[r*qd+h*hd : r*qd+(h+1)*hd]
			if L.QNorm != nil {
				kernels.RMSNorm(head, head, L.QNorm, eps)
			}
			m.RopeFor(rope, ctx, r).Apply(head, pos[r])
		}
		for h := 0; h < c.NumKVHeads; h++ {
			head := k[r*kvd+h*hd : r*kvd+(h+1)*hd]
			if L.KNorm != nil {
				kernels.RMSNorm(head, head, L.KNorm, eps)
			}
			m.RopeFor(rope, ctx, r).Apply(head, pos[r])
		}
	})
}

// FinalNorm writes out = RMSNorm(x)·Norm for rows rows of x (the input of the LM head); scales,
// when not nil, receives each row's scale.
func (m *Model) FinalNorm(out, scales, x []float32, rows int) {
	kernels.RMSNormRows(out, scales, x, rows, m.Config.HiddenSize, m.Norm, float32(m.Config.RMSNormEps))
}

package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"unsafe"
	"weak"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/kernels"
	"github.com/honeai/hone/internal/model"
)

// Seq is one training sequence: Tokens, possibly several examples packed one after another,
// Segments holding the index where each example starts (nil: one example). Positions restart
// at each segment and attention never crosses one; the last token of a segment predicts
// nothing.
type Seq struct {
	Tokens   []int
	Segments []int
	// Prefix, when not nil, has one entry per segment (Segments then lists every segment's
	// start, the first at 0): the index of the segment whose tokens come before the
	// segment's own, or -1. A segment that continues a prefix attends to all of the prefix's
	// rows and to its own, its positions follow the prefix's, and its gradient reaches the
	// prefix's rows through their keys and values: sequences that start with the same
	// tokens (a prompt sampled several times) run them once. A prefix continues none.
	Prefix []int
	// Need, when not nil, says which positions' statistics (the prediction of the next
	// token) are wanted; the head computes only those, the others read 0 and get no gradient.
	Need []bool
}

// prefixRows returns, for every row, the rows [start, end) of the prefix its segment
// continues (end == start: none), and the row's position; nil without prefixes.
func (s *Seq) prefixRows(seg []int) (pre [][2]int, pos []int) {
	if s.Prefix == nil {
		return nil, nil
	}
	if len(s.Prefix) != len(s.Segments) {
		panic(fmt.Sprintf("train: %d prefixes for %d segments", len(s.Prefix), len(s.Segments)))
	}
	end := func(j int) int {
		if j+1 < len(s.Segments) {
			return s.Segments[j+1]
		}
		return len(s.Tokens)
	}
	if len(s.Segments) == 0 || s.Segments[0] != 0 {
		panic("train: with prefixes, Segments lists every segment's start, the first at 0")
	}
	pre, pos = make([][2]int, len(s.Tokens)), make([]int, len(s.Tokens))
	for j, p := range s.Prefix {
		var pr [2]int
		if p >= 0 {
			if s.Prefix[p] >= 0 || p >= j {
				panic("train: a prefix must come before the segments that continue it and continue none")
			}
			pr = [2]int{s.Segments[p], end(p)}
		}
		for r := s.Segments[j]; r < end(j); r++ {
			pre[r], pos[r] = pr, r-seg[r]+pr[1]-pr[0]
		}
	}
	return pre, pos
}

// segStarts returns, for every row, the first row of its segment.
func (s *Seq) segStarts() []int {
	out := make([]int, len(s.Tokens))
	cur, j := 0, 0
	for r := range out {
		for j < len(s.Segments) && s.Segments[j] <= r {
			cur = s.Segments[j]
			j++
		}
		out[r] = cur
	}
	return out
}

// HasTarget reports whether position t predicts a token (the next one is in its segment).
func (s *Seq) HasTarget(t int) bool {
	if t+1 >= len(s.Tokens) {
		return false
	}
	for _, b := range s.Segments {
		if b == t+1 {
			return false
		}
	}
	return true
}

// attnBlock is the number of query rows attention handles at once: a block of rows needs the
// keys up to its last row only, so causal attention does about half the work of the full
// score matrix. A variable so tests can exercise several blocks on short sequences.
var attnBlock = 128

// Trainer runs training passes of one model with one adapter.
type Trainer struct {
	M *model.Model
	A *model.LoRA // the adapter being trained
	G *Grads      // gradients accumulate here
	// ChunkRows is how many rows of logits the head computes at once (default 128: 25 MB of
	// logits for a 49,152-token vocabulary).
	ChunkRows int
	// Dropout on the adapter inputs (training passes only); Seed drives its masks.
	Dropout float64
	Seed    uint64
	// Recompute keeps only each layer's input during the forward pass and recomputes the
	// layer's activations in the backward pass: activation memory of one layer instead of all,
	// for about a third more compute.
	Recompute bool
	// BF16 runs the products with the frozen weights (projections, head; forward and
	// backward) in bf16 arithmetic with f32 accumulation, as PyTorch does for a bf16 model:
	// activations are rounded to bf16 as they enter a product. NewTrainer turns it on for
	// bf16 weights where the CPU multiplies bf16 fast (AMX; gemm.FastBF16), unless
	// HONE_TRAIN_BF16=0; HONE_TRAIN_BF16=1 turns it on for bf16 weights anywhere. The adapter
	// products, attention and the loss stay in f32.
	BF16 bool

	passes   uint64
	ar       arena // buffers of the passes, reused from one pass to the next
	headOnce sync.Once
	headT    *gemm.PackedB // the head's weight packed for the backward product
	// FrozenTokens keeps the adapter's token rows (model.TokenRows) as they are: they take
	// part in the passes but get no gradient and no update. Otherwise they are trained with
	// the adapter, at its learning rate.
	FrozenTokens bool

	// tokBase holds the base's LM head rows of the trained adapter's head tokens
	// (tokBaseIDs), for headTokens.
	tokBase    []float32
	tokBaseIDs []int
}

// NewTrainer prepares training of adapter a on m.
func NewTrainer(m *model.Model, a *model.LoRA) (*Trainer, error) {
	if len(a.Layers) != m.Config.NumLayers {
		return nil, fmt.Errorf("train: adapter has %d layers, the model %d", len(a.Layers), m.Config.NumLayers)
	}
	e := &Trainer{M: m, A: a, G: NewGrads(a), ChunkRows: 128}
	if w := m.LMHead.W; w.Q == nil && w.Kind == gemm.BF16 {
		switch os.Getenv("HONE_TRAIN_BF16") {
		case "0":
		case "1":
			e.BF16 = true
		default:
			e.BF16 = gemm.FastBF16()
		}
	}
	return e, nil
}

// TokenStats is what the head reports of each position: the log-probability of the next
// token (0 where there is none) and the entropy of the predicted distribution.
type TokenStats struct {
	Logp, Entropy []float32
}

// Logprobs runs the forward pass of s with adapter a (nil: the base model) and returns the
// per-position statistics; no gradients.
func (e *Trainer) Logprobs(s Seq, a *model.LoRA) TokenStats {
	st, _ := e.pass(s, a, nil, nil, false)
	return st
}

// ForwardBackward runs s forward with the trained adapter, asks coef for dLoss/dlogp of each
// position given the statistics (0 for no gradient; positions without a target are ignored),
// and accumulates the gradients of the adapter into e.G.
func (e *Trainer) ForwardBackward(s Seq, coef func(TokenStats) []float32) TokenStats {
	st, _ := e.pass(s, e.A, coef, nil, true)
	return st
}

// ForwardBackwardWeights is ForwardBackward with the coefficients g (dLoss/dlogp per
// position) known before the pass, as in SFT: the head's logits are computed once for both
// the statistics and the gradient, and only at positions with a non-zero coefficient.
func (e *Trainer) ForwardBackwardWeights(s Seq, g []float32) TokenStats {
	if len(g) != len(s.Tokens) {
		panic(fmt.Sprintf("train: %d coefficients for %d tokens", len(g), len(s.Tokens)))
	}
	st, _ := e.pass(s, e.A, nil, g, true)
	return st
}

// acts is one layer's forward state (the buffers of model.LayerForward, kept), recomputed from
// the layer input for the backward pass when not kept.
type acts struct {
	model.LayerBuffers
	lse              []float32            // attention: log-sum-exp of each head's row scores (head·T + row)
	gu16             []uint16             // bf16 arithmetic: gate then up rounded to bf16, kept instead of Gate and Up
	dropIn           map[string][]float32 // dropped-out adapter inputs by module
	dropMask         map[string][]float32
	pos, seg         []int
	pre              [][2]int // each row's prefix rows (Seq.Prefix); nil: none
	ar               *arena
	T                int
	layer            int
	lora             *model.LoRA
	training         bool
	seed             uint64
	dropoutRate      float64
	hd, qd, kvd, hid int
}

func (e *Trainer) pass(s Seq, a *model.LoRA, coef func(TokenStats) []float32, static []float32, backward bool) (TokenStats, error) {
	m := e.M
	c := &m.Config
	T, H := len(s.Tokens), c.HiddenSize
	if T == 0 {
		return TokenStats{}, nil
	}
	if T > m.Rope.Len() {
		panic(fmt.Sprintf("train: sequence of %d tokens is longer than the model's %d positions", T, m.Rope.Len()))
	}
	e.passes++
	ar := &e.ar
	defer ar.reset()
	seg := s.segStarts()
	pre, pos := s.prefixRows(seg)
	if pre != nil && m.NeedsRopeContext() {
		panic("train: prefixes on a model whose rotary table depends on the sequence's length")
	}
	if pos == nil {
		pos = make([]int, T)
		for r := range pos {
			pos[r] = r - seg[r]
		}
	}
	x := ar.raw(T * H)
	for r, id := range s.Tokens {
		m.EmbedRowFor(x[r*H:(r+1)*H], id, a)
	}
	// The trained adapter's embedding rows used by the sequence take their gradient from
	// dL/d(the first layer's input), which the backward pass then computes.
	embedGrad := backward && a == e.A && e.usesEmbedRows(s.Tokens)
	inputs := make([][]float32, c.NumLayers)
	kept := make([]*acts, c.NumLayers)
	spans := make([][2]int, c.NumLayers) // each kept layer's buffers in the arena
	for l := 0; l < c.NumLayers; l++ {
		if backward {
			inputs[l] = ar.clone(x)
		}
		m0 := ar.mark()
		ac := e.newActs(l, T, pos, seg, pre, a, backward)
		e.layerForward(ac, x)
		if backward && !e.Recompute {
			kept[l], spans[l] = ac, [2]int{m0, ar.mark()}
		} else {
			ar.releaseFrom(m0) // only the layer's output (in x) lives on
		}
	}
	// Final norm and the head.
	rmsF := ar.raw(T)
	xf := ar.raw(T * H)
	m.FinalNorm(xf, rmsF, x, T)
	stats := TokenStats{Logp: make([]float32, T), Entropy: make([]float32, T)}
	lse := ar.get(T)
	dxf := ar.get(T * H)
	ht := e.headTokensFor(a, backward)
	if static != nil {
		// The coefficients are known: one pass over the head gives statistics and gradient.
		e.head(s, xf, headRows(s, static), &stats, lse, static, dxf, ht)
	} else {
		e.head(s, xf, headRows(s, nil), &stats, lse, nil, nil, ht)
		if !backward {
			return stats, nil
		}
		g := coef(stats)
		for t := range g {
			if !s.HasTarget(t) || s.Need != nil && !s.Need[t] {
				g[t] = 0
			}
		}
		e.head(s, xf, headRows(s, g), nil, lse, g, dxf, ht)
	}
	if !backward {
		return stats, nil
	}
	dx := ar.raw(T * H)
	rmsNormBackward(dx, dxf, x, rmsF, T, H, m.Norm, false)
	for l := c.NumLayers - 1; l >= 0; l-- {
		m0 := ar.mark()
		ac := kept[l]
		if ac == nil {
			ac = e.newActs(l, T, pos, seg, pre, a, true)
			e.layerForward(ac, ar.clone(inputs[l]))
		}
		kept[l] = nil
		if dxin := e.layerBackward(ac, inputs[l], dx, l > 0 || embedGrad); dxin != nil {
			copy(dx, dxin)
		}
		// The layer's backward temporaries and its activations go back for the next layer.
		ar.releaseFrom(m0)
		if sp := spans[l]; sp[1] > sp[0] {
			ar.releaseRange(sp[0], sp[1])
		}
	}
	if embedGrad {
		e.embedGrad(s.Tokens, dx)
	}
	return stats, nil
}

func (e *Trainer) newActs(l, T int, pos, seg []int, pre [][2]int, a *model.LoRA, training bool) *acts {
	c := &e.M.Config
	return &acts{ar: &e.ar, T: T, layer: l, pos: pos, seg: seg, pre: pre, lora: a, training: training, seed: e.Seed ^ e.passes*0x9e3779b97f4a7c15,
		dropoutRate: e.Dropout, hd: c.HeadDim, qd: c.QDim(), kvd: c.KVDim(), hid: c.HiddenSize}
}

// dropped returns the adapter input of module for x: x itself, or x with dropout applied
// (the same mask in the forward pass and in its recomputation).
func (ac *acts) dropped(module string, x []float32) []float32 {
	if !ac.training || ac.dropoutRate <= 0 || ac.lora == nil || ac.lora.Layers[ac.layer][module] == nil {
		return x
	}
	if ac.dropIn == nil {
		ac.dropIn, ac.dropMask = map[string][]float32{}, map[string][]float32{}
	}
	if d, ok := ac.dropIn[module]; ok {
		return d
	}
	var h uint64
	for _, ch := range module {
		h = h*131 + uint64(ch)
	}
	rng := rand.New(rand.NewPCG(ac.seed, uint64(ac.layer)<<32^h))
	keep := float32(1 / (1 - ac.dropoutRate))
	mask := ac.ar.get(len(x))
	d := ac.ar.get(len(x))
	for i := range x {
		if rng.Float64() >= ac.dropoutRate {
			mask[i] = keep
			d[i] = x[i] * keep
		}
	}
	ac.dropIn[module], ac.dropMask[module] = d, mask
	return d
}

// AddDelta adds the adapter's delta of module for the input rows x to out, with dropout on x
// when training (model.Adapters).
func (ac *acts) AddDelta(l int, module string, x, out []float32) {
	if ac.lora == nil || ac.lora.Layers[l][module] == nil {
		return
	}
	ac.lora.AddDeltaMany(l, module, ac.dropped(module, x), ac.T, out, ac.ar.raw(ac.T*ac.lora.Rank))
}

// layerForward runs layer ac.layer on x (T × hidden) in place (model.LayerForward), keeping
// its activations in ac.
func (e *Trainer) layerForward(ac *acts, x []float32) {
	c := &e.M.Config
	T, H, I := ac.T, c.HiddenSize, c.IntermediateSize
	qd, kvd := ac.qd, ac.kvd
	ar := ac.ar
	b := &ac.LayerBuffers
	if e.M.Layers[ac.layer].MoE != nil {
		I, b.MoE = 0, e.newMoEBuffers(ac) // routed experts instead of the dense MLP
	}
	b.H1, b.Rms1 = ar.raw(T*H), ar.raw(T)
	b.Q, b.K, b.V = ar.raw(T*qd), ar.raw(T*kvd), ar.raw(T*kvd)
	if e.M.Layers[ac.layer].QNorm != nil {
		b.QPre, b.KPre = ar.raw(T*qd), ar.raw(T*kvd)
	}
	b.Attn = ar.raw(T * qd)
	b.Ctx = e.ropeContexts(ac)
	ac.lse = ar.raw(c.NumHeads * T)
	b.XMid = ar.raw(T * H)
	b.H2, b.Rms2 = ar.raw(T*H), ar.raw(T)
	// e^(−gate) is not kept: the backward pass computes it again with silu(g)·u (the same
	// kernel, the same bits), which holds a rows × intermediate buffer less a layer until then
	// (a 0.5B model's 512-token step: 230 MB).
	b.Gate, b.Up = ar.raw(T*I), ar.raw(T*I)
	// For the pass only: silu(g)·u is cheap to recompute from g, u and e^(−g), and the backward
	// pass does.
	b.Act, b.Tmp, b.Out = ar.raw(T*I), ar.raw(T*max(2*I, qd+2*kvd)), ar.raw(T*H)
	if e.M.Layers[ac.layer].PostAttnNorm != nil {
		b.PostAttnIn, b.PostAttnRms, b.PostMLPIn, b.PostMLPRms = ar.raw(T*H), ar.raw(T), ar.raw(T*H), ar.raw(T)
	}
	e.M.LayerForward(ac.layer, x, ac.pos, e.BF16, b, ac, func() { e.attention(ac) })
	// The normalised inputs of attention and the MLP are not kept either: the backward pass
	// normalises the layer's input and XMid again (the same call, the same bits).
	ar.drop(b.Act, b.Tmp, b.Out, b.H1, b.H2)
	b.Act, b.Tmp, b.Out, b.H1, b.H2 = nil, nil, nil, nil, nil
	// In bf16 arithmetic gate and up are kept as bf16, as a bf16 model's PyTorch step keeps
	// them (half their memory: 240 MB on a 0.5B model's 512-token step); the backward pass
	// widens them again. Their products with the weights rounded them to bf16 on the way in
	// already; the activation's own inputs take a rounding here.
	if e.BF16 && I > 0 && b.MoE == nil {
		n := T * I
		buf := ar.raw(n) // room for 2n bf16 values
		ac.gu16 = unsafe.Slice((*uint16)(unsafe.Pointer(&buf[0])), 2*n)
		gemm.ParallelRows(T, 64, func(r0, r1 int) {
			gemm.BF16.Encode(ac.gu16[r0*I:r1*I], b.Gate[r0*I:r1*I])
			gemm.BF16.Encode(ac.gu16[n+r0*I:n+r1*I], b.Up[r0*I:r1*I])
		})
		ar.drop(b.Gate, b.Up)
		b.Gate, b.Up = nil, nil
	}
	e.dropMoEScratch(ac)
}

// attnSpan is a block of query rows [r0, r1) that attention handles at once, with the keys
// it reads: the prefix rows [p0, p1) (none when equal), then the rows [c0, r1). Its score
// matrix has the prefix's columns first, then the others.
type attnSpan struct{ r0, r1, c0, p0, p1 int }

// attnSpans lists the blocks of query rows: attnBlock rows at a time, each reading the keys
// from its first row's segment start; with prefixes (Seq.Prefix), blocks stay within a
// segment.
func (ac *acts) attnSpans() []attnSpan {
	T := ac.T
	var out []attnSpan
	if ac.pre == nil {
		for r0 := 0; r0 < T; r0 += attnBlock {
			out = append(out, attnSpan{r0: r0, r1: min(r0+attnBlock, T), c0: ac.seg[r0]})
		}
		return out
	}
	for s0 := 0; s0 < T; {
		s1 := s0 + 1
		for s1 < T && ac.seg[s1] == s0 {
			s1++
		}
		for r0 := s0; r0 < s1; r0 += attnBlock {
			out = append(out, attnSpan{r0: r0, r1: min(r0+attnBlock, s1), c0: s0, p0: ac.pre[s0][0], p1: ac.pre[s0][1]})
		}
		s0 = s1
	}
	return out
}

// keyRange is the columns [lo, hi) of row r's scores in span sp that it attends to: its
// prefix's and its own segment's up to itself, within the layer's window.
func (ac *acts) keyRange(m *model.Model, sp attnSpan, r int) (lo, hi int) {
	np := sp.p1 - sp.p0
	if np == 0 {
		return max(ac.seg[r], m.WindowStart(ac.layer, r)) - sp.c0, r - sp.c0 + 1
	}
	// The prefix's positions start at 0 and the segment's follow them.
	return m.WindowStart(ac.layer, ac.pos[r]), np + r - sp.c0 + 1
}

// attention computes causal attention within segments (and the prefixes they continue), in
// blocks of rows, from ac.Q, K and V into ac.Attn; only each row's log-sum-exp is kept, and
// the backward pass recomputes the probabilities from it.
func (e *Trainer) attention(ac *acts) {
	c := &e.M.Config
	T, hd, qd, kvd := ac.T, ac.hd, ac.qd, ac.kvd
	q, k, v := ac.Q, ac.K, ac.V
	ar := ac.ar
	group := c.NumHeads / c.NumKVHeads
	scale := e.M.AttnScale()
	scratch := make([][]float32, c.NumHeads)
	spans := ac.attnSpans()
	kernels.ParallelFor(c.NumHeads, 1, func(h int) {
		g := h / group
		S := ar.raw(min(attnBlock, T) * T)
		scratch[h] = S
		// Row block [r0, r1) attends to the prefix's columns and to [c0, r1) only: S is
		// nr × (np + w) (stride T).
		for _, sp := range spans {
			r0, r1, c0, p0 := sp.r0, sp.r1, sp.c0, sp.p0
			np := sp.p1 - p0
			nr, w := r1-r0, r1-c0
			if np > 0 {
				gemm.SgemmBlocked(false, true, nr, np, hd, scale, q[r0*qd+h*hd:], qd, k[p0*kvd+g*hd:], kvd, 0, S, T)
			}
			gemm.SgemmBlocked(false, true, nr, w, hd, scale, q[r0*qd+h*hd:], qd, k[c0*kvd+g*hd:], kvd, 0, S[np:], T)
			for i := 0; i < nr; i++ {
				r := r0 + i
				row := S[i*T : i*T+np+w]
				lo, hi := ac.keyRange(e.M, sp, r)
				clear(row[:lo])
				clear(row[hi:])
				if cp := c.AttnSoftcap; cp > 0 {
					model.Softcap(row[lo:hi], nil, cp)
				}
				ac.lse[h*T+r] = softmaxLSE(row[lo:hi])
			}
			beta := float32(0)
			if np > 0 {
				gemm.Sgemm(false, false, nr, hd, np, 1, S, T, v[p0*kvd+g*hd:], kvd, 0, ac.Attn[r0*qd+h*hd:], qd)
				beta = 1
			}
			gemm.Sgemm(false, false, nr, hd, w, 1, S[np:], T, v[c0*kvd+g*hd:], kvd, beta, ac.Attn[r0*qd+h*hd:], qd)
		}
	})
	ar.drop(scratch...)
}

// linearBackward: given dy (T × out) of y = x·Wᵀ + b + s·(drop(x)·Aᵀ)·Bᵀ, accumulates the
// adapter gradients and, when dx is not nil, adds dy·W (+ the adapter's path) to dx.
func (e *Trainer) linearBackward(ac *acts, lin *model.Linear, module string, x, dy, dx []float32) {
	T := ac.T
	in, out := lin.In(), lin.Out()
	if dx != nil {
		if lin.W.Q != nil {
			// A quantized frozen base weight: tiles dequantized for the product, never the
			// whole matrix.
			lin.W.Q.MatMulAcc(dy, T, dx)
		} else if e.BF16 {
			gemm.GemmPacked(false, T, 1, dy, out, lin.PairsPacked(false), 1, dx, in)
			lin.ReleasePaired() // both directions are packed now: W's mapped pages are not read
		} else if w := lin.Dense(); w.F32 != nil {
			gemm.Sgemm(false, false, T, in, out, 1, dy, out, w.F32, in, 1, dx, in)
		} else {
			gemm.GemmHalfB(w.Kind, false, false, T, in, out, 1, dy, out, w.Half, in, 1, dx, in)
		}
	}
	if ac.lora != e.A {
		return
	}
	p := e.A.Layers[ac.layer][module]
	if p == nil {
		return
	}
	e.adapterBackward(ac, module, p, in, out, x, dy, dx)
}

// adapterBackward accumulates the gradients of adapter pair p of module (y gains
// s·(drop(x)·Aᵀ)·Bᵀ, in → out) from dy, and adds the adapter's path to dx when it is not nil.
func (e *Trainer) adapterBackward(ac *acts, module string, p *model.LoRAPair, in, out int, x, dy, dx []float32) {
	T := ac.T
	gp := e.G.Layers[ac.layer][module]
	r, s := e.A.Rank, e.A.Scaling
	xd := ac.dropped(module, x)
	xa := ac.ar.raw(T * r)
	gemm.Sgemm(false, true, T, r, in, 1, xd, in, p.A, in, 0, xa, r)
	dyB := ac.ar.raw(T * r)
	gemm.Sgemm(false, false, T, r, out, 1, dy, out, p.B, r, 0, dyB, r)
	gemm.Sgemm(true, false, out, r, T, s, dy, out, xa, r, 1, gp.B, r)
	gemm.Sgemm(true, false, r, in, T, s, dyB, r, xd, in, 1, gp.A, in)
	if dx == nil {
		return
	}
	if mask := ac.dropMask[module]; mask != nil {
		tmp := ac.ar.raw(T * in)
		gemm.Sgemm(false, false, T, in, r, s, dyB, r, p.A, in, 0, tmp, in)
		for i, v := range tmp {
			dx[i] += v * mask[i]
		}
		return
	}
	gemm.Sgemm(false, false, T, in, r, s, dyB, r, p.A, in, 1, dx, in)
}

// layerBackward takes dL/d(layer output) and returns dL/d(layer input) (nil when not
// needed), accumulating adapter gradients.
func (e *Trainer) layerBackward(ac *acts, xin, dout []float32, needInput bool) []float32 {
	m := e.M
	c := &m.Config
	L := &m.Layers[ac.layer]
	T, H, I := ac.T, c.HiddenSize, c.IntermediateSize
	hd, qd, kvd := ac.hd, ac.qd, ac.kvd
	eps := float32(c.RMSNormEps)
	// MLP: x_out = x_mid + down(silu(g)·u).
	ar := ac.ar
	var dh2 []float32
	if L.MoE != nil {
		dh2 = e.moeBackward(ac, dout) // routed experts (moe_backward.go)
	} else {
		if ac.gu16 != nil { // kept as bf16: widened for this layer's backward pass
			n := T * I
			ac.Gate, ac.Up = ar.raw(n), ar.raw(n)
			gemm.ParallelRows(T, 64, func(r0, r1 int) {
				gemm.BF16.Decode(ac.Gate[r0*I:r1*I], ac.gu16[r0*I:r1*I])
				gemm.BF16.Decode(ac.Up[r0*I:r1*I], ac.gu16[n+r0*I:n+r1*I])
			})
		}
		dmm := ar.get(T * I)
		mm := ar.raw(T * I)
		dg, du := ar.raw(T*I), ar.raw(T*I)
		if c.GeluTanh {
			geluForward(mm, ac.Gate, ac.Up)
			e.linearBackward(ac, &L.Down, "down_proj", mm, postNormBackward(ar, dout, ac.PostMLPIn, ac.PostMLPRms, L.PostMLPNorm, T, H), dmm)
			geluBackward(dg, du, dmm, ac.Gate, ac.Up, T, I)
		} else {
			eg := ar.raw(T * I)
			kernels.SwiGLU(mm, eg, ac.Gate, ac.Up)
			e.linearBackward(ac, &L.Down, "down_proj", mm, dout, dmm)
			kernels.ParallelFor(T, 16, func(r int) {
				i0, i1 := r*I, (r+1)*I
				kernels.SwiGLUBackward(dg[i0:i1], du[i0:i1], dmm[i0:i1], ac.Gate[i0:i1], ac.Up[i0:i1], eg[i0:i1])
			})
		}
		dh2 = ar.get(T * H)
		h2 := ar.raw(T * H)
		kernels.RMSNormRows(h2, nil, ac.XMid, T, H, L.MLPNorm, eps)
		e.linearBackward(ac, &L.Gate, "gate_proj", h2, dg, dh2)
		e.linearBackward(ac, &L.Up, "up_proj", h2, du, dh2)
		e.fusedBackward(ac, "gate_up_proj", h2, dh2, dg, du)
	}
	dxmid := ar.clone(dout)
	rmsNormBackward(dxmid, dh2, ac.XMid, ac.Rms2, T, H, L.MLPNorm, true)
	// Attention: x_mid = x_in + o(attn).
	dattn := ar.get(T * qd)
	e.linearBackward(ac, &L.O, "o_proj", ac.Attn, postNormBackward(ar, dxmid, ac.PostAttnIn, ac.PostAttnRms, L.PostAttnNorm, T, H), dattn)
	dq, dk, dv := ar.raw(T*qd), ar.get(T*kvd), ar.get(T*kvd)
	group := c.NumHeads / c.NumKVHeads
	scale := m.AttnScale()
	// Per query head, with the head's own dK and dV (T × hd), summed over each group after;
	// the probabilities of each block are recomputed from the scores and the kept log-sum-exp.
	dkh, dvh := make([][]float32, c.NumHeads), make([][]float32, c.NumHeads)
	spans := ac.attnSpans()
	kernels.ParallelFor(c.NumHeads, 1, func(h int) {
		g := h / group
		P, dP := ar.raw(min(attnBlock, T)*T), ar.raw(min(attnBlock, T)*T)
		var tc []float32 // tanh of the soft-capped scores of a row
		if c.AttnSoftcap > 0 {
			tc = ar.raw(T)
		}
		dkh[h], dvh[h] = ar.get(T*hd), ar.get(T*hd)
		for _, sp := range spans {
			r0, r1, c0, p0 := sp.r0, sp.r1, sp.c0, sp.p0
			np := sp.p1 - p0
			nr, w := r1-r0, r1-c0
			if np > 0 {
				gemm.SgemmBlocked(false, true, nr, np, hd, scale, ac.Q[r0*qd+h*hd:], qd, ac.K[p0*kvd+g*hd:], kvd, 0, P, T)
				gemm.SgemmBlocked(false, true, nr, np, hd, 1, dattn[r0*qd+h*hd:], qd, ac.V[p0*kvd+g*hd:], kvd, 0, dP, T)
			}
			gemm.SgemmBlocked(false, true, nr, w, hd, scale, ac.Q[r0*qd+h*hd:], qd, ac.K[c0*kvd+g*hd:], kvd, 0, P[np:], T)
			gemm.SgemmBlocked(false, true, nr, w, hd, 1, dattn[r0*qd+h*hd:], qd, ac.V[c0*kvd+g*hd:], kvd, 0, dP[np:], T)
			for i := 0; i < nr; i++ {
				r := r0 + i
				pr, dr := P[i*T:i*T+np+w], dP[i*T:i*T+np+w]
				lo, hi := ac.keyRange(m, sp, r)
				l := ac.lse[h*T+r]
				if tc != nil {
					model.Softcap(pr[lo:hi], tc[lo:hi], c.AttnSoftcap)
				}
				kernels.ExpAffine(pr[lo:hi], pr[lo:hi], 1, -l)
				dot := kernels.Dot(pr[lo:hi], dr[lo:hi])
				for j := lo; j < hi; j++ {
					dr[j] = pr[j] * (dr[j] - dot)
				}
				if tc != nil {
					for j := lo; j < hi; j++ {
						dr[j] *= 1 - tc[j]*tc[j]
					}
				}
				clear(pr[:lo])
				clear(pr[hi:])
				clear(dr[:lo])
				clear(dr[hi:])
			}
			beta := float32(0)
			if np > 0 {
				gemm.Sgemm(true, false, np, hd, nr, 1, P, T, dattn[r0*qd+h*hd:], qd, 1, dvh[h][p0*hd:], hd)
				gemm.Sgemm(false, false, nr, hd, np, scale, dP, T, ac.K[p0*kvd+g*hd:], kvd, 0, dq[r0*qd+h*hd:], qd)
				gemm.Sgemm(true, false, np, hd, nr, scale, dP, T, ac.Q[r0*qd+h*hd:], qd, 1, dkh[h][p0*hd:], hd)
				beta = 1
			}
			gemm.Sgemm(true, false, w, hd, nr, 1, P[np:], T, dattn[r0*qd+h*hd:], qd, 1, dvh[h][c0*hd:], hd)
			gemm.Sgemm(false, false, nr, hd, w, scale, dP[np:], T, ac.K[c0*kvd+g*hd:], kvd, beta, dq[r0*qd+h*hd:], qd)
			gemm.Sgemm(true, false, w, hd, nr, scale, dP[np:], T, ac.Q[r0*qd+h*hd:], qd, 1, dkh[h][c0*hd:], hd)
		}
	})
	kernels.ParallelFor(T, 64, func(r int) {
		for h := 0; h < c.NumHeads; h++ {
			g := h / group
			kernels.Add(dk[r*kvd+g*hd:r*kvd+(g+1)*hd], dkh[h][r*hd:(r+1)*hd])
			kernels.Add(dv[r*kvd+g*hd:r*kvd+(g+1)*hd], dvh[h][r*hd:(r+1)*hd])
		}
	})
	// RoPE and the q/k norms, backwards.
	rope := m.RopeAt(ac.layer)
	kernels.ParallelFor(T, 32, func(r int) {
		for h := 0; h < c.NumHeads; h++ {
			dh := dq[r*qd+h*hd : r*qd+(h+1)*hd]
			m.RopeFor(rope, ac.Ctx, r).ApplyInverse(dh, ac.pos[r])
			if L.QNorm != nil {
				headNormBackward(dh, ac.QPre[r*qd+h*hd:r*qd+(h+1)*hd], L.QNorm, eps)
			}
		}
		for h := 0; h < c.NumKVHeads; h++ {
			dh := dk[r*kvd+h*hd : r*kvd+(h+1)*hd]
			m.RopeFor(rope, ac.Ctx, r).ApplyInverse(dh, ac.pos[r])
			if L.KNorm != nil {
				headNormBackward(dh, ac.KPre[r*kvd+h*hd:r*kvd+(h+1)*hd], L.KNorm, eps)
			}
		}
	})
	var dh1 []float32
	if needInput {
		dh1 = ar.get(T * H)
	}
	h1 := ar.raw(T * H)
	kernels.RMSNormRows(h1, nil, xin, T, H, L.AttnNorm, eps)
	e.linearBackward(ac, &L.Q, "q_proj", h1, dq, dh1)
	e.linearBackward(ac, &L.K, "k_proj", h1, dk, dh1)
	e.linearBackward(ac, &L.V, "v_proj", h1, dv, dh1)
	e.fusedBackward(ac, "qkv_proj", h1, dh1, dq, dk, dv)
	if !needInput {
		return nil
	}
	dxin := dxmid
	rmsNormBackward(dxin, dh1, xin, ac.Rms1, T, H, L.AttnNorm, true)
	return dxin
}

// softmaxLSE replaces x by its softmax and returns log Σ exp(x).
func softmaxLSE(x []float32) float32 {
	mx := kernels.Max(x)
	sum := float64(kernels.ExpAffine(x, x, 1, -mx))
	kernels.Scale(x, float32(1/sum))
	return mx + float32(math.Log(sum))
}

// rmsNormBackward adds (accumulate) or writes dL/dx of y = x·r·w given dy, x and r.
func rmsNormBackward(dx, dy, x, rms []float32, rows, cols int, w []float32, accumulate bool) {
	kernels.ParallelFor(rows, 32, func(r int) {
		kernels.RMSNormBackward(dx[r*cols:(r+1)*cols], dy[r*cols:(r+1)*cols], x[r*cols:(r+1)*cols], w, float64(rms[r]), accumulate)
	})
}

// headNormBackward replaces dy (the gradient of RMSNorm(x)·w for one head) by dL/dx.
func headNormBackward(dy, x, w []float32, eps float32) {
	n := len(x)
	ss := 0.0
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	kernels.RMSNormBackward(dy, dy, x, w, 1/math.Sqrt(ss/float64(n)+float64(eps)), false)
}

// headRows lists the positions the head computes: those with a target that are needed
// (Seq.Need) and, when g is given, have a non-zero coefficient.
func headRows(s Seq, g []float32) []int {
	var rows []int
	for t := range s.Tokens {
		if !s.HasTarget(t) || s.Need != nil && !s.Need[t] || g != nil && g[t] == 0 {
			continue
		}
		rows = append(rows, t)
	}
	return rows
}

// headPacks caches, per model, the LM head's weight packed for the backward product, so
// that successive jobs on a loaded model (an RL step is one job) pack it once. The entry goes
// when the model is collected.
// rowPool holds scratch rows of the head (a vocabulary's worth of floats).
var rowPool = sync.Pool{New: func() any { return new([]float32) }}

var headPacks sync.Map // weak.Pointer[model.Model] → *headPack

type headPack struct {
	once sync.Once
	p    *gemm.PackedB
}

// headPackedT returns the head's weight packed for dlogits·W (the backward product).
func (e *Trainer) headPackedT() *gemm.PackedB {
	if e.BF16 {
		h := &e.M.LMHead
		p := h.PairsPacked(false)
		// A tied head's pages are the embedding's too: its rows are read from the head's
		// pack from now on (model.Model.EmbedRow), and the pages go (a 0.5B model's 151,936
		// rows: 272 MB).
		h.ReleasePaired()
		return p
	}
	e.headOnce.Do(func() {
		key := weak.Make(e.M)
		v, loaded := headPacks.LoadOrStore(key, &headPack{})
		if !loaded {
			runtime.AddCleanup(e.M, func(k weak.Pointer[model.Model]) { headPacks.Delete(k) }, key)
		}
		hp := v.(*headPack)
		hp.once.Do(func() {
			W := e.M.LMHead.Dense()
			if W.F32 != nil {
				hp.p = gemm.PackB(false, W.Cols, W.Rows, W.F32, W.Cols)
			} else {
				hp.p = gemm.PackHalfB(W.Kind, false, W.Cols, W.Rows, W.Half, W.Cols)
			}
		})
		e.headT = hp.p
	})
	return e.headT
}

// head computes, chunk by chunk of the given rows (gathered from xf), the log-probability of
// each next token and the entropy, and the log-sum-exp of each row into lse. With g (dL/dlogp
// per position) it also adds the rows' gradient dL/dxf into dxf, from the same logits. The
// adapter's head rows (ht) take the place of the base's in the logits, and with g their
// gradient accumulates.
func (e *Trainer) head(s Seq, xf []float32, rows []int, st *TokenStats, lse, g, dxf []float32, ht headTokens) {
	m := e.M
	if m.LMHead.W.Q != nil && tiledQuantHead {
		e.headQuant(s, xf, rows, st, lse, g, dxf, ht)
		return
	}
	H, V := m.Config.HiddenSize, m.Config.VocabSize
	chunk := max(e.ChunkRows, 1)
	n0 := min(chunk, len(rows))
	if n0 == 0 {
		return
	}
	defer e.ar.releaseFrom(e.ar.mark())
	logits := e.ar.raw(n0 * V)
	xc := e.ar.raw(n0 * H)
	var dxc []float32
	if g != nil {
		dxc = e.ar.raw(n0 * H)
	}
	var capT []float32 // final soft-capping: tanh of each capped logit
	if m.Config.FinalSoftcap > 0 {
		capT = e.ar.raw(n0 * V)
	}
	for c0 := 0; c0 < len(rows); c0 += chunk {
		rs := rows[c0:min(c0+chunk, len(rows))]
		n := len(rs)
		for i, t := range rs {
			copy(xc[i*H:(i+1)*H], xf[t*H:(t+1)*H])
		}
		m.LMHead.Forward(e.BF16, xc[:n*H], n, logits[:n*V], false)
		ht.setLogits(xc, logits, n, H, 0, V)
		if capT != nil {
			kernels.ParallelFor(n, 4, func(i int) {
				model.Softcap(logits[i*V:(i+1)*V], capT[i*V:(i+1)*V], m.Config.FinalSoftcap)
			})
		}
		kernels.ParallelFor(n, 4, func(i int) {
			t := rs[i]
			row := logits[i*V : (i+1)*V]
			tok := s.Tokens[t+1]
			if st != nil {
				mx := kernels.Max(row)
				st.Logp[t] = row[tok] - mx // completed below
				// The exponentials stay in row for the gradient.
				buf := rowPool.Get().(*[]float32)
				if cap(*buf) < len(row) {
					*buf = make([]float32, len(row))
				}
				ex := (*buf)[:len(row)]
				sum, wsum := float64(kernels.ExpAffine(ex, row, 1, -mx)), 0.0
				for j, v := range row {
					wsum += float64(ex[j]) * float64(v-mx)
				}
				copy(row, ex)
				rowPool.Put(buf)
				logZ := math.Log(sum)
				lse[t] = mx + float32(logZ)
				// H = log Z − E[z] with z relative to the max.
				st.Entropy[t] = float32(logZ - wsum/sum)
				st.Logp[t] = float32(float64(st.Logp[t]) - logZ)
				if g != nil {
					// dlogits = g·(onehot − softmax).
					kernels.Scale(row, -g[t]/float32(sum))
					row[tok] += g[t]
					softcapGrad(row, capT, i, V)
				}
				return
			}
			gi, l := g[t], lse[t]
			kernels.ExpAffine(row, row, 1, -l)
			kernels.Scale(row, -gi)
			row[tok] += gi
			softcapGrad(row, capT, i, V)
		})
		if g == nil {
			continue
		}
		if q := m.LMHead.W.Q; q != nil {
			clear(dxc[:n*H])
			q.MatMulAcc(logits[:n*V], n, dxc[:n*H])
		} else {
			gemm.GemmPacked(false, n, 1, logits[:n*V], V, e.headPackedT(), 0, dxc[:n*H], H)
		}
		ht.backward(xc, logits, n, H, 0, V, dxc)
		for i, t := range rs {
			kernels.Add(dxf[t*H:(t+1)*H], dxc[i*H:(i+1)*H])
		}
	}
}

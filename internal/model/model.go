// Package model runs Llama (Llama 3.x, SmolLM2), Qwen2/Qwen2.5 and Qwen3 causal language
// models from Hugging Face directories (config.json, generation_config.json, safetensors
// weights) on the CPU, in batches of sequences of different lengths over a paged KV cache
// (internal/kvcache), with per-sequence LoRA adapters in PEFT's layout.
//
// # Forward pass
//
//	m, err := model.Load(dir, model.LoadOptions{})
//	cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: 1024})
//	seq := cache.NewSequence()
//	logits, err := m.Forward([]model.Step{{Seq: seq, Tokens: prompt, LogitsAt: []int{len(prompt) - 1}}})
//	// logits[0][0] holds the vocabulary's logits after the last prompt token; seq now holds
//	// len(prompt) positions. A decode step is a Step with one token.
//
// Each Step is a prefill chunk (any number of tokens, starting at the sequence's current
// length, so chunked prefill is just consecutive steps) or a decode token. Matrix products run
// once over all tokens of the batch (internal/gemm, threaded); attention runs per sequence and
// key/value head in parallel. Weights stay bf16/f16 when stored so, widened inside the GEMM
// kernels, and a GGUF's quantized matrices stay quantized (internal/quant multiplies them;
// LoadOptions.Quantize quantizes any model at load); activations are f32.
//
// A transformer block is defined once, in Model.LayerForward (layer.go), which this forward
// pass and the trainer (internal/train) both run: the trainer supplies its own attention and
// keeps the activations its backward pass needs. The other pieces the trainer needs
// (embedding, norms, the linear layers and their packed weights, the rotary table) are
// exported on Model and Layer.
package model

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kernels"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/quant"
	"github.com/honeai/hone/internal/safetensors"
)

// Layer is one transformer block.
type Layer struct {
	AttnNorm, MLPNorm []float32
	Q, K, V, O        Linear
	Gate, Up, Down    Linear
	QNorm, KNorm      []float32 // Qwen3: per-head RMSNorm weights (HeadDim)
	// PostAttnNorm and PostMLPNorm (Gemma): RMSNorms of the attention and MLP outputs.
	PostAttnNorm, PostMLPNorm []float32
	MoE                       *MoELayer // routed experts in place of Gate/Up/Down (moe.go)

	// qkv and gateUp pack q/k/v and gate/up together: one GEMM each per layer.
	qkv, gateUp *fused
}

// Model is a loaded model.
type Model struct {
	Config Config
	Dir    string
	Embed  Weight // vocab × hidden
	Layers []Layer
	Norm   []float32
	LMHead Linear // tied models share Embed's data
	Rope   *kernels.Table
	// ropeLong (LongRoPE) is the table of rows whose sequence is longer than longAfter
	// positions (RopeFor).
	ropeLong  *kernels.Table
	longAfter int
	// RopeLocal (Gemma 3): the sliding layers' rotary table (RopeAt picks).
	RopeLocal *kernels.Table

	// BF16MinRows: with bf16 weights, forward passes over at least this many rows, and at
	// least gemm.BF16PairRows (from which the CPU multiplies bf16 faster than f32: 64 on AMX
	// tiles, so prefill; 1 where VDPBF16PS was measured faster, so decode too), run the
	// layers' projections in bf16 arithmetic on pair-packed weights (Linear.PairsPacked),
	// rounding activations to bf16 as they enter a projection, as llama.cpp and vLLM do for
	// bf16 models; other passes stay in f32 arithmetic. 0 turns bf16 arithmetic off. Load
	// sets 1 (HONE_BF16_PREFILL=0 sets 0), so gemm's rule decides.
	BF16MinRows int

	file       io.Closer
	bf16Always bool // tests: bf16 arithmetic without AMX (AVX512_BF16 or pure Go)
}

// Prepack builds now, instead of on first use, the packed weights that f32-arithmetic
// products multiply by (what serving needs from its first request): the fused q/k/v and
// gate/up packs of every layer, the o and down projections and the LM head (quantized
// weights have none: they are multiplied as they are). Load leaves them
// to first use, so that a process that only trains bf16 weights on AMX (which uses its own
// packs) never holds them. When every pass runs the projections in bf16 arithmetic (a bf16
// model on a CPU where gemm.BF16PairRows is 1), it builds their pair packs instead.
//
// Serving's products read only these packs, so the projections' mapped file pages are given
// back as each pack is built (Linear.serving; an untied LM head's too): a bf16 model is then
// resident once, as its packs, not twice. A pack built later from the same weights (a
// prefill in bf16 arithmetic on AMX, training's) reads them back from the file and gives them
// back again. Weights held as heap copies (a GGUF's quantized matrices dequantized for
// --dtype f32 or bf16, a safetensors model converted at load) are let go once packed: the
// pack holds them exactly, and Linear.Dense restores one for the products that read W as it
// is (training). A tied embedding's rows are read from the LM head's pack (Weight.Row), so
// the embedding is held once in every dtype: its heap copy let go, or its mapped pages given
// back (a tied embedding dequantized from a GGUF is packed at load and never held otherwise,
// loader.embedding).
func (m *Model) Prepack() {
	pairs := m.bf16Rows(1)
	tied := m.TiedHead()
	packMu.Lock()
	for i := range m.Layers {
		for _, l := range m.Layers[i].linears() {
			l.serving = true
		}
	}
	m.LMHead.serving = !tied
	packMu.Unlock()
	defer m.releaseServed() // the packs built before (a pass ran before Prepack) included
	// The heap copies let go are given back to the system as they go (every 64 MiB), so that
	// a model converted at load peaks near its size plus a few layers, not twice its size.
	var freed int64
	giveBack := func(n int64) {
		if freed += n; freed >= 64<<20 {
			debug.FreeOSMemory()
			freed = 0
		}
	}
	for i := range m.Layers {
		L := &m.Layers[i]
		if pairs {
			L.qkv.pairsPacked()
			L.O.PairsPacked(true)
		} else {
			L.qkv.packed()
			L.O.Packed()
		}
		switch {
		case L.MoE != nil:
			L.MoE.prepack()
		case pairs:
			L.gateUp.pairsPacked()
			L.Down.PairsPacked(true)
		default:
			L.gateUp.packed()
			L.Down.Packed()
		}
		giveBack(m.letGoLayer(L))
	}
	m.LMHead.Packed()
	giveBack(m.letGoHead(tied))
}

// releaseServed gives back the mapped pages of every linear Prepack marked serving.
func (m *Model) releaseServed() {
	packMu.Lock()
	defer packMu.Unlock()
	for i := range m.Layers {
		for _, l := range m.Layers[i].linears() {
			l.afterPack()
		}
	}
	m.LMHead.afterPack()
}

// letGoLayer makes the values of the layer's weights live in their serving packs
// (Linear.letGo, fused.letGo): heap copies are let go. It returns the bytes let go.
func (m *Model) letGoLayer(L *Layer) int64 {
	packMu.Lock()
	defer packMu.Unlock()
	n := L.qkv.letGo() + L.O.letGo()
	if L.MoE != nil {
		return n + L.MoE.letGo()
	}
	return n + L.gateUp.letGo() + L.Down.letGo()
}

// letGoHead is letGoLayer for the LM head; a tied embedding is read from the head's pack from
// now on, its mapped pages given back or its heap copy let go.
func (m *Model) letGoHead(tied bool) int64 {
	packMu.Lock()
	defer packMu.Unlock()
	if !tied {
		return m.LMHead.letGo()
	}
	pk := m.LMHead.P
	if pk == nil || m.Embed.Q != nil {
		return 0
	}
	m.Embed.releaseMapped()
	n := m.Embed.keepIn(pk, 0)
	m.LMHead.W.keepIn(pk, 0) // the same slices as Embed's
	return n
}

// linears are the layer's seven projections (a sparse layer's experts not included).
func (L *Layer) linears() [7]*Linear {
	return [7]*Linear{&L.Q, &L.K, &L.V, &L.O, &L.Gate, &L.Up, &L.Down}
}

// TiedHead reports whether the LM head is the input embedding (tied weights), held once: the
// head's pack, from which the embedding's rows are read once Prepack made it (letGoHead),
// or the embedding itself.
func (m *Model) TiedHead() bool { return m.LMHead.W.same(&m.Embed) }

// bf16Rows reports whether a pass over T rows runs its projections in bf16 arithmetic: bf16
// weights, and T at least BF16MinRows (not 0) and gemm.BF16PairRows, from which bf16 is
// the faster arithmetic on this CPU.
func (m *Model) bf16Rows(T int) bool {
	w := m.Layers[0].O.W
	if m.BF16MinRows <= 0 || w.Q != nil || w.Kind != gemm.BF16 {
		return false
	}
	if m.bf16Always {
		return T >= m.BF16MinRows
	}
	r := gemm.BF16PairRows()
	return r > 0 && T >= max(r, m.BF16MinRows)
}

// LoadOptions tunes Load.
type LoadOptions struct {
	DType DType // weight format in memory (default: as stored)
	// Quantize, when a quantized type (from --quantize, see ParseQuantize; the zero value F32
	// is none), quantizes the matrices (embedding, projections, experts, LM head) at load with
	// quant.Quantize, a chunk of rows at a time, to be multiplied as they are (see Weight.Q),
	// and drops each quantized tensor's mapped pages from memory. A matrix whose row length the type's block
	// does not divide falls back as llama.cpp does (Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0,
	// for rows a multiple of 32 but not of 256), else it stays as stored. Matrices already quantized (a GGUF's) stay as
	// they are. Not with DType f32 or bf16.
	Quantize gguf.TensorType
}

// Load reads a model directory, or a GGUF file when dir ends in .gguf (see LoadGGUF).
func Load(dir string, opts LoadOptions) (*Model, error) {
	if IsGGUF(dir) {
		return LoadGGUF(dir, opts)
	}
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	f, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m, err := fromSource(cfg, safetensorsSource{f}, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	m.Dir = dir
	if os.Getenv("HONE_BF16_PREFILL") != "0" {
		m.BF16MinRows = 1
	}
	return m, nil
}

func fromSource(cfg *Config, f tensorSource, opts LoadOptions) (*Model, error) {
	if opts.Quantize != gguf.F32 {
		if !quant.Supported(opts.Quantize) {
			return nil, fmt.Errorf("model: cannot quantize weights to %s (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)", opts.Quantize)
		}
		if opts.DType != DTypeAuto {
			return nil, fmt.Errorf("model: quantizing to %s and dtype %s cannot be combined", opts.Quantize, opts.DType)
		}
	}
	ld := &loader{src: f, dtype: opts.DType, quantize: opts.Quantize, used: map[string]bool{}}
	m := &Model{Config: *cfg, file: f}
	c := cfg
	fam := c.Family()
	var err error
	_, hasHead := f.shape("lm_head.weight")
	tied := !hasHead || c.TieWordEmbeddings
	if m.Embed, err = ld.embedding("model.embed_tokens.weight", c.VocabSize, c.HiddenSize, tied); err != nil {
		return nil, err
	}
	m.Layers = make([]Layer, c.NumLayers)
	for i := range m.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		L := &m.Layers[i]
		if L.AttnNorm, err = ld.vector(p+"input_layernorm.weight", c.HiddenSize); err != nil {
			return nil, err
		}
		if L.MLPNorm, err = ld.vector(p+mlpNormName(c), c.HiddenSize); err != nil {
			return nil, err
		}
		if fam.FusedProjections {
			if err := ld.phi3Layer(L, p, c); err != nil {
				return nil, err
			}
			continue
		}
		if L.Q, err = ld.linear(p+"self_attn.q_proj", c.QDim(), c.HiddenSize, c.AttentionBias); err != nil {
			return nil, err
		}
		if L.K, err = ld.linear(p+"self_attn.k_proj", c.KVDim(), c.HiddenSize, c.AttentionBias); err != nil {
			return nil, err
		}
		if L.V, err = ld.linear(p+"self_attn.v_proj", c.KVDim(), c.HiddenSize, c.AttentionBias); err != nil {
			return nil, err
		}
		if L.O, err = ld.linear(p+"self_attn.o_proj", c.HiddenSize, c.QDim(), c.AttentionBias && !fam.NoOutputBias); err != nil {
			return nil, err
		}
		if c.QKNorm {
			if L.QNorm, err = ld.vector(p+"self_attn.q_norm.weight", c.HeadDim); err != nil {
				return nil, err
			}
			if L.KNorm, err = ld.vector(p+"self_attn.k_norm.weight", c.HeadDim); err != nil {
				return nil, err
			}
		}
		if c.SparseLayer(i) {
			if L.MoE, err = ld.moeLayer(p, c); err != nil {
				return nil, err
			}
			L.qkv = fuse(&L.Q, &L.K, &L.V)
			continue
		}
		if err = loadPostNorms(ld, c, p, L); err != nil {
			return nil, err
		}
		if L.Gate, err = ld.linear(p+"mlp.gate_proj", c.IntermediateSize, c.HiddenSize, c.MLPBias); err != nil {
			return nil, err
		}
		if L.Up, err = ld.linear(p+"mlp.up_proj", c.IntermediateSize, c.HiddenSize, c.MLPBias); err != nil {
			return nil, err
		}
		if L.Down, err = ld.linear(p+"mlp.down_proj", c.HiddenSize, c.IntermediateSize, c.MLPBias); err != nil {
			return nil, err
		}
		L.qkv = fuse(&L.Q, &L.K, &L.V)
		L.gateUp = fuse(&L.Gate, &L.Up)
	}
	if m.Norm, err = ld.vector("model.norm.weight", c.HiddenSize); err != nil {
		return nil, err
	}
	if !tied {
		if m.LMHead, err = ld.linear("lm_head", c.VocabSize, c.HiddenSize, false); err != nil {
			return nil, err
		}
	} else {
		if !c.TieWordEmbeddings {
			return nil, fmt.Errorf("model: weight lm_head.weight is missing (and tie_word_embeddings is false)")
		}
		m.LMHead = Linear{W: m.Embed, P: m.Embed.pk} // the pack ld.embedding built, if it did
	}
	// A tensor the architecture does not read (a bias config.json does not announce, a layer
	// beyond num_hidden_layers) would be silently ignored: refuse it. A tied checkpoint's copy
	// of lm_head.weight and old checkpoints' rotary inv_freq buffers carry nothing Hone needs.
	for _, name := range f.names() {
		if ld.used[name] || name == "lm_head.weight" || strings.HasSuffix(name, ".rotary_emb.inv_freq") {
			continue
		}
		return nil, fmt.Errorf("model: weight %s is not part of a %s model with this config.json (check attention_bias, mlp_bias, num_hidden_layers)", name, c.Arch)
	}
	rope := kernels.NewRope(c.HeadDim, c.RopeTheta)
	// Per-frequency divisors: config.json's llama3 rope_scaling computes them, a GGUF
	// carries them as rope_freqs.weight (llama.cpp's form of the same scaling).
	factors := c.RopeFreqFactors
	if rs := c.RopeScaling; rs != nil && rs.Kind() == "llama3" {
		factors = rope.Llama3Factors(rs.Factor, rs.LowFreqFactor, rs.HighFreqFactor, rs.OriginalMaxPositionEmbeddings)
	}
	if factors != nil {
		rope.DivideFreqs(factors)
	}
	if rs := c.RopeScaling; rs != nil && rs.Kind() == "linear" {
		rope.ScaleLinear(rs.Factor)
	}
	m.Rope = rope.Table(c.MaxPositionEmbeddings)
	m.ropeVariants()
	finishGemma(m, f)
	return m, nil
}

// Close releases the mapped weight files; the model must not be used afterwards.
func (m *Model) Close() error {
	if m.file == nil {
		return nil
	}
	return m.file.Close()
}

// WeightBytes is the memory held by the weights (packed copies included, the bf16-arithmetic
// packs of training too once built; not the mapped file pages of weights that serving or
// training gave back, see Prepack and Linear.ReleasePaired).
func (m *Model) WeightBytes() int64 {
	var n int64
	packMu.Lock()
	defer packMu.Unlock()
	if _, _, mapped := m.Embed.mappedRange(); !mapped || m.Embed.pk == nil {
		n += m.Embed.Bytes() // not when its rows come from the head's pack, its pages given back
	}
	packed := func(p *gemm.PackedB) {
		if p == nil {
			return
		}
		size := int64(4)
		if p.Half() != 0 {
			size = 2
		}
		n += int64(p.N()) * int64(p.K()) * size
	}
	add := func(l *Linear) {
		if _, _, mapped := l.W.mappedRange(); !mapped || !l.serving && !l.released {
			n += l.W.Bytes()
		}
		if l.restored != nil {
			n += l.restored.Bytes()
		}
		packed(l.P)
		packed(l.pairsT)
		packed(l.pairsN)
	}
	for i := range m.Layers {
		L := &m.Layers[i]
		for _, l := range L.linears() {
			add(l)
		}
		packed(L.qkv.P)
		packed(L.qkv.pairs)
		if L.MoE != nil {
			n += L.MoE.bytes(packed)
			continue
		}
		packed(L.gateUp.P)
		packed(L.gateUp.pairs)
	}
	if m.LMHead.W.same(&m.Embed) {
		packed(m.LMHead.P) // tied: the weight is Embed's
		if m.LMHead.restored != nil {
			n += m.LMHead.restored.Bytes()
		}
		packed(m.LMHead.pairsT)
		packed(m.LMHead.pairsN)
	} else {
		add(&m.LMHead)
	}
	return n
}

// ModelDirExists reports whether dir looks like a model directory.
func ModelDirExists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "config.json"))
	return err == nil
}

// Step is the work of one sequence in a forward pass.
type Step struct {
	Seq    *kvcache.Sequence
	Tokens []int
	// LogitsAt lists indexes into Tokens whose next-token logits are wanted.
	LogitsAt []int
	Adapter  *LoRA
}

// Forward runs the tokens of every step through the model, appends their keys and values to
// the steps' sequences, and returns, per step, the logits at LogitsAt. When the cache cannot
// hold the new tokens it returns kvcache.ErrNoBlocks and changes nothing.
func (m *Model) Forward(steps []Step) ([][][]float32, error) { return m.ForwardInto(steps, nil) }

// ForwardInto is Forward with the logits written into *logits (grown as needed) instead of a
// new array: the returned slices are views of it, valid until the next call with the same
// buffer. A serving loop that is done with a pass's logits before the next pass passes the
// same buffer each time, so that decoding leaves no vocabulary-sized garbage a token (1 MB
// for Gemma 3's 262,144 tokens: with a small live heap, a collection every few tokens).
// A nil logits is Forward.
func (m *Model) ForwardInto(steps []Step, logits *[]float32) ([][][]float32, error) {
	c := &m.Config
	T := 0
	for i, st := range steps {
		if st.Seq == nil || len(st.Tokens) == 0 {
			return nil, fmt.Errorf("model: step %d has no sequence or no tokens", i)
		}
		if st.Seq.Len()+len(st.Tokens) > m.Rope.Len() {
			return nil, fmt.Errorf("model: step %d reaches position %d, beyond max_position_embeddings %d", i, st.Seq.Len()+len(st.Tokens), m.Rope.Len())
		}
		for _, id := range st.Tokens {
			if id < 0 || id >= c.VocabSize {
				return nil, fmt.Errorf("model: token id %d out of range [0, %d)", id, c.VocabSize)
			}
		}
		for _, j := range st.LogitsAt {
			if j < 0 || j >= len(st.Tokens) {
				return nil, fmt.Errorf("model: step %d asks logits at %d of %d tokens", i, j, len(st.Tokens))
			}
		}
		if st.Adapter != nil {
			if err := st.Adapter.check(c); err != nil {
				return nil, err
			}
		}
		T += len(st.Tokens)
	}
	for i := range steps {
		if err := steps[i].Seq.Reserve(len(steps[i].Tokens)); err != nil {
			for _, prev := range steps[:i] {
				prev.Seq.Shrink()
			}
			return nil, err
		}
	}
	b := newBatch(m, steps, T)
	defer b.release()
	x := b.x
	for l := range m.Layers {
		m.layer(l, b)
	}
	// Logits of the requested rows only.
	var rows []int
	for i, st := range steps {
		for _, j := range st.LogitsAt {
			rows = append(rows, b.start[i]+j)
		}
	}
	out := make([][][]float32, len(steps))
	if len(rows) > 0 {
		H := c.HiddenSize
		h := make([]float32, len(rows)*H)
		for k, r := range rows {
			copy(h[k*H:(k+1)*H], x[r*H:(r+1)*H])
		}
		m.FinalNorm(h, nil, h, len(rows))
		var lg []float32
		if n := len(rows) * c.VocabSize; logits == nil {
			lg = make([]float32, n)
		} else {
			if cap(*logits) < n {
				*logits = make([]float32, n)
			}
			lg = (*logits)[:n] // the head writes every element
		}
		m.LMHead.Forward(false, h, len(rows), lg, false)
		V := c.VocabSize
		k := 0
		for _, st := range steps {
			if t := st.Adapter.headTokens(); t != nil {
				for j := range st.LogitsAt {
					t.SetLogits(h[(k+j)*H:(k+j+1)*H], lg[(k+j)*V:(k+j+1)*V])
				}
			}
			k += len(st.LogitsAt)
		}
		m.SoftcapLogits(lg)
		k = 0
		for i, st := range steps {
			out[i] = make([][]float32, len(st.LogitsAt))
			for j := range st.LogitsAt {
				out[i][j] = lg[k*c.VocabSize : (k+1)*c.VocabSize : (k+1)*c.VocabSize]
				k++
			}
		}
	}
	for _, st := range steps {
		st.Seq.Advance(len(st.Tokens))
	}
	return out, nil
}

// batch is the working state of one forward pass.
type batch struct {
	steps []Step
	T     int
	start []int // first row of each step
	pos   []int // position of each row
	x     []float32
	// scratch
	h, q, k, v, attn, gate, up []float32
	tmp                        []float32 // fused GEMM outputs
	buf                        LayerBuffers
	kv                         []attnScratch // per step: a decode step's gathered keys and values (k, v)
	gather                     []gatherPart  // the parts of the decode steps' gathers
	loraTmp                    []float32     // AddDelta's rows × rank products
}

// gatherPart is a range of a decode step's cached positions [lo, hi) to gather, from base,
// the first position the step gathers.
type gatherPart struct{ step, base, lo, hi int }

// batchPool keeps the working state of passes of at most pooledRows rows (decode steps), so
// that a steady decode allocates little besides its logits. Every buffer of a batch is
// written before it is read.
var batchPool sync.Pool

const pooledRows = 64

func newBatch(m *Model, steps []Step, T int) *batch {
	c := &m.Config
	H, I, qd, kvd := c.HiddenSize, c.IntermediateSize, c.QDim(), c.KVDim()
	b, _ := batchPool.Get().(*batch)
	if b == nil {
		b = &batch{}
	}
	b.steps, b.T = steps, T
	b.start, b.pos, b.x = grow(b.start, len(steps)), grow(b.pos, T), grow(b.x, T*H)
	b.h, b.q, b.k, b.v = grow(b.h, T*H), grow(b.q, T*qd), grow(b.k, T*kvd), grow(b.v, T*kvd)
	b.attn, b.gate, b.up = grow(b.attn, T*qd), grow(b.gate, T*I), grow(b.up, T*I)
	b.tmp = grow(b.tmp, T*max(2*I, qd+2*kvd))
	// One set of buffers for every layer: h holds each norm's output and then the sublayer's
	// output, SwiGLU overwrites gate. A sparse layer's buffers are kept with the batch.
	b.buf = LayerBuffers{H1: b.h, Q: b.q, K: b.k, V: b.v, Attn: b.attn, H2: b.h, Gate: b.gate, Up: b.up, Act: b.gate, Tmp: b.tmp, Out: b.h, MoE: b.buf.MoE}
	b.buf.Ctx = m.rowContexts(steps, T)
	r := 0
	for i, st := range steps {
		b.start[i] = r
		for j, id := range st.Tokens {
			m.EmbedRowFor(b.x[r*H:(r+1)*H], id, st.Adapter)
			b.pos[r] = st.Seq.Len() + j
			r++
		}
	}
	return b
}

// release returns a small batch to batchPool once its pass is done.
func (b *batch) release() {
	b.steps = nil // the sequences and adapters are not the pool's to keep
	if b.T <= pooledRows {
		batchPool.Put(b)
	}
}

// AddDelta adds each step's adapter delta of module to the step's rows (Adapters): one
// product for each run of consecutive steps with the same adapter (their rows are
// consecutive; a decode step of many sequences sampling one checkpoint is one run), whose
// rows are the same bits as the steps' alone (LoRA's products are row-invariant, docs/engine.md).
func (b *batch) AddDelta(l int, module string, x, out []float32) {
	for i := 0; i < len(b.steps); {
		a := b.steps[i].Adapter
		j := i + 1
		for j < len(b.steps) && b.steps[j].Adapter == a {
			j++
		}
		if a != nil {
			if p := a.Layers[l][module]; p != nil {
				r0, rows := b.start[i], b.start[j-1]+len(b.steps[j-1].Tokens)-b.start[i]
				if n := rows * a.Rank; cap(b.loraTmp) < n {
					b.loraTmp = make([]float32, n)
				}
				a.AddDelta(l, module, x[r0*p.In:], rows, out[r0*p.Out:], b.loraTmp[:rows*a.Rank])
			}
		}
		i = j
	}
}

// layer runs layer l over the batch, attending over each step's cached positions.
func (m *Model) layer(l int, b *batch) {
	m.LayerForward(l, b.x, b.pos, m.bf16Rows(b.T), &b.buf, b, func() {
		m.storeKV(l, b)
		m.attention(l, b)
	})
}

// storeKV writes the batch's keys and values of layer l into the steps' cache blocks.
func (m *Model) storeKV(l int, b *batch) {
	kv := m.Config.KVDim()
	for i, st := range b.steps {
		for j := range st.Tokens {
			r := b.start[i] + j
			st.Seq.Store(l, b.pos[r], b.k[r*kv:(r+1)*kv], b.v[r*kv:(r+1)*kv])
		}
	}
}

// attention computes causal attention of every step's new rows over its cached positions.
func (m *Model) attention(l int, b *batch) {
	c := &m.Config
	hd, qd := c.HeadDim, c.QDim()
	group := c.NumHeads / c.NumKVHeads
	scale := m.AttnScale()
	// A task is a step's kv head, or in a prefill with fewer kv heads than the cores can
	// share evenly (one prompt: SmolLM2's 3 on 2 cores left one core idle a third of the
	// time), one query head of it (which gathers its kv head's keys and values itself).
	type task struct{ step, kvHead, qHead int }
	split := len(b.steps)*c.NumKVHeads < 4*gemm.Threads()
	tasks := make([]task, 0, len(b.steps)*c.NumKVHeads)
	for i, st := range b.steps {
		for g := 0; g < c.NumKVHeads; g++ {
			if !split || group == 1 || len(st.Tokens) <= 4 {
				tasks = append(tasks, task{i, g, -1})
				continue
			}
			for qh := g * group; qh < (g+1)*group; qh++ {
				tasks = append(tasks, task{i, g, qh})
			}
		}
	}
	// Each step's keys and values of positions [lo, ctx), gathered into rows (widened to f32
	// from an f16 cache); lo is 0, or for a windowed layer the block where the first row's
	// window starts (the blocks before it may be released, kvcache.Sequence.Advance). A decode step's are
	// gathered here, whole rows of every kv head, a block at a time; a prefill's in its tasks,
	// a kv head at a time (its context may be long).
	// With fewer decode steps than cores, each step's gather is split at block boundaries so
	// that every core copies a part (at batch 1 one core would copy while the others wait).
	kvd := c.KVDim()
	b.kv = grow(b.kv, len(b.steps))
	b.gather = b.gather[:0]
	per := max(1, gemm.Threads()/len(b.steps))
	for i, st := range b.steps {
		if len(st.Tokens) > 4 {
			continue
		}
		r0 := b.start[i]
		ctx := b.pos[r0] + len(st.Tokens)
		bs := st.Seq.BlockSize()
		lo := m.windowFrom(l, b.pos[r0], bs)
		g := &b.kv[i]
		g.k, g.v = g.k.grow((ctx-lo)*kvd), g.v.grow((ctx-lo)*kvd)
		nb := (ctx - lo + bs - 1) / bs
		parts := min(per, max(1, nb/2))
		for k := range parts {
			b.gather = append(b.gather, gatherPart{step: i, base: lo, lo: lo + k*nb/parts*bs, hi: min(ctx, lo+(k+1)*nb/parts*bs)})
		}
	}
	gemm.Parallel(len(b.gather), func(t int) {
		gp := b.gather[t]
		g := &b.kv[gp.step]
		off := (gp.lo - gp.base) * kvd
		b.steps[gp.step].Seq.Gather(l, gp.lo, gp.hi, 0, kvd, g.k[off:], g.v[off:])
	})
	// On gemm's worker pool, which the products before and after keep hot: a decode step's
	// few tasks would wait longer for new goroutines.
	gemm.Parallel(len(tasks), func(ti int) {
		t := tasks[ti]
		st := b.steps[t.step]
		s := st.Seq
		n := len(st.Tokens)
		r0 := b.start[t.step]
		ctx := b.pos[r0] + n
		bs := s.BlockSize()
		lo := m.windowFrom(l, b.pos[r0], bs)
		w := ctx - lo
		sc := attnScratchPool.Get().(*attnScratch)
		defer sc.release()
		if n <= 4 {
			// Decode: each row's group of query heads (group × hd, one after the other) times
			// the keys of its window in one product, and its scores times the values in
			// another (a product per block of the cache was measured slower: at 16
			// positions a product's own cost is most of it).
			g := &b.kv[t.step]
			K, V := g.k[t.kvHead*hd:], g.v[t.kvHead*hd:]
			for r := 0; r < n; r++ {
				limit := b.pos[r0+r] + 1
				rlo := m.windowFrom(l, limit-1, bs)
				rw := limit - rlo
				sc.s = sc.s.grow(group * rw)
				S := sc.s
				Q := b.q[(r0+r)*qd+t.kvHead*group*hd:]
				gemm.Sgemm(false, true, group, rw, hd, scale, Q, hd, K[(rlo-lo)*kvd:], kvd, 0, S, rw)
				for h := 0; h < group; h++ {
					m.maskScoresFrom(l, S[h*rw:(h+1)*rw], limit-1, rlo)
					kernels.Softmax(S[h*rw : (h+1)*rw])
				}
				out := b.attn[(r0+r)*qd+t.kvHead*group*hd:]
				gemm.Sgemm(false, false, group, hd, rw, 1, S, rw, V[(rlo-lo)*kvd:], kvd, 0, out, hd)
			}
			return
		}
		// Prefill: this kv head's keys and values, then per query head, a block of
		// attnRows rows at a time, its rows times the keys the block sees with GEMM, the
		// softmax, and the scores times the values.
		sc.k, sc.v = sc.k.grow(w*hd), sc.v.grow(w*hd)
		K, V := sc.k, sc.v
		s.Gather(l, lo, ctx, t.kvHead*hd, hd, K, V)
		sc.s = sc.s.grow(n * w)
		S := sc.s
		qh0, qh1 := t.kvHead*group, (t.kvHead+1)*group
		if t.qHead >= 0 {
			qh0, qh1 = t.qHead, t.qHead+1
		}
		for qh := qh0; qh < qh1; qh++ {
			for rb := 0; rb < n; rb += attnRows {
				re := min(rb+attnRows, n)
				// The keys [k0, k1) the block's rows see: from its first row's window to
				// its last row. A score is the same dot product whatever the keys beside
				// it, and the keys a row does not see would add zeros after its softmax.
				k0 := m.windowFrom(l, b.pos[r0+rb], bs) - lo
				k1 := b.pos[r0+re-1] + 1 - lo
				Sb := S[rb*w+k0:]
				gemm.Sgemm(false, true, re-rb, k1-k0, hd, scale, b.q[(r0+rb)*qd+qh*hd:], qd, K[k0*hd:], hd, 0, Sb, w)
				for r := rb; r < re; r++ {
					// The softmax over exactly the positions a decode step of this row
					// takes, [rlo, limit) (so that its vector and scalar parts fall on the
					// same elements), the rest of the row 0: a row's attention is the same
					// bits whatever the rows beside it (docs/engine.md, "Batch invariance").
					limit := b.pos[r0+r] + 1
					rlo := m.windowFrom(l, limit-1, bs)
					row := S[r*w+k0 : r*w+k1]
					seg := row[rlo-lo-k0 : limit-lo-k0]
					m.maskScoresFrom(l, seg, limit-1, rlo)
					kernels.Softmax(seg)
					clear(row[:rlo-lo-k0])
					clear(row[limit-lo-k0:])
				}
				gemm.Sgemm(false, false, re-rb, hd, k1-k0, 1, Sb, w, V[k0*hd:], hd, 0, b.attn[(r0+rb)*qd+qh*hd:], qd)
			}
		}
	})
}

// attnRows is how many rows of a prefill's query head attend at a time: each block's
// products stop at its last row's position, so a fresh prompt's attention does a little
// over half the multiply-adds of the whole square (the scores past a row's position were
// computed and then masked).
const attnRows = 32

// attnScratch is a decode step's gathered keys and values (kept with the batch), or an
// attention task's scores and, in a prefill, its kv head's keys and values (pooled).
type attnScratch struct{ k, v, s scratch }

// scratch is a buffer that grows with headroom, as a decode step's context grows a position
// at a time.
type scratch []float32

func (s scratch) grow(n int) scratch {
	if cap(s) < n {
		return make(scratch, n, n+n/4+1024)
	}
	return s[:n]
}

var attnScratchPool = sync.Pool{New: func() any { return new(attnScratch) }}

// scratchKeep bounds the floats of a pooled attnScratch: the buffers of a long prefill are
// freed rather than held by the decode steps that take the scratch next.
const scratchKeep = 1 << 20

func (sc *attnScratch) release() {
	if cap(sc.s)+cap(sc.k)+cap(sc.v) <= scratchKeep {
		attnScratchPool.Put(sc)
	}
}

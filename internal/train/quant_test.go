package train

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/quant"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/trainingdata"
)

// q8_0 encodes v (a multiple of 32 long) as Q8_0 blocks: d = max|x|/127 as f16, q = round(x/d).
func q8_0(v []float32) []byte {
	out := make([]byte, 0, len(v)/32*34)
	for b := 0; b < len(v); b += 32 {
		amax := float32(0)
		for _, f := range v[b : b+32] {
			amax = max(amax, float32(math.Abs(float64(f))))
		}
		h := gemm.Float32ToF16(amax / 127)
		d := gemm.F16ToFloat32(h)
		out = binary.LittleEndian.AppendUint16(out, h)
		for _, f := range v[b : b+32] {
			q := 0
			if d != 0 {
				q = int(math.Round(float64(f / d)))
			}
			out = append(out, byte(int8(min(max(q, -127), 127))))
		}
	}
	return out
}

// tinyQ8GGUF writes a tiny synthetic Qwen2 model (no q/k row reordering) as a GGUF file in
// llama.cpp's names with every matrix in Q8_0, as a GGUF base_model is.
func tinyQ8GGUF(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "qwen2")
	o := synth.Tiny("qwen2")
	o.Std = 0.05
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	c, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := map[string]string{"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
		"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
		"self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
	var ts []gguf.TensorData
	for _, name := range f.Names() {
		tn, _ := f.Tensor(name)
		v, err := tn.F32()
		if err != nil {
			t.Fatal(err)
		}
		gname := map[string]string{"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}[name]
		if gname == "" {
			layer, rest, _ := strings.Cut(strings.TrimPrefix(name, "model.layers."), ".")
			i := strings.LastIndex(rest, ".")
			gname = "blk." + layer + "." + names[rest[:i]] + rest[i:]
		}
		td := gguf.TensorData{Name: gname, Type: gguf.F32}
		for i := len(tn.Shape) - 1; i >= 0; i-- {
			td.Dims = append(td.Dims, uint64(tn.Shape[i]))
		}
		if len(tn.Shape) == 2 {
			td.Type, td.Data = gguf.Q8_0, q8_0(v)
		} else {
			td.Data = make([]byte, 4*len(v))
			for i, x := range v {
				binary.LittleEndian.PutUint32(td.Data[4*i:], math.Float32bits(x))
			}
		}
		ts = append(ts, td)
	}
	tokens := make([]string, c.VocabSize)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("t%d", i)
	}
	meta := []gguf.KV{
		{Key: "general.architecture", Value: "qwen2"},
		{Key: "qwen2.block_count", Value: uint32(c.NumLayers)},
		{Key: "qwen2.context_length", Value: uint32(c.MaxPositionEmbeddings)},
		{Key: "qwen2.embedding_length", Value: uint32(c.HiddenSize)},
		{Key: "qwen2.feed_forward_length", Value: uint32(c.IntermediateSize)},
		{Key: "qwen2.attention.head_count", Value: uint32(c.NumHeads)},
		{Key: "qwen2.attention.head_count_kv", Value: uint32(c.NumKVHeads)},
		{Key: "qwen2.rope.freq_base", Value: float32(c.RopeTheta)},
		{Key: "qwen2.attention.layer_norm_rms_epsilon", Value: float32(c.RMSNormEps)},
		{Key: "tokenizer.ggml.tokens", Value: tokens},
	}
	path := filepath.Join(t.TempDir(), "base.gguf")
	if err := gguf.WriteFile(path, meta, ts); err != nil {
		t.Fatal(err)
	}
	return path
}

// Training on a GGUF base model whose matrices stay quantized (frozen, multiplied as they
// are; dx through them by quant.Matrix.MatMulAcc): the adapter's gradients agree with those
// on the same file dequantized to f32 within 5% of their norm (1% measured: the forward
// products differ only by the activations' 8-bit rounding, the backward products through the
// weights are exact), and a few AdamW steps on one sequence bring its loss down.
func TestTrainOnQuantizedGGUFBase(t *testing.T) {
	path := tinyQ8GGUF(t)
	q, err := model.Load(path, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	f, err := model.Load(path, model.LoadOptions{DType: model.DTypeF32})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if q.Layers[0].Down.W.Q == nil || q.LMHead.W.Q == nil || f.Layers[0].Down.W.Q != nil {
		t.Fatal("the default load should keep the Q8_0 matrices quantized, the f32 load not")
	}
	rng := rand.New(rand.NewPCG(4, 4))
	s := Seq{Tokens: make([]int, 19), Segments: []int{0}}
	w := make([]float32, len(s.Tokens))
	for i := range s.Tokens {
		s.Tokens[i] = rng.IntN(q.Config.VocabSize)
		w[i] = 1
	}
	grads := func(m *model.Model) (*Trainer, *Grads) {
		a, err := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		// Random B (zero at initialisation), in module order: the same on both bases.
		r := rand.New(rand.NewPCG(5, 2))
		for _, layer := range a.Layers {
			for _, mod := range model.Modules {
				for i := range layer[mod].B {
					layer[mod].B[i] = float32(r.NormFloat64() * 0.1)
				}
			}
		}
		e, err := NewTrainer(m, a)
		if err != nil {
			t.Fatal(err)
		}
		e.ForwardBackward(s, weightedNLL(w))
		return e, e.G
	}
	_, gf := grads(f)
	// GEMMRows 0: every forward product on 8-bit activations; -1 (the default): on the Go
	// row kernels, these 19 rows go by dequantized tiles, exact in the activations.
	defer func() { quant.GEMMRows = -1 }()
	var eq *Trainer
	for _, g := range []int{0, -1} {
		quant.GEMMRows = g
		var gq *Grads
		eq, gq = grads(q)
		diff, norm := 0.0, 0.0
		lq, lf := gq.list(), gf.list()
		for i := range lq {
			for j := range lq[i] {
				d := float64(lq[i][j] - lf[i][j])
				diff += d * d
				norm += float64(lf[i][j]) * float64(lf[i][j])
			}
		}
		rel := math.Sqrt(diff / norm)
		t.Logf("GEMMRows %d: adapter gradients: |quantized − f32| / |f32| = %.4f", g, rel)
		if norm == 0 || rel > 0.05 {
			t.Fatalf("GEMMRows %d: gradients on the quantized base differ from the f32 base's by %.4f of their norm", g, rel)
		}
	}
	quant.GEMMRows = 0
	before := lossOf(eq, s, w)
	opt := NewAdamW(0)
	for range 3 {
		eq.G.Zero()
		eq.ForwardBackward(s, weightedNLL(w))
		opt.Update(eq.A, eq.G, 1e-2)
	}
	after := lossOf(eq, s, w)
	t.Logf("loss %.4f -> %.4f after 3 steps", before, after)
	if !(after < before) {
		t.Fatalf("loss %.4f -> %.4f: training on the quantized base did not lower it", before, after)
	}
}

// SFT (RunSFT, the job's loop) on a base quantized at load to Q4_K (hone serve --quantize
// q4_k; the tiny model's rows of 64 fall back to Q5_0): the loss goes down over a few steps.
func TestSFTOnQuantizedBase(t *testing.T) {
	dir := tinyDir(t, "llama", 0.2)
	m, err := model.Load(dir, model.LoadOptions{Quantize: gguf.Q4_K})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Layers[0].Gate.W.Q == nil || m.LMHead.W.Q == nil {
		t.Fatal("the base is not quantized")
	}
	c, err := trainingdata.LoadChat(dir)
	if err != nil {
		t.Fatal(err)
	}
	xs, err := trainingdata.ReadSFT(strings.NewReader(capitals), c, "all")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 8, Alpha: 16, Seed: 1})
	e, _ := NewTrainer(m, a)
	plan, err := PlanSFT(xs, SFTConfig{Epochs: 4, LearningRates: []float64{1e-2}, Schedule: "constant", MaxSeqLen: 512})
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	if _, err := RunSFT(context.Background(), e, plan, nil, func(s StepMetrics) error {
		losses = append(losses, s.Loss)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("losses %.3f", losses)
	if len(losses) < 2 || !(losses[len(losses)-1] < losses[0]) {
		t.Fatalf("losses %v: training on the quantized base did not lower the loss", losses)
	}
}

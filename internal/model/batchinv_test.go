package model_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/quant"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/synth"
)

// invariantModel is one model configuration TestForwardBatchInvariance runs.
type invariantModel struct {
	name      string
	load      func(t *testing.T) *model.Model
	kv        kvcache.DType
	blockSize int
	check     gguf.TensorType // a quantized type the matrices must have (F32: none)
	lora      bool            // the prompt runs with a LoRA adapter (its neighbours without)
}

// invarianceBase is a tiny Llama whose rows are long enough for the K-quants (256) and
// whose heads are 64 wide, as most models' are.
func invarianceBase() synth.Options {
	o := synth.Tiny("llama")
	o.Hidden, o.Intermediate, o.Std = 256, 512, 0.05
	return o
}

func loadSynth(o synth.Options, opts model.LoadOptions, prepare func(*model.Model)) func(t *testing.T) *model.Model {
	return func(t *testing.T) *model.Model {
		t.Helper()
		dir := t.TempDir()
		if err := synth.Write(dir, o); err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		if prepare != nil {
			prepare(m)
		}
		m.Prepack()
		return m
	}
}

// loadSynthF16 is o with its matrices stored as f16 (norms f32), kept 16-bit at load.
func loadSynthF16(o synth.Options) func(t *testing.T) *model.Model {
	return func(t *testing.T) *model.Model {
		t.Helper()
		dir := t.TempDir()
		if err := synth.Write(dir, o); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "model.safetensors")
		f, err := safetensors.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var ts []safetensors.Tensor
		for _, name := range f.Names() {
			tn, _ := f.Tensor(name)
			v, err := tn.F32()
			if err != nil {
				t.Fatal(err)
			}
			if len(tn.Shape) != 2 {
				ts = append(ts, safetensors.FromF32(name, tn.Shape, v))
				continue
			}
			h := make([]uint16, len(v))
			gemm.F16.Encode(h, v)
			ts = append(ts, safetensors.FromU16(name, safetensors.F16, tn.Shape, h))
		}
		f.Close()
		if err := safetensors.Write(path, ts, nil); err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(dir, model.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		m.Prepack()
		checkQuantized(t, m, gguf.F16)
		return m
	}
}

// loadSynthGGUF is the base model as a GGUF whose matrices are of quantized type typ
// (packed at load where the CPU packs it), norms f32.
func loadSynthGGUF(o synth.Options, typ gguf.TensorType) func(t *testing.T) *model.Model {
	return func(t *testing.T) *model.Model {
		t.Helper()
		_, path := synthGGUF(t, o, func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
			for i := range ts {
				if len(ts[i].Dims) != 2 || !strings.HasSuffix(ts[i].Name, ".weight") {
					continue
				}
				cols := int(ts[i].Dims[0])
				v := make([]float32, len(ts[i].Data)/4)
				for j := range v {
					v[j] = math.Float32frombits(uint32(ts[i].Data[4*j]) | uint32(ts[i].Data[4*j+1])<<8 | uint32(ts[i].Data[4*j+2])<<16 | uint32(ts[i].Data[4*j+3])<<24)
				}
				data, err := quant.Quantize(typ, v, cols)
				if err != nil {
					t.Fatal(err)
				}
				ts[i].Type, ts[i].Data = typ, data
			}
			return meta, ts
		})
		m, err := model.Load(path, model.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		m.Prepack()
		checkQuantized(t, m, typ)
		return m
	}
}

// checkQuantized fails the test unless the first layer's q projection is of type typ (a
// quantized type; F16: 16-bit) as the configuration means it to be.
func checkQuantized(t *testing.T, m *model.Model, typ gguf.TensorType) {
	t.Helper()
	w := m.Layers[0].Q.W
	switch {
	case typ == gguf.F16:
		if w.Q != nil || w.Kind != gemm.F16 {
			t.Fatalf("q_proj is not f16")
		}
	case w.Q == nil || w.Q.Type != typ:
		t.Fatalf("q_proj is not %v", typ)
	}
}

func invariantModels() []invariantModel {
	base := invarianceBase()
	f32 := model.LoadOptions{}
	ms := []invariantModel{
		{name: "llama f32", load: loadSynth(base, f32, nil), kv: kvcache.F32, blockSize: 16},
		{name: "llama f32, f16 KV cache", load: loadSynth(base, f32, nil), kv: kvcache.F16, blockSize: 16},
	}
	bf16 := base
	bf16.DType = "bf16"
	ms = append(ms,
		invariantModel{name: "llama bf16, f32 arithmetic", kv: kvcache.F32, blockSize: 16,
			load: loadSynth(bf16, f32, func(m *model.Model) { m.BF16MinRows = 0 })},
		invariantModel{name: "llama bf16, bf16 arithmetic", kv: kvcache.F32, blockSize: 16,
			load: loadSynth(bf16, f32, func(m *model.Model) {
				model.ForceBF16Arithmetic(m)
				m.BF16MinRows = 1
			})},
		invariantModel{name: "llama f16", load: loadSynthF16(base), kv: kvcache.F16, blockSize: 16},
		invariantModel{name: "llama f32 with a LoRA adapter", load: loadSynth(base, f32, nil), kv: kvcache.F32, blockSize: 16, lora: true},
		invariantModel{name: "llama Q4_1 (GGUF) with a LoRA adapter", load: loadSynthGGUF(base, gguf.Q4_1), kv: kvcache.F16, blockSize: 16, lora: true},
	)
	for _, typ := range []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K} {
		ms = append(ms,
			invariantModel{name: "llama " + typ.String() + " (GGUF)", load: loadSynthGGUF(base, typ), kv: kvcache.F16, blockSize: 16},
			invariantModel{name: "llama --quantize " + typ.String(), load: loadSynth(base, model.LoadOptions{Quantize: typ}, nil),
				kv: kvcache.F16, blockSize: 16, check: typ})
	}
	for _, arch := range []string{"gemma2", "gemma3", "mistral", "qwen3", "qwen3moe", "phi3"} {
		o := synth.Tiny(arch)
		o.Std = 0.1
		ms = append(ms, invariantModel{name: arch + " f32", load: loadSynth(o, f32, nil), kv: kvcache.F32, blockSize: 4})
		if arch == "gemma3" || arch == "qwen3moe" {
			ms = append(ms, invariantModel{name: arch + " --quantize Q8_0", load: loadSynth(o, model.LoadOptions{Quantize: gguf.Q8_0}, nil),
				kv: kvcache.F16, blockSize: 4})
		}
	}
	return ms
}

// chunkings of a prompt of n tokens: one pass, a token at a time (decode's path for every
// row), and chunks of 3, 5, 16 and 17 tokens and two uneven ones.
func chunkings(n int) [][]int {
	split := func(c int) []int {
		var s []int
		for p := 0; p < n; p += c {
			s = append(s, min(c, n-p))
		}
		return s
	}
	return [][]int{{n}, split(1), split(3), split(5), split(16), split(17), {n - 13, 13}, {4, n - 4}}
}

// TestForwardBatchInvariance: a prompt's logits at every position are the same bits whether
// it is prefilled in one pass, a token at a time, in chunks of any size, or beside other
// sequences in the same passes (another prompt's prefill chunks and a third sequence's
// decode steps): for f32, bf16 (f32 and bf16 arithmetic) and f16 weights, every quantized
// type from a GGUF (packed where the CPU packs it) and from --quantize, f32 and f16 KV
// caches, sliding windows (Gemma 2 and 3, Mistral; windows of 8 over 45 tokens, blocks of
// 4), soft-caps (Gemma 2), query/key norms (Qwen3), routed experts (Qwen3-MoE, f32 and
// quantized), a LoRA adapter (the prompt's and a neighbour's, the other without) and Phi-3
// (within its original context: LongRoPE's factors depend on a
// sequence's length by design, docs/engine.md "Batch invariance"). So the prefix cache,
// chunked prefill and batching do not change a sequence's output.
func TestForwardBatchInvariance(t *testing.T) {
	const promptLen = 45
	for _, im := range invariantModels() {
		t.Run(im.name, func(t *testing.T) {
			m := im.load(t)
			if im.check != gguf.F32 {
				checkQuantized(t, m, im.check)
			}
			var adapter *model.LoRA
			if im.lora {
				dir := t.TempDir()
				writeLoRA(t, m, dir, 4, 8, model.Modules, 1)
				var err error
				if adapter, err = model.LoadLoRA(dir, &m.Config); err != nil {
					t.Fatal(err)
				}
			}
			r := rand.New(rand.NewPCG(71, 72))
			toks := func(n int) []int {
				p := make([]int, n)
				for i := range p {
					p[i] = r.IntN(m.Config.VocabSize)
				}
				return p
			}
			prompt, other, third := toks(promptLen), toks(30), toks(20)
			newCache := func() *kvcache.Cache {
				return model.NewKVCache(&m.Config, kvcache.Options{BlockSize: im.blockSize, NumBlocks: 256, DType: im.kv})
			}
			all := func(n int) []int {
				at := make([]int, n)
				for i := range at {
					at[i] = i
				}
				return at
			}
			var want [][]float32
			for ci, chunks := range chunkings(promptLen) {
				for _, beside := range []bool{false, true} {
					if ci == 0 && beside {
						continue
					}
					cache := newCache()
					seq := cache.NewSequence()
					// Beside: another prompt prefilled 7 tokens a pass, then decoding, and a
					// third sequence decoding from its prompt, in the same passes.
					os, ts := cache.NewSequence(), cache.NewSequence()
					if beside {
						if _, err := m.Forward([]model.Step{{Seq: ts, Tokens: third}}); err != nil {
							t.Fatal(err)
						}
					}
					op := 0
					var got [][]float32
					p := 0
					for _, c := range chunks {
						steps := []model.Step{{Seq: seq, Tokens: prompt[p : p+c], LogitsAt: all(c), Adapter: adapter}}
						if beside {
							if op < len(other) {
								n := min(7, len(other)-op)
								steps = append(steps, model.Step{Seq: os, Tokens: other[op : op+n], LogitsAt: []int{n - 1}})
								op += n
							} else {
								steps = append(steps, model.Step{Seq: os, Tokens: []int{p % m.Config.VocabSize}, LogitsAt: []int{0}})
							}
							steps = append(steps, model.Step{Seq: ts, Tokens: []int{(3 * p) % m.Config.VocabSize}, LogitsAt: []int{0}, Adapter: adapter})
							// The prompt's step in the middle, so that its rows start past others'.
							steps[0], steps[1] = steps[1], steps[0]
						}
						out, err := m.Forward(steps)
						if err != nil {
							t.Fatal(err)
						}
						mine := out[0]
						if beside {
							mine = out[1]
						}
						for _, lg := range mine {
							got = append(got, append([]float32(nil), lg...))
						}
						p += c
					}
					if want == nil {
						want = got
						continue
					}
					what := fmt.Sprintf("chunks %v", chunks[:min(len(chunks), 4)])
					if beside {
						what += " beside two other sequences"
					}
					compareLogits(t, what, got, want)
				}
			}
		})
	}
}

func compareLogits(t *testing.T, what string, got, want [][]float32) {
	t.Helper()
	for pos := range want {
		for j, v := range got[pos] {
			if math.Float32bits(v) != math.Float32bits(want[pos][j]) {
				t.Errorf("%s: position %d: logit %d = %v, one pass %v", what, pos, j, v, want[pos][j])
				return
			}
		}
	}
}

package export_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/export"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/synth"
)

// randomLoRA is an adapter for cfg on modules with random A and B (B non-zero, unlike a
// fresh adapter, so that the merge changes the weights).
func randomLoRA(cfg *model.Config, rank int, alpha float64, modules []string, seed uint64) *model.LoRA {
	rng := rand.New(rand.NewPCG(seed, 3))
	a := &model.LoRA{Name: "test", Rank: rank, Alpha: alpha, Scaling: float32(alpha / float64(rank)),
		Targets: modules, Layers: make([]map[string]*model.LoRAPair, cfg.NumLayers)}
	for l := range a.Layers {
		a.Layers[l] = map[string]*model.LoRAPair{}
		for _, mod := range modules {
			out, in, _ := model.ModuleShape(cfg, mod)
			p := &model.LoRAPair{In: in, Out: out, A: make([]float32, rank*in), B: make([]float32, out*rank)}
			for i := range p.A {
				p.A[i] = float32(rng.NormFloat64() * 0.1)
			}
			for i := range p.B {
				p.B[i] = float32(rng.NormFloat64() * 0.1)
			}
			a.Layers[l][mod] = p
		}
	}
	return a
}

// logits runs each sequence through m (with adapter a, nil for none) and returns the logits
// at every position.
func logits(t *testing.T, m *model.Model, a *model.LoRA, seqs [][]int) [][][]float32 {
	t.Helper()
	var out [][][]float32
	for _, toks := range seqs {
		cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: 64})
		at := make([]int, len(toks))
		for i := range at {
			at[i] = i
		}
		res, err := m.Forward([]model.Step{{Seq: cache.NewSequence(), Tokens: toks, LogitsAt: at, Adapter: a}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res[0])
	}
	return out
}

var sequences = [][]int{{1, 5, 9, 200, 3}, {42}, {7, 7, 7, 7, 100, 300, 11, 12, 13, 14, 15, 16, 17}}

// TestMergeMatchesAdapter exports a base with an adapter and checks that the merged
// directory loads with model.Load and gives the logits of the base run with the adapter:
// to 1e-4 in f32, to bf16 precision in bf16, on tied and untied, Llama, Qwen2 (biases) and
// Qwen3 models.
func TestMergeMatchesAdapter(t *testing.T) {
	cases := []struct {
		arch, dtype string
		tied        bool
		modules     []string
		tol         float64 // absolute, on logits of magnitude about 1.5
	}{
		{"llama", "f32", true, model.Modules, 1e-4},
		{"llama", "bf16", false, model.Modules, 3e-2},
		{"qwen2", "f32", false, []string{"q_proj", "v_proj"}, 1e-4},
		{"qwen3", "bf16", true, []string{"o_proj", "down_proj", "gate_proj"}, 3e-2},
	}
	for _, c := range cases {
		t.Run(c.arch+"-"+c.dtype, func(t *testing.T) {
			dir := t.TempDir()
			base := filepath.Join(dir, "base")
			o := synth.Tiny(c.arch)
			o.DType, o.Tied, o.Std = c.dtype, c.tied, 0.05
			if err := synth.Write(base, o); err != nil {
				t.Fatal(err)
			}
			bm, err := model.Load(base, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer bm.Close()
			a := randomLoRA(&bm.Config, 4, 8, c.modules, 1)
			out := filepath.Join(dir, "out")
			if err := export.Write(out, base, a); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"} {
				want, _ := os.ReadFile(filepath.Join(base, name))
				got, err := os.ReadFile(filepath.Join(out, name))
				if err != nil || string(got) != string(want) {
					t.Fatalf("%s not copied unchanged (%v)", name, err)
				}
			}
			checkTensors(t, base, out)
			mm, err := model.Load(out, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer mm.Close()
			want := logits(t, bm, a, sequences)
			got := logits(t, mm, nil, sequences)
			plain := logits(t, bm, nil, sequences)
			var maxAbs, maxDiff, maxChange float64
			for s := range want {
				for p := range want[s] {
					for v := range want[s][p] {
						maxAbs = math.Max(maxAbs, math.Abs(float64(want[s][p][v])))
						maxDiff = math.Max(maxDiff, math.Abs(float64(want[s][p][v]-got[s][p][v])))
						maxChange = math.Max(maxChange, math.Abs(float64(want[s][p][v]-plain[s][p][v])))
					}
				}
			}
			t.Logf("max |logit| %.3g, merged vs adapter %.3g, adapter's change %.3g", maxAbs, maxDiff, maxChange)
			if maxDiff > c.tol {
				t.Fatalf("merged logits differ by %g (max |logit| %g, tolerance %g)", maxDiff, maxAbs, c.tol)
			}
			if maxChange < 10*maxDiff {
				t.Fatalf("the adapter changes logits by %g only, against a merge error of %g: the test proves nothing", maxChange, maxDiff)
			}
		})
	}
}

// checkTensors checks that out holds the base's tensors, same names, dtypes and shapes
// (a tied base gains no lm_head.weight), and that the unadapted ones are byte-equal.
func checkTensors(t *testing.T, base, out string) {
	t.Helper()
	bf, err := safetensors.OpenDir(base)
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close()
	of, err := safetensors.Open(filepath.Join(out, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer of.Close()
	if len(bf.Names()) != len(of.Names()) {
		t.Fatalf("base has %d tensors, export %d", len(bf.Names()), len(of.Names()))
	}
	for _, name := range bf.Names() {
		bt, _ := bf.Tensor(name)
		ot, ok := of.Tensor(name)
		if !ok || ot.DType != bt.DType || len(ot.Shape) != len(bt.Shape) {
			t.Fatalf("tensor %s: %v in the export", name, ot)
		}
		if name == "model.embed_tokens.weight" || name == "model.norm.weight" {
			if string(ot.Data) != string(bt.Data) {
				t.Fatalf("tensor %s changed", name)
			}
		}
	}
}

// TestWriteNilAdapter exports the base as it is (byte-equal tensors).
func TestWriteNilAdapter(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	if err := synth.Write(base, synth.Tiny("llama")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "empty")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := export.Write(out, base, nil); err != nil {
		t.Fatalf("an empty out directory is taken: %v", err)
	}
	want, _ := os.ReadFile(filepath.Join(base, "model.safetensors"))
	got, _ := os.ReadFile(filepath.Join(out, "model.safetensors"))
	if string(want) != string(got) {
		t.Fatal("the base's tensors are not written unchanged")
	}
}

// TestWriteErrors: an out directory with files, a base that is not a model directory, an
// adapter for another shape; nothing is left behind.
func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	if err := synth.Write(base, synth.Tiny("llama")); err != nil {
		t.Fatal(err)
	}
	cfg, err := model.LoadConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "full")
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "x"), []byte("x"), 0o644)
	if err := export.Write(full, base, nil); !errors.Is(err, export.ErrOutNotEmpty) {
		t.Fatalf("non-empty out: %v", err)
	}
	if err := export.Write(filepath.Join(dir, "o1"), filepath.Join(dir, "nothing"), nil); err == nil {
		t.Fatal("missing base accepted")
	}
	other := *cfg
	other.NumLayers = cfg.NumLayers + 1
	if err := export.Write(filepath.Join(dir, "o2"), base, randomLoRA(&other, 2, 4, []string{"q_proj"}, 1)); err == nil {
		t.Fatal("adapter with more layers accepted")
	}
	other = *cfg
	other.IntermediateSize = cfg.IntermediateSize * 2
	if err := export.Write(filepath.Join(dir, "o3"), base, randomLoRA(&other, 2, 4, []string{"up_proj"}, 1)); err == nil {
		t.Fatal("adapter of another shape accepted")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "base" && e.Name() != "full" {
			t.Fatalf("%s left behind", e.Name())
		}
	}
}

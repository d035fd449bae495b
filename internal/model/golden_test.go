package model_test

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// goldenVariants are the synthetic models of scripts/model-goldens/gen.sh (keep in step).
var goldenVariants = map[string]func() synth.Options{
	"llama": func() synth.Options { return synth.Tiny("llama") },
	"llama-tied-rope3": func() synth.Options {
		o := synth.Tiny("llama")
		o.Tied, o.RopeScaling, o.MaxPos = true, "llama3", 256
		return o
	},
	"llama-bf16": func() synth.Options { o := synth.Tiny("llama"); o.DType = "bf16"; return o },
	"qwen2":      func() synth.Options { return synth.Tiny("qwen2") },
	"qwen3":      func() synth.Options { return synth.Tiny("qwen3") },
	"qwen3-lora": func() synth.Options { return synth.Tiny("qwen3") },
	// Mistral: every layer windowed to 8 positions (the 40 tokens cross it, in the prefill
	// and the decode steps), head_dim 32 with hidden 64 and 4 heads.
	"mistral":      func() synth.Options { return synth.Tiny("mistral") },
	"mistral-lora": func() synth.Options { return synth.Tiny("mistral") },
	// Ministral: layer_types alternate a layer windowed to 8 positions and a full one.
	"ministral": func() synth.Options { return synth.Tiny("ministral") },
}

type golden struct {
	Variant       string      `json:"variant"`
	Transformers  string      `json:"transformers"`
	WeightsSHA256 string      `json:"weights_sha256"`
	Tokens        []int       `json:"tokens"`
	Logits        [][]float64 `json:"logits"`
	Adapter       string      `json:"adapter"`
}

func readGolden(t *testing.T, variant string) golden {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "goldens", variant+".json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.NewDecoder(zr).Decode(&g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestLogitsMatchTransformers compares the forward pass with logits that Hugging Face
// transformers (and peft for the adapter) computed in float64 on the same weights.
func TestLogitsMatchTransformers(t *testing.T) {
	for variant, opts := range goldenVariants {
		t.Run(variant, func(t *testing.T) {
			g := readGolden(t, variant)
			dir := t.TempDir()
			o := opts()
			o.Std = 0.08
			if err := synth.Write(dir, o); err != nil {
				t.Fatal(err)
			}
			wf, err := os.Open(filepath.Join(dir, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			io.Copy(h, wf)
			wf.Close()
			if got := hex.EncodeToString(h.Sum(nil)); got != g.WeightsSHA256 {
				t.Fatalf("synth wrote other weights than the goldens were made from (%s vs %s): rerun scripts/model-goldens/gen.sh", got, g.WeightsSHA256)
			}
			m, err := model.Load(dir, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			m.BF16MinRows = 0 // f32 arithmetic, as the goldens (bf16 arithmetic: TestBF16DecodeAgrees)
			checkGoldenLogits(t, m, g, filepath.Join("testdata", "goldens"), 8, 25, 1e-4)
		})
	}
}

// checkGoldenLogits runs golden g through m over a paged cache of numBlocks blocks, with g's
// adapter (loaded from goldenDir) if it names one: the first prefill tokens in one step, the
// rest as decode steps; it fails unless every position's logits agree with transformers' to
// tol relative, and logs the worst relative error.
func checkGoldenLogits(t *testing.T, m *model.Model, g golden, goldenDir string, numBlocks, prefill int, tol float64) {
	t.Helper()
	var adapter *model.LoRA
	if g.Adapter != "" {
		var err error
		if adapter, err = model.LoadLoRA(filepath.Join(goldenDir, g.Adapter), &m.Config); err != nil {
			t.Fatal(err)
		}
	}
	seq := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: numBlocks}).NewSequence()
	var got [][]float32
	for at := 0; at < len(g.Tokens); {
		n := 1
		if at == 0 {
			n = prefill
		}
		out, err := m.Forward([]model.Step{{Seq: seq, Tokens: g.Tokens[at : at+n], LogitsAt: all(n), Adapter: adapter}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out[0]...)
		at += n
	}
	worst := 0.0
	for p := range g.Logits {
		worst = max(worst, relErr(got[p], g.Logits[p]))
	}
	if worst > tol {
		t.Fatalf("relative error %.3g against transformers %s", worst, g.Transformers)
	}
	t.Logf("max relative error %.2g", worst)
}

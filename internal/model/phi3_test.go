package model_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// phi3Opts are the synthetic Phi-3 models of scripts/model-goldens/phi3.sh (keep in step).
var phi3Opts = map[string]func() synth.Options{
	"phi3": func() synth.Options { return synth.Tiny("phi3") },
	"phi3window": func() synth.Options {
		o := synth.Tiny("phi3")
		o.SlidingWindow = 16
		return o
	},
	"phi4mini": func() synth.Options {
		o := synth.Tiny("phi3")
		o.PartialRotary, o.Tied = 0.75, true
		return o
	},
}

// phi3Variants maps each golden to its model.
var phi3Variants = map[string]string{"phi3": "phi3", "phi3-long": "phi3", "phi4mini": "phi4mini",
	"phi4mini-long": "phi4mini", "phi3-lora": "phi3", "phi3window": "phi3window"}

func loadPhi3(t *testing.T, name, wantSHA string) *model.Model {
	t.Helper()
	dir := t.TempDir()
	o := phi3Opts[name]()
	o.Std = 0.08
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	if wantSHA != "" {
		wf, err := os.Open(filepath.Join(dir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		io.Copy(h, wf)
		wf.Close()
		if got := hex.EncodeToString(h.Sum(nil)); got != wantSHA {
			t.Fatalf("synth wrote other weights than the goldens were made from (%s vs %s): rerun scripts/model-goldens/phi3.sh", got, wantSHA)
		}
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestPhi3LogitsMatchTransformers compares Phi-3 / Phi-4-mini logits (fused q/k/v and
// gate/up weights, LongRoPE short and long factors with their attention factor, partial
// rotary dimensions, tied embeddings, a PEFT adapter on qkv_proj/o_proj/gate_up_proj/
// down_proj) with transformers' in float64: a prefill of 25 tokens (70 for the 100-token
// -long variants, so that every step is past original_max_position_embeddings 64, as in
// transformers' one pass) and then one decode step per token over the paged cache.
func TestPhi3LogitsMatchTransformers(t *testing.T) {
	for variant, base := range phi3Variants {
		t.Run(variant, func(t *testing.T) {
			g := readGolden(t, variant)
			m := loadPhi3(t, base, g.WeightsSHA256)
			prefill := 25
			if strings.HasSuffix(variant, "-long") {
				prefill = 70
			}
			checkGoldenLogits(t, m, g, filepath.Join("testdata", "goldens"), 16, prefill, 1e-4)
		})
	}
}

// TestPhi3GoldenNeedsWindow: Phi3ForCausalLM's sliding_window (16 here) windows every layer
// in transformers, and the phi3window golden depends on it.
func TestPhi3GoldenNeedsWindow(t *testing.T) {
	o := phi3Opts["phi3window"]()
	o.Std = 0.08
	checkGoldenNeedsWindow(t, "phi3window", o)
}

// TestPhi3MixedBatch runs the adapter's golden and the base golden as one batch (two
// sequences, one with the adapter) and a long prefill beside them.
func TestPhi3MixedBatch(t *testing.T) {
	gl, gb, glong := readGolden(t, "phi3-lora"), readGolden(t, "phi3"), readGolden(t, "phi3-long")
	m := loadPhi3(t, "phi3", gb.WeightsSHA256)
	adapter, err := model.LoadLoRA(filepath.Join("testdata", "goldens", gl.Adapter), &m.Config)
	if err != nil {
		t.Fatal(err)
	}
	cache := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 32})
	a, b, c := cache.NewSequence(), cache.NewSequence(), cache.NewSequence()
	out, err := m.Forward([]model.Step{
		{Seq: a, Tokens: gl.Tokens, LogitsAt: all(len(gl.Tokens)), Adapter: adapter},
		{Seq: b, Tokens: gb.Tokens, LogitsAt: all(len(gb.Tokens))},
		{Seq: c, Tokens: glong.Tokens, LogitsAt: all(len(glong.Tokens))},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range []golden{gl, gb, glong} {
		worst := 0.0
		for p := range g.Logits {
			worst = max(worst, relErr(out[i][p], g.Logits[p]))
		}
		if worst > 1e-4 {
			t.Fatalf("%s in a mixed batch: relative error %.3g", g.Variant, worst)
		}
	}
}

// TestPhi3GreedyDecode decodes 20 tokens greedily one at a time over the cache and checks
// each against the argmax of a one-shot prefill of the same tokens (all within the short
// factors' range), for both synthetic shapes.
func TestPhi3GreedyDecode(t *testing.T) {
	for name := range phi3Opts {
		t.Run(name, func(t *testing.T) {
			m := loadPhi3(t, name, "")
			cache := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 16})
			seq := cache.NewSequence()
			toks := []int{5, 17, 300, 42, 9}
			out, err := m.Forward([]model.Step{{Seq: seq, Tokens: toks, LogitsAt: []int{len(toks) - 1}}})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 20; i++ {
				next := argmax(out[0][0])
				ref := cache.NewSequence()
				full, err := m.Forward([]model.Step{{Seq: ref, Tokens: toks, LogitsAt: []int{len(toks) - 1}}})
				if err != nil {
					t.Fatal(err)
				}
				ref.Free()
				if want := argmax(full[0][0]); want != next {
					t.Fatalf("step %d: decode picked %d, a full prefill %d", i, next, want)
				}
				toks = append(toks, next)
				if out, err = m.Forward([]model.Step{{Seq: seq, Tokens: []int{next}, LogitsAt: []int{0}}}); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("greedy tokens %v", toks[5:])
		})
	}
}

func TestPhi3ConfigRefusals(t *testing.T) {
	base := `{"architectures":["Phi3ForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
	"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":512,"max_position_embeddings":256,
	"original_max_position_embeddings":64,%s}`
	f8 := `[1,1,1,1,1,1,1,1]`
	for _, c := range []struct{ extra, want string }{
		{`"sliding_window":-1`, "sliding_window"},
		{`"rope_scaling":{"type":"dynamic","factor":2}`, `rope_type "dynamic"`},
		{`"rope_scaling":{"type":"longrope","short_factor":` + f8 + `,"long_factor":` + f8 + `,"long_mscale":1.2}`, "long_mscale"},
		{`"rope_scaling":{"type":"longrope","short_factor":[1,1],"long_factor":` + f8 + `}`, "short_factor has 2 values"},
		{`"rope_scaling":{"type":"longrope","long_factor":` + f8 + `}`, "needs short_factor"},
		{`"partial_rotary_factor":0.2`, "partial_rotary_factor 0.2"},
		{`"partial_rotary_factor":0.75,"rope_parameters":{"partial_rotary_factor":0.5}`, "differ"},
		{`"hidden_act":"gelu_new"`, "hidden_act"},
	} {
		_, err := model.ParseConfig([]byte(strings.Replace(base, "%s", c.extra, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.extra, err, c.want)
		}
	}
	// Phi-4-mini's config: partial rotary 0.75 of 128, longrope (legacy "type"), tied.
	cfg, err := model.ParseConfig([]byte(strings.Replace(base, "%s", `"partial_rotary_factor":0.75,"sliding_window":262144,"tie_word_embeddings":true,
		"rope_scaling":{"type":"longrope","short_factor":[1,1,1,1,1,1],"long_factor":[2,2,2,2,2,2]}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RotaryDims() != 12 || cfg.RopeScaling.Kind() != "longrope" || cfg.RopeScaling.OriginalMaxPositionEmbeddings != 64 || cfg.RMSNormEps != 1e-5 {
		t.Fatalf("parsed %+v %+v", cfg, cfg.RopeScaling)
	}
	if got, want := cfg.RopeScaling.AttentionFactor, 1.1547005383792515; got-want > 1e-12 || want-got > 1e-12 { // √(1 + ln 4/ln 64)
		t.Fatalf("attention factor %v, want %v", got, want)
	}
	if got := model.TargetModules(cfg); strings.Join(got, ",") != "o_proj,down_proj,qkv_proj,gate_up_proj" {
		t.Fatalf("phi3 LoRA targets %v", got)
	}
}

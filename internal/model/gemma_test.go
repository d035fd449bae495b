package model_test

import (
	"encoding/binary"
	"maps"
	"reflect"
	"strings"

	"github.com/honeai/hone/internal/gguf"
	"math"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// Gemma's golden variants (scripts/model-goldens/gen.sh): TestLogitsMatchTransformers runs
// them with the others.
func init() {
	for _, a := range []string{"gemma2", "gemma3"} {
		goldenVariants[a] = func() synth.Options { return synth.Tiny(a) }
		goldenVariants[a+"-lora"] = func() synth.Options { return synth.Tiny(a) }
	}
}

func TestGemmaConfig(t *testing.T) {
	dir := t.TempDir()
	if err := synth.Write(dir, synth.Tiny("gemma3")); err != nil {
		t.Fatal(err)
	}
	c, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Arch != "gemma3" || !c.QKNorm || !c.PostNorms || !c.GeluTanh || c.SlidingWindow != 8 || c.RopeLocalTheta != 1000 ||
		c.RopeScaling == nil || c.RopeScaling.Factor != 2.5 || c.QueryPreAttnScalar != 24 || c.FinalSoftcap != 0 {
		t.Fatalf("config %+v", c)
	}
}

// TestGemmaGreedyDecode: greedy decoding through the paged cache (one token a step, beside
// another sequence in the same batch) picks the same tokens as re-running the whole prefix
// each step, past the sliding window.
func TestGemmaGreedyDecode(t *testing.T) {
	for _, arch := range []string{"gemma2", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			o := synth.Tiny(arch)
			o.Std = 0.2
			m := synthModel(t, o)
			cache := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 64, BlockSize: 4})
			seq, other := cache.NewSequence(), cache.NewSequence()
			prompt := []int{5, 17, 200, 3, 99}
			toks := append([]int(nil), prompt...)
			out, err := m.Forward([]model.Step{{Seq: seq, Tokens: prompt, LogitsAt: []int{len(prompt) - 1}},
				{Seq: other, Tokens: []int{7, 8, 9}, LogitsAt: []int{2}}})
			if err != nil {
				t.Fatal(err)
			}
			next := argmax(out[0][0])
			for i := 0; i < 20; i++ {
				toks = append(toks, next)
				ref := lastLogits(t, m, toks)
				out, err := m.Forward([]model.Step{{Seq: seq, Tokens: []int{next}, LogitsAt: []int{0}},
					{Seq: other, Tokens: []int{11 + i}, LogitsAt: []int{0}}})
				if err != nil {
					t.Fatal(err)
				}
				if g, w := argmax(out[0][0]), argmax(ref); g != w {
					t.Fatalf("step %d: decode picks %d, full prefill %d", i, g, w)
				}
				for j := range ref {
					if d := math.Abs(float64(out[0][0][j] - ref[j])); d > 1e-4 {
						t.Fatalf("step %d: logit %d differs by %.3g", i, j, d)
					}
				}
				next = argmax(out[0][0])
			}
			t.Logf("greedy: %v", toks[len(prompt):])
		})
	}
}

// TestGemmaGGUFMatchesDirectory: a tiny Gemma 2 and Gemma 3 written as GGUF files in
// llama.cpp's layout (its tensor names, norms stored as 1 + weight, its metadata keys) load
// with the same config and the same logits as their directories.
func TestGemmaGGUFMatchesDirectory(t *testing.T) {
	saved := maps.Clone(hfToGGUF)
	defer func() { hfToGGUF = saved }()
	hfToGGUF["post_attention_layernorm"] = "post_attention_norm"
	hfToGGUF["pre_feedforward_layernorm"] = "ffn_norm"
	hfToGGUF["post_feedforward_layernorm"] = "post_ffw_norm"
	for _, arch := range []string{"gemma2", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			o := synth.Tiny(arch)
			o.Std = 0.2
			// What llama.cpp's metadata can say: a query scale of head_dim and, for Gemma 3,
			// a local RoPE base of 10000 (synth writes a tenth of rope_theta).
			o.QueryPreAttnScalar = float64(o.HeadDim)
			o.RopeTheta = 100000
			dir, path := synthGGUF(t, o, func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
				a := arch + "."
				meta = append(meta, gguf.KV{Key: a + "attention.sliding_window", Value: uint32(o.SlidingWindow)},
					gguf.KV{Key: a + "attention.sliding_window_pattern", Value: uint32(2)})
				if arch == "gemma2" {
					meta = append(meta, gguf.KV{Key: a + "attn_logit_softcapping", Value: float32(2.5)},
						gguf.KV{Key: a + "final_logit_softcapping", Value: float32(5.5)})
				} else {
					meta = append(meta, gguf.KV{Key: a + "rope.scaling.type", Value: "linear"},
						gguf.KV{Key: a + "rope.scaling.factor", Value: float32(2.5)})
				}
				for i := range ts {
					if strings.HasSuffix(ts[i].Name, "norm.weight") {
						v := make([]float32, len(ts[i].Data)/4)
						for j := range v {
							v[j] = math.Float32frombits(binary.LittleEndian.Uint32(ts[i].Data[4*j:])) + 1
						}
						ts[i].Data = f32Bytes(v)
					}
				}
				return meta, ts
			})
			want, err := model.Load(dir, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer want.Close()
			got, err := model.Load(path, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			if w, g := want.Config.BlockExtras, got.Config.BlockExtras; !reflect.DeepEqual(w, g) {
				t.Fatalf("block extras\n got %+v\nwant %+v", g, w)
			}
			prompt := make([]int, 30)
			for i := range prompt {
				prompt[i] = (i*37 + 11) % o.Vocab
			}
			gl, wl := lastLogits(t, got, prompt), lastLogits(t, want, prompt)
			worst := 0.0
			for i := range wl {
				worst = max(worst, math.Abs(float64(gl[i]-wl[i])))
			}
			if worst > 1e-5 {
				t.Fatalf("logits differ by up to %.3g", worst)
			}
			t.Logf("max logit difference %.2g", worst)
		})
	}
}

// Gemma configs with a field Hone does not implement are refused, naming it.
func TestGemmaConfigRefusals(t *testing.T) {
	base := `"architectures":["Gemma3ForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":512`
	for _, c := range []struct{ extra, want string }{
		{`"hidden_activation":"gelu"`, "hidden_activation"},
		{`"use_bidirectional_attention":true`, "use_bidirectional_attention"},
		{`"rope_parameters":{"full_attention":{"rope_type":"default","rope_theta":1e6},"sliding_attention":{"rope_type":"linear","factor":2,"rope_theta":1e4}}`, "sliding_attention"},
		{`"rope_scaling":{"rope_type":"yarn","factor":2}`, "yarn"},
		{`"layer_types":["sliding_attention","chunked_attention"]`, "chunked_attention"},
		{`"quantization_config":{"quant_method":"gptq"}`, "quantization_config"},
	} {
		_, err := model.ParseConfig([]byte("{" + base + "," + c.extra + "}"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s", c.extra, err, c.want)
		}
	}
	if _, err := model.ParseConfig([]byte("{" + strings.Replace(base, "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration", 1) + "}")); err == nil {
		t.Error("Gemma3ForConditionalGeneration accepted")
	}
	c, err := model.ParseConfig([]byte(`{"architectures":["Gemma2ForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_hidden_layers":4,"num_attention_heads":4,"vocab_size":512}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.AttnSoftcap != 50 || c.FinalSoftcap != 30 || c.HeadDim != 256 || !c.TieWordEmbeddings || c.SlidingWindow != 4096 ||
		!c.Sliding[0] || c.Sliding[1] || !c.Sliding[2] || c.QueryPreAttnScalar != 256 {
		t.Fatalf("Gemma 2 defaults: %+v", c)
	}
}

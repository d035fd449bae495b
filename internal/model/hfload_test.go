package model_test

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/synth"
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
	cache := model.NewKVCache(&m.Config, model.KVCacheOptions{BlockSize: 16, NumBlocks: 4})
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

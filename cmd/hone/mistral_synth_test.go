package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
)

// TestModelsSynthMistral: `hone models synth --arch mistral` writes a tiny MistralForCausalLM
// (every layer windowed to 8 positions, head_dim 32 other than hidden/heads) that loads and
// runs past the window.
func TestModelsSynthMistral(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	var out, errb bytes.Buffer
	if code := runModels([]string{"synth", "--arch", "mistral", "--out", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := &m.Config
	if c.Arch != "mistral" || c.SlidingWindow != 8 || !c.IsSliding(0) || !c.IsSliding(c.NumLayers-1) || c.HeadDim != 32 || c.HiddenSize != 64 || c.NumHeads != 4 {
		t.Fatalf("config %+v", c)
	}
	toks := make([]int, 20)
	for i := range toks {
		toks[i] = i + 1
	}
	seq := model.NewKVCache(c, kvcache.Options{NumBlocks: 8}).NewSequence()
	if _, err := m.Forward([]model.Step{{Seq: seq, Tokens: toks, LogitsAt: []int{19}}}); err != nil {
		t.Fatal(err)
	}
}

// TestModelsSynthMinistral: `hone models synth --arch ministral --sliding-window 4` writes a
// MinistralForCausalLM whose layer_types alternate a windowed layer and a full one.
func TestModelsSynthMinistral(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	var out, errb bytes.Buffer
	if code := runModels([]string{"synth", "--arch", "ministral", "--sliding-window", "4", "--out", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	c, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Arch != "mistral" || c.SlidingWindow != 4 || !c.IsSliding(0) || c.IsSliding(1) {
		t.Fatalf("config %+v", c)
	}
}

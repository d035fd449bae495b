package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
)

// TestModelsSynthPhi3: `hone models synth --arch phi3` writes a Phi-4-mini-shaped model
// (partial rotary, tied, LongRoPE) that loads and runs.
func TestModelsSynthPhi3(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	var out, errb bytes.Buffer
	code := runModels([]string{"synth", "--arch", "phi3", "--out", dir, "--partial-rotary", "0.75", "--tied"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := &m.Config
	if c.Arch != "phi3" || c.RotaryDims() != 12 || !c.TieWordEmbeddings || c.RopeScaling == nil || c.RopeScaling.Kind() != "longrope" || c.RopeScaling.OriginalMaxPositionEmbeddings != 64 {
		t.Fatalf("config %+v", c)
	}
	seq := model.NewKVCache(c, kvcache.Options{NumBlocks: 8}).NewSequence()
	if _, err := m.Forward([]model.Step{{Seq: seq, Tokens: []int{1, 2, 3}, LogitsAt: []int{2}}}); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := runModels([]string{"synth", "--arch", "phi3", "--out", filepath.Join(t.TempDir(), "x"), "--partial-rotary", "0.2"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "partial rotary") {
		t.Fatalf("odd rotary dimensions: exit %d, %q", code, errb.String())
	}
}

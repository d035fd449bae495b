package model_test

import (
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// TestMistralGoldenNeedsWindow: the mistral golden exercises the sliding window. With the
// window switched off, the first 8 positions (inside the window) still match transformers and
// later ones do not.
func TestMistralGoldenNeedsWindow(t *testing.T) {
	o := synth.Tiny("mistral")
	o.Std = 0.08
	checkGoldenNeedsWindow(t, "mistral", o)
}

// checkGoldenNeedsWindow loads o (written by synth) and checks that the golden's logits are
// matched inside o's sliding window and missed past it when the window is turned off: the
// golden exercises the window.
func checkGoldenNeedsWindow(t *testing.T, golden string, o synth.Options) {
	t.Helper()
	g := readGolden(t, golden)
	dir := t.TempDir()
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w := o.SlidingWindow
	if m.Config.SlidingWindow != w || w == 0 {
		t.Fatalf("sliding window %d, want %d", m.Config.SlidingWindow, w)
	}
	m.Config.SlidingWindow = 0
	seq := model.NewKVCache(&m.Config, model.KVCacheOptions{NumBlocks: 8}).NewSequence()
	out, err := m.Forward([]model.Step{{Seq: seq, Tokens: g.Tokens, LogitsAt: all(len(g.Tokens))}})
	if err != nil {
		t.Fatal(err)
	}
	inside, outside := 0.0, 0.0
	for p := range g.Logits {
		e := relErr(out[0][p], g.Logits[p])
		if p < w {
			inside = max(inside, e)
		} else {
			outside = max(outside, e)
		}
	}
	if inside > 1e-4 || outside < 1e-2 {
		t.Fatalf("without the window: error %.3g inside it, %.3g past it", inside, outside)
	}
	t.Logf("without the window: error %.2g inside it, %.2g past it", inside, outside)
}

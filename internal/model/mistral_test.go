package model_test

import (
	"math"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kvcache"
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
	m := synthModel(t, o)
	w := o.SlidingWindow
	if m.Config.SlidingWindow != w || w == 0 {
		t.Fatalf("sliding window %d, want %d", m.Config.SlidingWindow, w)
	}
	m.Config.SlidingWindow = 0
	seq := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 8}).NewSequence()
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

// TestMinistralGoldenNeedsLayerTypes: the ministral golden (transformers'
// MinistralForCausalLM, layer_types sliding then full) loads as Mistral's block with layer 0
// windowed and layer 1 not, and is missed past the window both when every layer is windowed
// (MistralForCausalLM's rule) and when none is.
func TestMinistralGoldenNeedsLayerTypes(t *testing.T) {
	g := readGolden(t, "ministral")
	o := synth.Tiny("ministral")
	o.Std = 0.08
	m := synthModel(t, o)
	if c := m.Config; c.Arch != "mistral" || c.SlidingWindow != 8 || !c.IsSliding(0) || c.IsSliding(1) {
		t.Fatalf("ministral config: arch %s, window %d, sliding %v", c.Arch, c.SlidingWindow, c.Sliding)
	}
	for _, v := range []struct {
		name    string
		window  int
		sliding []bool
	}{{"every layer windowed", 8, nil}, {"no window", 0, nil}} {
		m.Config.SlidingWindow, m.Config.Sliding = v.window, v.sliding
		seq := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 8}).NewSequence()
		out, err := m.Forward([]model.Step{{Seq: seq, Tokens: g.Tokens, LogitsAt: all(len(g.Tokens))}})
		if err != nil {
			t.Fatal(err)
		}
		outside := 0.0
		for p := 8; p < len(g.Logits); p++ {
			outside = max(outside, relErr(out[0][p], g.Logits[p]))
		}
		if outside < 1e-2 {
			t.Errorf("%s: error %.3g past the window, want the golden to tell", v.name, outside)
		}
		t.Logf("%s: error %.2g past the window", v.name, outside)
	}
}

// TestMistralGGUFRunsFullAttention: llama.cpp's converter writes MistralForCausalLM as a
// llama GGUF with no sliding-window key (llama.cpp's llama has none), so a Mistral GGUF
// attends to every earlier position, as llama.cpp computes it: Hone loads it as llama with
// no window and gives the directory's logits with the window turned off (which differ from
// the windowed ones past the window). A llama GGUF that does carry a window key is refused by
// name, and the export refuses a Mistral whose window binds.
func TestMistralGGUFRunsFullAttention(t *testing.T) {
	o := synth.Tiny("mistral")
	o.Std = 0.08
	dir, path := synthGGUF(t, o, nil)
	got, err := model.Load(path, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if c := got.Config; c.Arch != "llama" || c.SlidingWindow != 0 || c.HeadDim != 32 {
		t.Fatalf("GGUF config: arch %s, window %d, head_dim %d", c.Arch, c.SlidingWindow, c.HeadDim)
	}
	want, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	tokens := make([]int, 30)
	for i := range tokens {
		tokens[i] = (i*37 + 11) % o.Vocab
	}
	windowed := allLogits(t, want, tokens)
	want.Config.SlidingWindow = 0
	full, gl := allLogits(t, want, tokens), allLogits(t, got, tokens)
	worst, apart := 0.0, 0.0
	for p := range full {
		for j := range full[p] {
			worst = max(worst, math.Abs(float64(gl[p][j]-full[p][j])))
			apart = max(apart, math.Abs(float64(gl[p][j]-windowed[p][j])))
		}
	}
	if worst > 1e-5 || apart < 1e-2 {
		t.Fatalf("GGUF logits: %.3g from full attention, %.3g from the windowed directory", worst, apart)
	}
	_, bad := synthGGUF(t, o, func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
		return append(meta, gguf.KV{Key: "llama.attention.sliding_window", Value: uint32(8)}), ts
	})
	if _, err := model.Load(bad, model.LoadOptions{}); err == nil || !strings.Contains(err.Error(), "llama.attention.sliding_window") {
		t.Fatalf("a llama GGUF with a window key: %v", err)
	}
	if _, _, err := model.GGUFMetadata(&want.Config); err != nil {
		t.Fatalf("export of a Mistral without a window: %v", err)
	}
	want.Config.SlidingWindow = 8
	if _, _, err := model.GGUFMetadata(&want.Config); err == nil || !strings.Contains(err.Error(), "sliding_window 8") {
		t.Fatalf("export of a windowed Mistral: %v", err)
	}
}

// TestMistralGGUFLlamaCpp: llama.cpp (HONE_LLAMA_CPP) continues a Mistral written as a llama
// GGUF as Hone does on the same file (full attention on both sides; 16 greedy tokens of two
// prompts that run past the directory's window of 8).
func TestMistralGGUFLlamaCpp(t *testing.T) {
	bin := llamaCppBin(t)
	o := synth.Tiny("mistral")
	o.Std = 0.3
	_, path := synthGGUF(t, o, nil)
	checkLlamaCppGreedy(t, bin, path)
}

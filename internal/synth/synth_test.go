package synth_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/tokenizer"
)

func TestWriteLoadsEveryArch(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3", "qwen3moe"} {
		t.Run(arch, func(t *testing.T) {
			dir := t.TempDir()
			o := synth.Tiny(arch)
			o.DType = "bf16"
			if err := synth.Write(dir, o); err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(dir, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.Config.Arch != arch || m.Config.VocabSize != o.Vocab || m.Config.NumLayers != o.Layers {
				t.Fatalf("config %+v", m.Config)
			}
			if m.Layers[0].Q.W.Half == nil {
				t.Fatal("bf16 weights were widened on load")
			}
			tok, err := tokenizer.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if tok.VocabSize() > o.Vocab {
				t.Fatalf("tokenizer has %d tokens, model %d", tok.VocabSize(), o.Vocab)
			}
			text := "Hello, world! <|im_start|>user\nWhat is 2 + 3?<|im_end|> café 東京 😀"
			ids := tok.Encode(text, false)
			if got := tok.Decode(ids, false); got != text {
				t.Fatalf("round trip: %q", got)
			}
			eos, ok := tok.EOS()
			if !ok || tok.TokenString(eos) != "<|im_end|>" {
				t.Fatalf("eos %d %v", eos, ok)
			}
			if !strings.Contains(tok.ChatTemplate(""), "<|im_start|>") {
				t.Fatal("no chat template")
			}
			// generation_config.json lists <|im_end|> first.
			if ids := m.Config.EOSIDs(); len(ids) == 0 || ids[0] != eos {
				t.Fatalf("eos ids %v, tokenizer eos %d", ids, eos)
			}
		})
	}
}

func TestWriteDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	o := synth.Tiny("qwen3")
	for _, d := range []string{a, b} {
		if err := synth.Write(d, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"model.safetensors", "tokenizer.json", "config.json"} {
		x, _ := os.ReadFile(filepath.Join(a, f))
		y, _ := os.ReadFile(filepath.Join(b, f))
		if !bytes.Equal(x, y) || len(x) == 0 {
			t.Fatalf("%s differs between two writes of the same options", f)
		}
	}
	o.Seed = 2
	c := t.TempDir()
	if err := synth.Write(c, o); err != nil {
		t.Fatal(err)
	}
	x, _ := os.ReadFile(filepath.Join(a, "model.safetensors"))
	y, _ := os.ReadFile(filepath.Join(c, "model.safetensors"))
	if bytes.Equal(x, y) {
		t.Fatal("another seed gave the same weights")
	}
}

func TestWriteErrors(t *testing.T) {
	for name, o := range map[string]synth.Options{
		"arch":      {Arch: "gpt2"},
		"no arch":   {},
		"gqa":       {Arch: "llama", Heads: 4, KVHeads: 3},
		"vocab":     {Arch: "llama", Vocab: 100},
		"dtype":     {Arch: "llama", DType: "f16"},
		"hidden":    {Arch: "llama", Hidden: 60, Heads: 4, HeadDim: 16},
		"ropescale": {Arch: "qwen2", RopeScaling: "llama3"},
	} {
		if err := synth.Write(t.TempDir(), o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

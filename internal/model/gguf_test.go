package model_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/tokenizer"
)

// hfToGGUF maps a Hugging Face layer tensor name to llama.cpp's.
var hfToGGUF = map[string]string{
	"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
	"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
	"self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
	"mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}

// permute reorders rows as llama.cpp's converter does for Llama's q and k projections.
func permute(v []float32, rows, heads int) []float32 {
	cols := len(v) / rows
	hd := rows / heads
	out := make([]float32, len(v))
	for h := 0; h < heads; h++ {
		for i := 0; i < hd/2; i++ {
			for j := 0; j < 2; j++ {
				copy(out[(h*hd+2*i+j)*cols:][:cols], v[(h*hd+j*hd/2+i)*cols:][:cols])
			}
		}
	}
	return out
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// synthGGUF writes a tiny synthetic model of arch as a directory and as a GGUF file in
// llama.cpp's layout (the same f32 weights; Llama's q/k rows permuted), with edit applied to
// the metadata and tensors before writing. It returns both paths.
func synthGGUF(t *testing.T, o synth.Options, edit func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData)) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := synth.TokenizerSpec(o.Vocab)
	if err != nil {
		t.Fatal(err)
	}
	tokens := append([]string(nil), spec.Tokens...)
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = 1
	}
	for _, a := range spec.Added {
		tokens = append(tokens, a.Content)
		types = append(types, map[bool]int32{true: 3, false: 4}[a.Special])
	}
	for len(tokens) < cfg.VocabSize { // padding rows, as llama.cpp names them
		tokens = append(tokens, fmt.Sprintf("[PAD%d]", len(tokens)))
		types = append(types, 5)
	}
	merges := make([]string, len(spec.Merges))
	for i, m := range spec.Merges {
		merges[i] = m[0] + " " + m[1]
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	eos, _ := tok.EOS()
	pad, _ := tok.TokenID(spec.PadToken)
	a := cfg.Arch
	meta := []gguf.KV{
		{Key: "general.architecture", Value: a},
		{Key: a + ".block_count", Value: uint32(cfg.NumLayers)},
		{Key: a + ".context_length", Value: uint32(cfg.MaxPositionEmbeddings)},
		{Key: a + ".embedding_length", Value: uint32(cfg.HiddenSize)},
		{Key: a + ".feed_forward_length", Value: uint32(cfg.IntermediateSize)},
		{Key: a + ".attention.head_count", Value: uint32(cfg.NumHeads)},
		{Key: a + ".attention.head_count_kv", Value: uint32(cfg.NumKVHeads)},
		{Key: a + ".attention.key_length", Value: uint32(cfg.HeadDim)},
		{Key: a + ".attention.value_length", Value: uint32(cfg.HeadDim)},
		{Key: a + ".rope.freq_base", Value: float32(cfg.RopeTheta)},
		{Key: a + ".attention.layer_norm_rms_epsilon", Value: float32(cfg.RMSNormEps)},
		{Key: "tokenizer.ggml.model", Value: "gpt2"},
		{Key: "tokenizer.ggml.pre", Value: "qwen2"},
		{Key: "tokenizer.ggml.tokens", Value: tokens},
		{Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.merges", Value: merges},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(eos)},
		{Key: "tokenizer.ggml.padding_token_id", Value: uint32(pad)},
		{Key: "tokenizer.ggml.add_bos_token", Value: false},
		{Key: "tokenizer.chat_template", Value: tok.ChatTemplate("")},
	}
	f, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []gguf.TensorData
	for _, name := range f.Names() {
		tn, _ := f.Tensor(name)
		v, err := tn.F32()
		if err != nil {
			t.Fatal(err)
		}
		var gname string
		switch {
		case name == "model.embed_tokens.weight":
			gname = "token_embd.weight"
		case name == "model.norm.weight":
			gname = "output_norm.weight"
		case name == "lm_head.weight":
			gname = "output.weight"
		default:
			rest := strings.TrimPrefix(name, "model.layers.")
			layer, rest, _ := strings.Cut(rest, ".")
			i := strings.LastIndex(rest, ".")
			gname = "blk." + layer + "." + hfToGGUF[rest[:i]] + rest[i:]
			if a == "llama" && strings.Contains(name, "q_proj") {
				v = permute(v, tn.Shape[0], cfg.NumHeads)
			} else if a == "llama" && strings.Contains(name, "k_proj") {
				v = permute(v, tn.Shape[0], cfg.NumKVHeads)
			}
		}
		dims := make([]uint64, len(tn.Shape))
		for i, d := range tn.Shape {
			dims[len(dims)-1-i] = uint64(d)
		}
		ts = append(ts, gguf.TensorData{Name: gname, Dims: dims, Type: gguf.F32, Data: f32Bytes(v)})
	}
	if len(cfg.BOSTokenID) > 0 {
		meta = append(meta, gguf.KV{Key: "tokenizer.ggml.bos_token_id", Value: uint32(cfg.BOSTokenID[0])})
	}
	if edit != nil {
		meta, ts = edit(meta, ts)
	}
	path = filepath.Join(t.TempDir(), "model.gguf")
	if err := gguf.WriteFile(path, meta, ts); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

// lastLogits runs prompt through m and returns the logits after its last token.
func lastLogits(t *testing.T, m *model.Model, prompt []int) []float32 {
	t.Helper()
	cache := model.NewKVCache(&m.Config, model.KVCacheOptions{NumBlocks: 16})
	logits, err := m.Forward([]model.Step{{Seq: cache.NewSequence(), Tokens: prompt, LogitsAt: []int{len(prompt) - 1}}})
	if err != nil {
		t.Fatal(err)
	}
	return logits[0][0]
}

// A tiny synthetic model of each architecture written as a GGUF file in llama.cpp's layout
// loads with the same config, the same tokenizer and the same logits as its directory.
func TestSyntheticGGUFMatchesDirectory(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			o := synth.Tiny(arch)
			o.Std = 0.1
			dir, path := synthGGUF(t, o, nil)
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
			wc, gc := want.Config, got.Config
			// What a GGUF does not say: config.json's BOS (synth writes none either way) and
			// generation_config.json's EOS list, which the GGUF's eos id stands for.
			wc.Generation, gc.Generation = model.GenerationConfig{}, model.GenerationConfig{}
			wc.EOSTokenID, gc.EOSTokenID = nil, nil
			if !reflect.DeepEqual(wc, gc) {
				t.Fatalf("config\n got %+v\nwant %+v", gc, wc)
			}
			// The GGUF holds one EOS id (synth's generation_config.json lists two).
			if e := got.Config.EOSIDs(); len(e) != 1 || !slices.Contains(want.Config.EOSIDs(), e[0]) {
				t.Errorf("EOS ids %v, want one of %v", e, want.Config.EOSIDs())
			}
			wt, err := tokenizer.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			gt, err := tokenizer.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"Hello, world! 1234", "<|im_start|>user\nhi<think>x</think><|im_end|>", "  tabs\tand\n\nnewlines  "} {
				if g, w := gt.Encode(s, true), wt.Encode(s, true); !slices.Equal(g, w) {
					t.Errorf("%q: ids %v, want %v", s, g, w)
				}
			}
			if gt.ChatTemplate("") != wt.ChatTemplate("") {
				t.Error("chat templates differ")
			}
			prompt := wt.Encode("The quick brown fox jumps over the lazy dog.", true)
			gl, wl := lastLogits(t, got, prompt), lastLogits(t, want, prompt)
			for i := range wl {
				if math.Abs(float64(gl[i]-wl[i])) > 1e-5 {
					t.Fatalf("logit %d: %v, want %v", i, gl[i], wl[i])
				}
			}
		})
	}
}

// A GGUF that lacks a required key, names an architecture or a key Hone does not run, or
// holds a tensor type that cannot be dequantized is refused with an error that names it.
func TestGGUFRefused(t *testing.T) {
	drop := func(key string) func([]gguf.KV, []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
		return func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
			return slices.DeleteFunc(meta, func(kv gguf.KV) bool { return kv.Key == key }), ts
		}
	}
	set := func(key string, v any) func([]gguf.KV, []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
		return func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
			meta = slices.DeleteFunc(meta, func(kv gguf.KV) bool { return kv.Key == key })
			return append(meta, gguf.KV{Key: key, Value: v}), ts
		}
	}
	// A type of 32-element blocks that the reader cannot dequantize.
	var bad gguf.TensorType
	for _, ty := range []gguf.TensorType{gguf.Q5_0, gguf.Q5_1, gguf.Q8_1, gguf.IQ4_NL} {
		if !ty.Dequantizable() {
			bad = ty
			break
		}
	}
	quant := func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
		for i := range ts {
			if ts[i].Name == "blk.1.ffn_up.weight" {
				n := int(ts[i].Dims[0] * ts[i].Dims[1])
				ts[i].Type, ts[i].Data = bad, make([]byte, n/bad.BlockSize()*bad.BlockBytes())
			}
		}
		return meta, ts
	}
	cases := []struct {
		name  string
		edit  func([]gguf.KV, []gguf.TensorData) ([]gguf.KV, []gguf.TensorData)
		wants []string
	}{
		{"no block_count", drop("llama.block_count"), []string{"llama.block_count"}},
		{"no rms eps", drop("llama.attention.layer_norm_rms_epsilon"), []string{"llama.attention.layer_norm_rms_epsilon"}},
		{"no architecture", drop("general.architecture"), []string{"general.architecture"}},
		{"unknown architecture", set("general.architecture", "gemma2"), []string{"gemma2", "general.architecture"}},
		{"unknown key", set("llama.expert_count", uint32(8)), []string{"llama.expert_count"}},
		{"yarn", set("llama.rope.scaling.type", "yarn"), []string{"llama.rope.scaling.type", "yarn"}},
		{"partial rotary", set("llama.rope.dimension_count", uint32(8)), []string{"llama.rope.dimension_count"}},
		{"sentencepiece", set("tokenizer.ggml.model", "llama"), []string{"tokenizer.ggml.model", `"llama"`}},
		{"unknown pre-tokenizer", set("tokenizer.ggml.pre", "deepseek-llm"), []string{"tokenizer.ggml.pre", "deepseek-llm"}},
	}
	if bad != 0 {
		cases = append(cases, struct {
			name  string
			edit  func([]gguf.KV, []gguf.TensorData) ([]gguf.KV, []gguf.TensorData)
			wants []string
		}{"quantized type", quant, []string{"blk.1.ffn_up.weight", bad.String()}})
	}
	o := synth.Tiny("llama")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, path := synthGGUF(t, o, c.edit)
			_, err := model.Load(path, model.LoadOptions{})
			if err == nil {
				_, err = tokenizer.Load(path)
			}
			if err == nil {
				t.Fatal("loaded")
			}
			t.Log(err)
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}

// The SmolLM2-135M-Instruct Q4_1 GGUF loads as the directory that smollm2_dir.py makes from
// it (the same tensors dequantized, q/k rows unpermuted, in Hugging Face's layout): the same
// config, token ids, chat-template rendering, logits and greedy tokens.
func TestGGUFMatchesSmolLM2Directory(t *testing.T) {
	path, dir := os.Getenv("HONE_SMOLLM2_GGUF"), os.Getenv("HONE_SMOLLM2_DIR")
	if path == "" || dir == "" {
		t.Skip("HONE_SMOLLM2_GGUF and HONE_SMOLLM2_DIR are not set (scripts/test-setup.sh)")
	}
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
	if !reflect.DeepEqual(got.Config, want.Config) {
		t.Fatalf("config\n got %+v\nwant %+v", got.Config, want.Config)
	}
	wt, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	gt, err := tokenizer.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gt.Config().SpecialTokens, wt.Config().SpecialTokens) {
		t.Errorf("special tokens %v, want %v", gt.Config().SpecialTokens, wt.Config().SpecialTokens)
	}
	for _, s := range []string{"", "Hello world", "12345678901234567890 3.14159", "  leading\n\n\ttabs  ",
		"I'm here, you're there", "naïve café 日本語 🤗 emoji", "<|im_start|>user\nhi<|im_end|>", "\x04\xc0 bytes without tokens",
		"def f(x):\n    return x ** 2  # square\n"} {
		if g, w := gt.Encode(s, true), wt.Encode(s, true); !slices.Equal(g, w) {
			t.Errorf("%q: ids %v, want %v", s, g, w)
		}
	}
	wtpl, err := chattemplate.Compile(wt.ChatTemplate(""))
	if err != nil {
		t.Fatal(err)
	}
	gtpl, err := chattemplate.Compile(gt.ChatTemplate(""))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"What is the capital of France?", "Write a haiku about the sea.", "2+2="} {
		msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": q}})
		in := chattemplate.Input{Messages: msgs, AddGenerationPrompt: true, SpecialTokens: wt.Config().SpecialTokens}
		wtext, err := wtpl.Render(in)
		if err != nil {
			t.Fatal(err)
		}
		in.SpecialTokens = gt.Config().SpecialTokens
		gtext, err := gtpl.Render(in)
		if err != nil {
			t.Fatal(err)
		}
		if gtext != wtext {
			t.Fatalf("rendering %q, want %q", gtext, wtext)
		}
		prompt := gt.Encode(gtext, true)
		gs := model.NewKVCache(&got.Config, model.KVCacheOptions{NumBlocks: 8}).NewSequence()
		ws := model.NewKVCache(&want.Config, model.KVCacheOptions{NumBlocks: 8}).NewSequence()
		tokens := prompt
		for step := 0; step < 4; step++ {
			gl, err := got.Forward([]model.Step{{Seq: gs, Tokens: tokens, LogitsAt: []int{len(tokens) - 1}}})
			if err != nil {
				t.Fatal(err)
			}
			wl, err := want.Forward([]model.Step{{Seq: ws, Tokens: tokens, LogitsAt: []int{len(tokens) - 1}}})
			if err != nil {
				t.Fatal(err)
			}
			g, w := gl[0][0], wl[0][0]
			for i := range w {
				if math.Abs(float64(g[i]-w[i])) > 1e-5 {
					t.Fatalf("%q step %d: logit %d = %v, want %v", q, step, i, g[i], w[i])
				}
			}
			tokens = []int{argmax(g)}
			if wa := argmax(w); tokens[0] != wa {
				t.Fatalf("%q step %d: greedy %d, want %d", q, step, tokens[0], wa)
			}
		}
	}
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

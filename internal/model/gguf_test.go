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
	"github.com/honeai/hone/internal/kvcache"
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
func synthGGUF(t testing.TB, o synth.Options, edit func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData)) (dir, path string) {
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
	if a == "mistral" {
		a = "llama" // as llama.cpp's converter writes MistralForCausalLM
	}
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
	// llama.cpp's converter writes a llama3 rope_scaling as rope_freqs.weight, with no
	// rope scaling keys.
	if rs := cfg.RopeScaling; rs != nil && rs.Kind() == "llama3" {
		v := llamaCppRopeFreqs(cfg)
		ts = append(ts, gguf.TensorData{Name: "rope_freqs.weight", Dims: []uint64{uint64(len(v))}, Type: gguf.F32, Data: f32Bytes(v)})
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

// llamaCppRopeFreqs computes rope_freqs.weight for a llama3 rope_scaling as llama.cpp's
// convert_hf_to_gguf.py does (written here from the formula, apart from the engine's code):
// one f32 divisor per rotary frequency base^(-2i/d).
func llamaCppRopeFreqs(c *model.Config) []float32 {
	rs := c.RopeScaling
	old := float64(rs.OriginalMaxPositionEmbeddings)
	lowWavelen, highWavelen := old/rs.LowFreqFactor, old/rs.HighFreqFactor
	out := make([]float32, c.HeadDim/2)
	for i := range out {
		freq := 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(c.HeadDim))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < highWavelen:
			out[i] = 1
		case wavelen > lowWavelen:
			out[i] = float32(rs.Factor)
		default:
			smooth := (old/wavelen - rs.LowFreqFactor) / (rs.HighFreqFactor - rs.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/rs.Factor + smooth))
		}
	}
	return out
}

// lastLogits runs prompt through m and returns the logits after its last token.
func lastLogits(t *testing.T, m *model.Model, prompt []int) []float32 {
	t.Helper()
	cache := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: max(16, len(prompt)/16+1)})
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

// A Llama model with config.json's llama3 rope_scaling and the same weights as a GGUF in
// llama.cpp's form (rope_freqs.weight computed from the same parameters, no rope scaling keys)
// give the same logits over a sequence long enough for the scaled low frequencies to matter.
func TestGGUFRopeFreqsMatchesLlama3Directory(t *testing.T) {
	o := synth.Tiny("llama")
	o.Std, o.RopeScaling, o.MaxPos = 0.1, "llama3", 1024
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
	if rs := want.Config.RopeScaling; rs == nil || rs.Kind() != "llama3" {
		t.Fatalf("directory's rope_scaling %+v, want llama3", rs)
	}
	if gc := got.Config; gc.RopeScaling != nil || len(gc.RopeFreqFactors) != gc.HeadDim/2 {
		t.Fatalf("GGUF's rope scaling %+v, factors %v", gc.RopeScaling, gc.RopeFreqFactors)
	}
	// Factors of 1 (high frequencies), of the full factor (low) and between: all three cases.
	var one, full, between bool
	for _, f := range got.Config.RopeFreqFactors {
		one, full, between = one || f == 1, full || f == want.Config.RopeScaling.Factor, between || (f > 1 && f < want.Config.RopeScaling.Factor)
	}
	if !one || !full || !between {
		t.Fatalf("factors %v do not cover unscaled, scaled and blended frequencies", got.Config.RopeFreqFactors)
	}
	prompt := make([]int, 700)
	for i := range prompt {
		prompt[i] = (i*7919 + 13) % 400
	}
	gl, wl := lastLogits(t, got, prompt), lastLogits(t, want, prompt)
	var worst float64
	for i := range wl {
		d := math.Abs(float64(gl[i] - wl[i]))
		if d > 1e-5 {
			t.Fatalf("logit %d: %v, want %v", i, gl[i], wl[i])
		}
		worst = max(worst, d)
	}
	t.Logf("%d positions: largest logit difference %g", len(prompt), worst)
	// The comparison is sensitive: the same GGUF without rope_freqs.weight (unscaled RoPE)
	// gives other logits.
	_, plain := synthGGUF(t, o, func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
		return meta, slices.DeleteFunc(ts, func(td gguf.TensorData) bool { return td.Name == "rope_freqs.weight" })
	})
	pm, err := model.Load(plain, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pm.Close()
	var diff float64
	for i, x := range lastLogits(t, pm, prompt) {
		diff = max(diff, math.Abs(float64(x-wl[i])))
	}
	t.Logf("without rope_freqs.weight: largest logit difference %g", diff)
	if diff < 1e-3 {
		t.Fatalf("unscaled RoPE changes the logits by only %g", diff)
	}
}

// A malformed rope_freqs.weight (wrong length, a zero, a negative value, a NaN) is refused
// with an error that names it.
func TestGGUFRopeFreqsRefused(t *testing.T) {
	o := synth.Tiny("llama")
	o.RopeScaling = "llama3"
	edit := func(f func(v []float32) []float32) ggufEdit {
		return func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
			for i := range ts {
				if ts[i].Name == "rope_freqs.weight" {
					v := make([]float32, ts[i].Dims[0])
					for j := range v {
						v[j] = math.Float32frombits(binary.LittleEndian.Uint32(ts[i].Data[4*j:]))
					}
					v = f(v)
					ts[i].Dims, ts[i].Data = []uint64{uint64(len(v))}, f32Bytes(v)
				}
			}
			return meta, ts
		}
	}
	cases := []refusal{
		{"short", edit(func(v []float32) []float32 { return v[:len(v)-1] }), []string{"rope_freqs.weight", "values"}},
		{"long", edit(func(v []float32) []float32 { return append(v, 1) }), []string{"rope_freqs.weight", "values"}},
		{"zero", edit(func(v []float32) []float32 { v[2] = 0; return v }), []string{"rope_freqs.weight", "value 2"}},
		{"negative", edit(func(v []float32) []float32 { v[0] = -1; return v }), []string{"rope_freqs.weight", "value 0"}},
		{"nan", edit(func(v []float32) []float32 { v[3] = float32(math.NaN()); return v }), []string{"rope_freqs.weight", "NaN"}},
	}
	checkRefused(t, o, cases)
}

// A GGUF that lacks a required key, names an architecture or a key Hone does not run, or
// holds a tensor type that cannot be dequantized is refused with an error that names it.
func TestGGUFRefused(t *testing.T) {
	drop := func(key string) ggufEdit {
		return func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
			return slices.DeleteFunc(meta, func(kv gguf.KV) bool { return kv.Key == key }), ts
		}
	}
	set := func(key string, v any) ggufEdit {
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
	cases := []refusal{
		{"no block_count", drop("llama.block_count"), []string{"llama.block_count"}},
		{"no rms eps", drop("llama.attention.layer_norm_rms_epsilon"), []string{"llama.attention.layer_norm_rms_epsilon"}},
		{"no architecture", drop("general.architecture"), []string{"general.architecture"}},
		{"unknown architecture", set("general.architecture", "mamba"), []string{"mamba", "general.architecture"}},
		{"unknown key", set("llama.expert_count", uint32(8)), []string{"llama.expert_count"}},
		{"yarn", set("llama.rope.scaling.type", "yarn"), []string{"llama.rope.scaling.type", "yarn"}},
		{"partial rotary", set("llama.rope.dimension_count", uint32(8)), []string{"llama.rope.dimension_count"}},
		{"unknown tokenizer model", set("tokenizer.ggml.model", "bert"), []string{"tokenizer.ggml.model", `"bert"`}},
		{"sentencepiece with a byte-level pre-tokenizer", set("tokenizer.ggml.model", "llama"), []string{"tokenizer.ggml.pre", `"qwen2"`, `"llama"`}},
		{"unknown pre-tokenizer", set("tokenizer.ggml.pre", "deepseek-llm"), []string{"tokenizer.ggml.pre", "deepseek-llm"}},
	}
	if bad != 0 {
		cases = append(cases, refusal{"quantized type", quant, []string{"blk.1.ffn_up.weight", bad.String()}})
	}
	checkRefused(t, synth.Tiny("llama"), cases)
}

// ggufEdit changes a synthetic GGUF's metadata and tensors before it is written.
type ggufEdit = func([]gguf.KV, []gguf.TensorData) ([]gguf.KV, []gguf.TensorData)

// refusal is a GGUF that must not load, and what its error must name.
type refusal struct {
	name  string
	edit  ggufEdit
	wants []string
}

// checkRefused writes each case's GGUF of o and checks that loading its model (or, when that
// loads, its tokenizer) fails with an error that names every want.
func checkRefused(t *testing.T, o synth.Options, cases []refusal) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, path := synthGGUF(t, o, c.edit)
			m, err := model.Load(path, model.LoadOptions{})
			if err == nil {
				m.Close()
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
	// Dequantized as the directory is (the default keeps the Q4_1 matrices quantized: see
	// TestSmolLM2QuantizedMatchesDequantized).
	got, err := model.Load(path, model.LoadOptions{DType: model.DTypeF32})
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
		gs := model.NewKVCache(&got.Config, kvcache.Options{NumBlocks: 8}).NewSequence()
		ws := model.NewKVCache(&want.Config, kvcache.Options{NumBlocks: 8}).NewSequence()
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

// Package synth writes small Hugging Face model directories with random weights: config.json,
// generation_config.json, model.safetensors, and a byte-level BPE tokenizer (tokenizer.json,
// tokenizer_config.json with a ChatML chat template) that Hone trains itself on a corpus
// embedded in this package. Tests, benchmarks and the demo model of `hone serve` use them;
// nothing is downloaded.
//
// The directories are in the exact layout transformers writes (tensor names, config keys), so
// the same files load in PyTorch for golden tests.
package synth

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/tokenizer"
)

//go:embed corpus.txt
var corpus string

// Options describe the model to write. Zero fields take the defaults of Tiny.
type Options struct {
	Arch         string // "llama", "qwen2", "qwen3", "qwen3moe", "phi3", "mistral", "ministral", "gemma2" or "gemma3"
	Layers       int
	Hidden       int
	Heads        int
	KVHeads      int
	HeadDim      int // default Hidden/Heads
	Intermediate int
	// Vocab is the model's vocabulary size; at least the tokenizer's size (the tokenizer is
	// trained up to Vocab tokens when the corpus allows, and the rest of the rows are padding).
	Vocab      int
	MaxPos     int
	RopeTheta  float64
	RMSNormEps float64
	// Tied shares the input embedding with the LM head.
	Tied bool
	// RopeScaling "llama3" adds Llama 3.1's rope_scaling block (llama only). Phi-3 models
	// always get a longrope block (see phi3.go); "none" leaves it out.
	RopeScaling string
	// PartialRotary is Phi-3's partial_rotary_factor (0: 1, the whole head; Phi-4-mini: 0.75).
	PartialRotary float64
	// DType of the stored weights: "f32" (default) or "bf16".
	DType string
	// FitVocab shrinks Vocab to the tokenizer's size, so that every id the model can produce
	// is a real token (the demo model uses it).
	FitVocab bool
	// Std is the standard deviation of the random weights (default 0.02 as transformers
	// initialises; larger values make logits more peaked).
	Std  float64
	Seed uint64
	// SlidingWindow (gemma2, gemma3, mistral, ministral, phi3): the window of the sliding
	// layers (every layer for mistral and phi3; for ministral, layer_types alternates sliding
	// and full, sliding first; default 8 in Tiny for gemma and (mi)mistral, so that tests'
	// sequences cross it; for phi3 0, none).
	SlidingWindow int
	// QueryPreAttnScalar (gemma2, gemma3): query_pre_attn_scalar (24 in Tiny: not head_dim,
	// so that tests notice it).
	QueryPreAttnScalar float64

	// qwen3moe (moe.go): Experts routed experts of width MoEIntermediate, ExpertsPerTok per
	// token, top-k weights normalised unless DenseTopK (norm_topk_prob false), dense MLPs on
	// MLPOnlyLayers.
	Experts, ExpertsPerTok, MoEIntermediate int
	DenseTopK                               bool
	MLPOnlyLayers                           []int
}

// Tiny returns the options of a tiny model of the architecture, small enough for unit tests.
func Tiny(arch string) Options {
	o := Options{Arch: arch, Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, Intermediate: 128, Vocab: 512,
		MaxPos: 512, RopeTheta: 10000, RMSNormEps: 1e-6, DType: "f32", Std: 0.02, Seed: 1}
	if a := archOf(arch); a != nil && a.tiny != nil {
		a.tiny(&o) // the architecture's own (its archSpec)
	}
	moeDefaults(&o)
	return o
}

// Demo is the demo model `hone serve` writes on first start: small enough to answer quickly
// on two cores and to fine-tune in minutes.
func Demo() Options {
	o := Tiny("llama")
	o.Layers, o.Hidden, o.Heads, o.KVHeads, o.Intermediate, o.Vocab, o.MaxPos = 4, 128, 4, 2, 384, 1024, 2048
	o.Tied = true
	o.Std = 0.05
	o.FitVocab = true
	return o
}

// SmolLM2_135M is the shape of SmolLM2-135M (30 layers, hidden 576, 9 heads, 3 KV heads,
// intermediate 1536, vocabulary 49152, tied embeddings) for benchmarks.
func SmolLM2_135M() Options {
	return Options{Arch: "llama", Layers: 30, Hidden: 576, Heads: 9, KVHeads: 3, Intermediate: 1536,
		Vocab: 49152, MaxPos: 8192, RopeTheta: 100000, RMSNormEps: 1e-5, Tied: true,
		DType: "f32", Std: 0.02, Seed: 1}
}

// Qwen25_05B is the shape of Qwen2.5-0.5B (24 layers, hidden 896, 14 heads, 2 KV heads,
// intermediate 4864, vocabulary 151936, tied embeddings, q/k/v biases) for benchmarks.
func Qwen25_05B() Options {
	return Options{Arch: "qwen2", Layers: 24, Hidden: 896, Heads: 14, KVHeads: 2, Intermediate: 4864,
		Vocab: 151936, MaxPos: 32768, RopeTheta: 1000000, RMSNormEps: 1e-6, Tied: true,
		DType: "f32", Std: 0.02, Seed: 1}
}

func (o *Options) fill() error {
	d := Tiny(o.Arch)
	a := o.arch()
	switch {
	case o.Arch == "":
		return fmt.Errorf("synth: arch is required (%s)", archList())
	case a == nil:
		return fmt.Errorf("synth: unsupported arch %q (use %s)", o.Arch, archList())
	}
	setInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setInt(&o.Layers, d.Layers)
	setInt(&o.Hidden, d.Hidden)
	setInt(&o.Heads, d.Heads)
	setInt(&o.KVHeads, min(d.KVHeads, o.Heads))
	setInt(&o.Intermediate, d.Intermediate)
	setInt(&o.Vocab, d.Vocab)
	setInt(&o.MaxPos, d.MaxPos)
	if o.HeadDim == 0 {
		if a.ownHeadDim && o.Hidden == d.Hidden && o.Heads == d.Heads {
			o.HeadDim = d.HeadDim
		} else {
			o.HeadDim = o.Hidden / o.Heads
		}
	}
	if o.RopeTheta == 0 {
		o.RopeTheta = d.RopeTheta
	}
	if o.RMSNormEps == 0 {
		o.RMSNormEps = d.RMSNormEps
	}
	if o.DType == "" {
		o.DType = "f32"
	}
	if o.Std == 0 {
		o.Std = d.Std
	}
	if o.SlidingWindow == 0 {
		o.SlidingWindow = d.SlidingWindow // Tiny's: gemma's and (mi)mistral's
	}
	if o.QueryPreAttnScalar == 0 {
		o.QueryPreAttnScalar = d.QueryPreAttnScalar // gemma's
	}
	switch {
	case o.Layers < 1 || o.Hidden < 1 || o.Heads < 1 || o.KVHeads < 1 || o.Intermediate < 1:
		return errors.New("synth: layers, hidden, heads, kv-heads and intermediate must be positive")
	case o.Heads%o.KVHeads != 0:
		return fmt.Errorf("synth: heads (%d) must be a multiple of kv-heads (%d)", o.Heads, o.KVHeads)
	case o.HeadDim%2 != 0:
		return fmt.Errorf("synth: head dimension %d must be even", o.HeadDim)
	case !a.ownHeadDim && o.HeadDim*o.Heads != o.Hidden:
		return fmt.Errorf("synth: hidden (%d) must equal heads × head_dim (%d × %d) for %s", o.Hidden, o.Heads, o.HeadDim, o.Arch)
	case o.DType != "f32" && o.DType != "bf16":
		return fmt.Errorf("synth: dtype %q (use f32 or bf16)", o.DType)
	case a.check != nil:
		if err := a.check(o); err != nil {
			return err
		}
	case o.RopeScaling != "" && (o.RopeScaling != "llama3" || !a.llama3Rope):
		return fmt.Errorf("synth: rope scaling %q is only offered as llama3 on llama", o.RopeScaling)
	}
	moeDefaults(o)
	return o.checkMoE()
}

// Special tokens of the synthetic tokenizer, in id order after the BPE vocabulary.
var specialTokens = []tokenizer.AddedToken{
	{Content: "<|endoftext|>", Special: true},
	{Content: "<|im_start|>", Special: true},
	{Content: "<|im_end|>", Special: true},
	{Content: "<think>", Special: false},
	{Content: "</think>", Special: false},
	{Content: "<tool_call>", Special: false},
	{Content: "</tool_call>", Special: false},
}

// ChatTemplate is the synthetic models' chat template: ChatML turns, tools listed in the
// system turn, tool calls as <tool_call> JSON, assistant reasoning in <think> blocks, and
// enable_thinking=false producing an empty think block, as Qwen3-style templates do.
const ChatTemplate = `{%- set ns = namespace(system='') -%}
{%- if messages and messages[0].role == 'system' -%}{%- set ns.system = messages[0].content -%}{%- endif -%}
{%- if tools -%}
{{- '<|im_start|>system\n' -}}
{%- if ns.system -%}{{- ns.system + '\n\n' -}}{%- endif -%}
{{- 'You can call these tools; answer with <tool_call>{"name": ..., "arguments": {...}}</tool_call> to use one.\n' -}}
{%- for tool in tools -%}{{- (tool | tojson) + '\n' -}}{%- endfor -%}
{{- '<|im_end|>\n' -}}
{%- elif ns.system -%}
{{- '<|im_start|>system\n' + ns.system + '<|im_end|>\n' -}}
{%- endif -%}
{%- if documents -%}
{{- '<|im_start|>system\nDocuments:\n' -}}
{%- for doc in documents -%}{{- (doc | tojson) + '\n' -}}{%- endfor -%}
{{- '<|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if loop.first and message.role == 'system' -%}
{%- elif message.role == 'assistant' -%}
{{- '<|im_start|>assistant\n' -}}
{%- if message.reasoning -%}{{- '<think>\n' + message.reasoning + '\n</think>\n\n' -}}{%- endif -%}
{%- if message.content -%}{{- message.content -}}{%- endif -%}
{%- if message.tool_calls -%}
{%- for call in message.tool_calls -%}
{{- '<tool_call>{"name": "' + call.function.name + '", "arguments": ' + (call.function.arguments | tojson) + '}</tool_call>' -}}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- else -%}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if enable_thinking is defined and not enable_thinking -%}{{- '<think>\n\n</think>\n\n' -}}{%- endif -%}
{%- endif -%}`

var (
	tokOnce  sync.Mutex
	tokCache = map[int]tokenizer.Spec{}
)

// TokenizerSpec returns the synthetic tokenizer for a model vocabulary of vocab ids: a BPE
// trained on the embedded corpus up to vocab minus the special tokens (or until nothing is
// worth merging), followed by the special tokens.
func TokenizerSpec(vocab int) (tokenizer.Spec, error) {
	target := vocab - len(specialTokens)
	if target < 256 {
		return tokenizer.Spec{}, fmt.Errorf("synth: vocabulary %d is too small (at least %d: 256 bytes and %d special tokens)", vocab, 256+len(specialTokens), len(specialTokens))
	}
	target = min(target, 4096)
	tokOnce.Lock()
	defer tokOnce.Unlock()
	spec, ok := tokCache[target]
	if !ok {
		var err error
		spec, err = tokenizer.TrainText(corpus, target, tokenizer.PatternQwen2)
		if err != nil {
			return tokenizer.Spec{}, err
		}
		tokCache[target] = spec
	}
	spec.Added = specialTokens
	spec.EOSToken = "<|im_end|>"
	spec.PadToken = "<|endoftext|>"
	spec.ChatTemplate = ChatTemplate
	return spec, nil
}

// Write creates dir (if needed) and writes the model there. Files are written atomically, so
// an interrupted Write never leaves a half-written weight file under its final name.
func Write(dir string, o Options) error {
	if err := o.fill(); err != nil {
		return err
	}
	spec, err := TokenizerSpec(o.Vocab)
	if err != nil {
		return err
	}
	spec.ModelMaxLength = o.MaxPos
	nTok := len(spec.Tokens) + len(spec.Added)
	if o.FitVocab {
		o.Vocab = nTok
	}
	if o.Vocab < nTok {
		return fmt.Errorf("synth: vocab %d is smaller than the tokenizer's %d tokens", o.Vocab, nTok)
	}
	eos := len(spec.Tokens) + 2 // <|im_end|>
	eot := len(spec.Tokens)     // <|endoftext|>
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	tj, err := spec.TokenizerJSON()
	if err != nil {
		return err
	}
	cj, err := spec.ConfigJSON()
	if err != nil {
		return err
	}
	files := map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": cj}
	files["config.json"], err = json.MarshalIndent(configJSON(&o, eot, eos), "", "  ")
	if err != nil {
		return err
	}
	files["generation_config.json"], _ = json.MarshalIndent(map[string]any{
		"bos_token_id": eot, "eos_token_id": []int{eos, eot}, "pad_token_id": eot,
		"do_sample": true, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05,
		"transformers_version": "4.51.0",
	}, "", "  ")
	for name, data := range files {
		if err := safetensors.WriteFileAtomic(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	tensors := weights(&o)
	return safetensors.Write(filepath.Join(dir, "model.safetensors"), tensors, map[string]string{"format": "pt"})
}

func configJSON(o *Options, bos, eos int) map[string]any {
	a := o.arch()
	dtype := "float32"
	if o.DType == "bf16" {
		dtype = "bfloat16"
	}
	c := map[string]any{
		"architectures":           []string{a.class},
		"model_type":              a.modelType,
		"hidden_size":             o.Hidden,
		"intermediate_size":       o.Intermediate,
		"num_hidden_layers":       o.Layers,
		"num_attention_heads":     o.Heads,
		"num_key_value_heads":     o.KVHeads,
		"head_dim":                o.HeadDim,
		"vocab_size":              o.Vocab,
		"max_position_embeddings": o.MaxPos,
		"rms_norm_eps":            o.RMSNormEps,
		"rope_theta":              o.RopeTheta,
		"hidden_act":              "silu",
		"tie_word_embeddings":     o.Tied,
		"torch_dtype":             dtype,
		"bos_token_id":            bos,
		"eos_token_id":            eos,
		"initializer_range":       o.Std,
		"attention_dropout":       0.0,
		"use_cache":               true,
		"transformers_version":    "4.51.0",
	}
	a.config(o, c)
	return c
}

// weights draws every tensor from a seeded generator in a fixed order.
func weights(o *Options) []safetensors.Tensor {
	rng := rand.New(rand.NewPCG(o.Seed, 0x68_6f_6e_65))
	var out []safetensors.Tensor
	add := func(name string, shape []int, gen func() float64) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(gen())
		}
		if o.DType == "bf16" {
			h := make([]uint16, n)
			gemm.BF16.Encode(h, v)
			out = append(out, safetensors.FromU16(name, safetensors.BF16, shape, h))
			return
		}
		out = append(out, safetensors.FromF32(name, shape, v))
	}
	normal := func() float64 { return rng.NormFloat64() * o.Std }
	// Norm weights near one, perturbed so that tests notice a norm applied wrongly.
	norm := func() float64 { return 1 + 0.1*rng.NormFloat64() }
	bias := func() float64 { return 0.02 * rng.NormFloat64() }
	qd, kv := o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
	add("model.embed_tokens.weight", []int{o.Vocab, o.Hidden}, normal)
	// Output projections scaled down with depth as GPT-2 style initialisers do, so that deep
	// random models keep activations in range.
	deep := func() float64 { return rng.NormFloat64() * o.Std / math.Sqrt(2*float64(o.Layers)) }
	a := o.arch()
	for l := 0; l < o.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		if a.layer != nil {
			a.layer(o, p, add, normal, norm, deep)
			continue
		}
		add(p+"input_layernorm.weight", []int{o.Hidden}, norm)
		add(p+"self_attn.q_proj.weight", []int{qd, o.Hidden}, normal)
		add(p+"self_attn.k_proj.weight", []int{kv, o.Hidden}, normal)
		add(p+"self_attn.v_proj.weight", []int{kv, o.Hidden}, normal)
		if a.qkvBias {
			add(p+"self_attn.q_proj.bias", []int{qd}, bias)
			add(p+"self_attn.k_proj.bias", []int{kv}, bias)
			add(p+"self_attn.v_proj.bias", []int{kv}, bias)
		}
		if a.qkNorm {
			add(p+"self_attn.q_norm.weight", []int{o.HeadDim}, norm)
			add(p+"self_attn.k_norm.weight", []int{o.HeadDim}, norm)
		}
		add(p+"self_attn.o_proj.weight", []int{o.Hidden, qd}, deep)
		add(p+"post_attention_layernorm.weight", []int{o.Hidden}, norm)
		if o.sparse(l) {
			moeWeights(o, p, add, normal, deep)
			continue
		}
		add(p+"mlp.gate_proj.weight", []int{o.Intermediate, o.Hidden}, normal)
		add(p+"mlp.up_proj.weight", []int{o.Intermediate, o.Hidden}, normal)
		add(p+"mlp.down_proj.weight", []int{o.Hidden, o.Intermediate}, deep)
	}
	if a.normPlusOne {
		add("model.norm.weight", []int{o.Hidden}, gemmaNorm(rng))
	} else {
		add("model.norm.weight", []int{o.Hidden}, norm)
	}
	if !o.Tied {
		add("lm_head.weight", []int{o.Vocab, o.Hidden}, normal)
	}
	return out
}

// arch is the options' architecture (nil until fill has checked it is one).
func (o *Options) arch() *archSpec { return archOf(o.Arch) }

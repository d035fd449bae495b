package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/honeai/hone/internal/gguf"
)

// GGUF token types (llama.cpp's llama_token_type). Unused (5) and byte (6) tokens are model
// tokens like normal ones.
const (
	ggufTokenNormal      = 1
	ggufTokenUnknown     = 2
	ggufTokenControl     = 3
	ggufTokenUserDefined = 4
)

// ggufPre is the part of a tokenizer.json that a GGUF names rather than holds.
type ggufPre struct {
	normalizer   any
	pre          any
	decoder      any // SentencePiece vocabularies only (byte-level ones have ByteLevel)
	ignoreMerges bool
}

// ggufPreTokenizers are the tokenizer.ggml.pre values Hone reads: the normalizer,
// pre-tokenizer and ignore_merges of the tokenizer.json that llama.cpp's converter saw.
var ggufPreTokenizers = map[string]ggufPre{
	// SmolLM2 (and SmolLM): digits one by one, then GPT-2's byte-level split.
	"smollm": {pre: map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Digits", "individual_digits": true},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
	}}},
	// Llama 3.x.
	"llama-bpe": {pre: splitThenByteLevel(PatternLlama3), ignoreMerges: true},
	// Qwen2, Qwen2.5, Qwen3.
	"qwen2": {normalizer: map[string]any{"type": "NFC"}, pre: splitThenByteLevel(PatternQwen2)},
}

func splitThenByteLevel(pattern string) any {
	return map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": "Isolated", "invert": false},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
	}}
}

// IsGGUF reports whether path names a GGUF file (by its extension).
func IsGGUF(path string) bool { return strings.HasSuffix(strings.ToLower(path), ".gguf") }

// LoadGGUF reads the tokenizer of a GGUF file (see FromGGUF).
func LoadGGUF(path string) (*Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	t, err := FromGGUF(f.Metadata)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// FromGGUF builds a tokenizer from a GGUF file's tokenizer.ggml.* metadata, by writing the
// tokenizer.json and tokenizer_config.json it stands for and loading them as FromJSON does.
//
// It reads two kinds of vocabulary (tokenizer.ggml.model):
//
//   - "gpt2", byte-level BPE, whose pre-tokenizer (tokenizer.ggml.pre) is smollm, llama-bpe or
//     qwen2: the tokens in id order and the merges in rank order;
//   - "llama", SentencePiece BPE as llama.cpp's SPM tokenizer runs it (Llama 2, Mistral,
//     TinyLlama...): the tokens and their tokenizer.ggml.scores (a word starts as its
//     characters, and two adjacent pieces merge when they make a token, the highest-scoring
//     first, the leftmost on ties), a character the vocabulary lacks spelled with the byte
//     tokens <0xXX>, spaces as "▁", and a "▁" put before each piece of text
//     (tokenizer.ggml.add_space_prefix, true by default) that decoding strips again, as the
//     Llama tokenizer.json of transformers does (legacy form). The BOS, EOS and UNK ids
//     default to 1, 2 and 0 and add_bos_token to true, as in llama.cpp; tokenizer.ggml.pre
//     must be absent or "default".
//
// For both, the token types make control (3) and unknown (2) tokens special added tokens and
// user-defined ones (4) added tokens that are not special, all found in the text before it is
// tokenized; the BOS/EOS/UNK/PAD ids, add_bos_token/add_eos_token and tokenizer.chat_template
// are read. Other models and pre-tokenizers are refused by name.
func FromGGUF(md *gguf.Metadata) (*Tokenizer, error) {
	wrap := func(err error) error { return fmt.Errorf("tokenizer: %w", err) }
	kind, err := md.String("tokenizer.ggml.model")
	if err != nil {
		return nil, wrap(err)
	}
	if kind != "gpt2" && kind != "llama" {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.model %q is not supported (gpt2, byte-level BPE, and llama, SentencePiece BPE)", kind)
	}
	spm := kind == "llama"
	tokens, err := md.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, wrap(err)
	}
	var pre ggufPre
	var merges []string
	var scores []float64
	if spm {
		if pre, err = spmPre(md); err != nil {
			return nil, err
		}
		if scores, err = md.Floats("tokenizer.ggml.scores"); err != nil {
			return nil, wrap(err)
		}
		if len(scores) != len(tokens) {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.scores has %d entries for %d tokens", len(scores), len(tokens))
		}
	} else {
		preName, err := md.String("tokenizer.ggml.pre")
		if err != nil {
			return nil, wrap(err)
		}
		var ok bool
		if pre, ok = ggufPreTokenizers[preName]; !ok {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.pre %q is not supported (smollm, llama-bpe, qwen2)", preName)
		}
		if merges, err = md.Strings("tokenizer.ggml.merges"); err != nil {
			return nil, wrap(err)
		}
	}
	types := make([]int64, len(tokens))
	for i := range types {
		types[i] = ggufTokenNormal
	}
	if md.Has("tokenizer.ggml.token_type") {
		if types, err = md.Ints("tokenizer.ggml.token_type"); err != nil {
			return nil, wrap(err)
		}
		if len(types) != len(tokens) {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.token_type has %d entries for %d tokens", len(types), len(tokens))
		}
	}
	vocab := make(map[string]int, len(tokens))
	var added []map[string]any
	decoder := map[string]any{}
	for i, tok := range tokens {
		if _, dup := vocab[tok]; !dup {
			vocab[tok] = i
		}
		if types[i] == ggufTokenControl || types[i] == ggufTokenUserDefined || types[i] == ggufTokenUnknown {
			special := types[i] != ggufTokenUserDefined
			added = append(added, map[string]any{"id": i, "content": tok, "single_word": false,
				"lstrip": false, "rstrip": false, "normalized": false, "special": special})
			decoder[fmt.Sprint(i)] = map[string]any{"content": tok, "lstrip": false, "normalized": false,
				"rstrip": false, "single_word": false, "special": special}
		}
	}
	tokenID := func(key string) (int, bool, error) {
		v, err := md.Uint(key)
		if errors.Is(err, gguf.ErrNoKey) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, wrap(err)
		}
		if v >= uint64(len(tokens)) {
			return 0, false, fmt.Errorf("tokenizer: %s %d is outside the %d tokens", key, v, len(tokens))
		}
		return int(v), true, nil
	}
	flag := func(key string) (bool, error) {
		v, err := md.Bool(key)
		if errors.Is(err, gguf.ErrNoKey) {
			return false, nil
		}
		return v, err
	}
	config := map[string]any{"add_prefix_space": false, "added_tokens_decoder": decoder,
		"clean_up_tokenization_spaces": false, "tokenizer_class": "PreTrainedTokenizerFast"}
	ids := map[string]int{}
	for _, k := range []struct {
		key, name  string
		spmDefault int // llama.cpp's id for SentencePiece vocabularies without the key (-1: none)
	}{{"bos_token_id", "bos_token", 1}, {"eos_token_id", "eos_token", 2},
		{"unknown_token_id", "unk_token", 0}, {"padding_token_id", "pad_token", -1}} {
		id, ok, err := tokenID("tokenizer.ggml." + k.key)
		if err != nil {
			return nil, err
		}
		if !ok && spm && k.spmDefault >= 0 && k.spmDefault < len(tokens) {
			id, ok = k.spmDefault, true
		}
		if ok {
			config[k.name] = tokens[id]
			ids[k.name] = id
		}
	}
	// Like tokenizers' TemplateProcessing: BOS before and EOS after an encoded text.
	var single []any
	specials := map[string]any{}
	for _, k := range []struct{ key, name string }{{"add_bos_token", "bos_token"}, {"add_eos_token", "eos_token"}} {
		on, err := flag("tokenizer.ggml." + k.key)
		if err != nil {
			return nil, wrap(err)
		}
		if spm && k.key == "add_bos_token" && !md.Has("tokenizer.ggml.add_bos_token") {
			on = true // llama.cpp's default for SentencePiece vocabularies
		}
		config[k.key] = on
		if k.name == "eos_token" {
			single = append(single, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}})
		}
		if !on {
			continue
		}
		id, ok := ids[k.name]
		if !ok {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.%s is true but the GGUF has no %s id", k.key, k.name)
		}
		single = append(single, map[string]any{"SpecialToken": map[string]any{"id": tokens[id], "type_id": 0}})
		specials[tokens[id]] = map[string]any{"id": tokens[id], "ids": []int{id}, "tokens": []string{tokens[id]}}
	}
	template := map[string]any{"type": "TemplateProcessing", "single": single, "pair": []any{}, "special_tokens": specials}
	post := any(map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false})
	switch {
	case spm && len(specials) > 0:
		post = template
	case spm:
		post = nil
	case len(specials) > 0:
		post = map[string]any{"type": "Sequence", "processors": []any{post, template}}
	}
	if md.Has("tokenizer.chat_template") {
		tpl, err := md.String("tokenizer.chat_template")
		if err != nil {
			return nil, wrap(err)
		}
		config["chat_template"] = tpl
	}
	dec := any(map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false})
	model := map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
		"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": pre.ignoreMerges,
		"vocab": vocab, "merges": merges}
	if spm {
		dec = pre.decoder
		model["byte_fallback"], model["fuse_unk"], model["merges"] = true, true, []string{}
		if name, ok := config["unk_token"]; ok {
			model["unk_token"] = name
		}
	}
	doc := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens":   added,
		"normalizer":     pre.normalizer,
		"pre_tokenizer":  pre.pre,
		"post_processor": post,
		"decoder":        dec,
		"model":          model,
	}
	tj, err := json.Marshal(doc)
	if err != nil {
		return nil, wrap(err)
	}
	cj, err := json.Marshal(config)
	if err != nil {
		return nil, wrap(err)
	}
	t, err := FromJSON(tj, cj)
	if err != nil {
		return nil, err
	}
	if spm {
		t.mergesFromScores(tokens, scores)
	}
	return t, nil
}

// spmPre is the normalizer and decoder that transformers' Llama tokenizer.json (legacy form)
// has for a SentencePiece vocabulary with and without the dummy prefix: "▁" before each piece
// of text between added tokens (llama.cpp puts it at the start and after each special token),
// spaces as "▁"; and back, with the prefix's space stripped.
func spmPre(md *gguf.Metadata) (ggufPre, error) {
	if md.Has("tokenizer.ggml.pre") {
		name, err := md.String("tokenizer.ggml.pre")
		if err != nil {
			return ggufPre{}, fmt.Errorf("tokenizer: %w", err)
		}
		if name != "default" {
			return ggufPre{}, fmt.Errorf("tokenizer: tokenizer.ggml.pre %q is not supported with tokenizer.ggml.model \"llama\" (default only)", name)
		}
	}
	prefix := true
	if md.Has("tokenizer.ggml.add_space_prefix") {
		v, err := md.Bool("tokenizer.ggml.add_space_prefix")
		if err != nil {
			return ggufPre{}, fmt.Errorf("tokenizer: %w", err)
		}
		prefix = v
	}
	replace := map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": metaspaceChar}
	normalizers := []any{replace}
	decoders := []any{
		map[string]any{"type": "Replace", "pattern": map[string]any{"String": metaspaceChar}, "content": " "},
		map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
	}
	if prefix {
		normalizers = []any{map[string]any{"type": "Prepend", "prepend": metaspaceChar}, replace}
		decoders = append(decoders, map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0})
	}
	return ggufPre{
		normalizer: map[string]any{"type": "Sequence", "normalizers": normalizers},
		decoder:    map[string]any{"type": "Sequence", "decoders": decoders},
	}, nil
}

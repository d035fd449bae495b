package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/honeai/hone/internal/gguf"
)

// GGUF token types (llama.cpp's llama_token_type).
const (
	ggufTokenNormal      = 1
	ggufTokenControl     = 3
	ggufTokenUserDefined = 4
)

// ggufPreTokenizers are the tokenizer.ggml.pre values Hone reads: the normalizer,
// pre-tokenizer and ignore_merges of the tokenizer.json that llama.cpp's converter saw.
var ggufPreTokenizers = map[string]struct {
	normalizer   any
	pre          any
	ignoreMerges bool
}{
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
// It reads byte-level BPE vocabularies (tokenizer.ggml.model "gpt2") whose pre-tokenizer
// (tokenizer.ggml.pre) is smollm, llama-bpe or qwen2: the tokens in id order, the merges in
// rank order, the token types (control tokens become special added tokens, user-defined ones
// added tokens that are not special), the BOS/EOS/UNK/PAD ids, add_bos_token/add_eos_token
// and tokenizer.chat_template. SentencePiece vocabularies ("llama") and other pre-tokenizers
// are refused by name.
func FromGGUF(md *gguf.Metadata) (*Tokenizer, error) {
	wrap := func(err error) error { return fmt.Errorf("tokenizer: %w", err) }
	kind, err := md.String("tokenizer.ggml.model")
	if err != nil {
		return nil, wrap(err)
	}
	if kind != "gpt2" {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.model %q is not supported (gpt2, byte-level BPE, only)", kind)
	}
	preName, err := md.String("tokenizer.ggml.pre")
	if err != nil {
		return nil, wrap(err)
	}
	pre, ok := ggufPreTokenizers[preName]
	if !ok {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.pre %q is not supported (smollm, llama-bpe, qwen2)", preName)
	}
	tokens, err := md.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, wrap(err)
	}
	merges, err := md.Strings("tokenizer.ggml.merges")
	if err != nil {
		return nil, wrap(err)
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
		if types[i] == ggufTokenControl || types[i] == ggufTokenUserDefined {
			special := types[i] == ggufTokenControl
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
	for _, k := range []struct{ key, name string }{{"bos_token_id", "bos_token"}, {"eos_token_id", "eos_token"},
		{"unknown_token_id", "unk_token"}, {"padding_token_id", "pad_token"}} {
		id, ok, err := tokenID("tokenizer.ggml." + k.key)
		if err != nil {
			return nil, err
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
	post := any(map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false})
	if len(specials) > 0 {
		post = map[string]any{"type": "Sequence", "processors": []any{post,
			map[string]any{"type": "TemplateProcessing", "single": single, "pair": []any{}, "special_tokens": specials}}}
	}
	if md.Has("tokenizer.chat_template") {
		tpl, err := md.String("tokenizer.chat_template")
		if err != nil {
			return nil, wrap(err)
		}
		config["chat_template"] = tpl
	}
	doc := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens":   added,
		"normalizer":     pre.normalizer,
		"pre_tokenizer":  pre.pre,
		"post_processor": post,
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": pre.ignoreMerges,
			"vocab": vocab, "merges": merges},
	}
	tj, err := json.Marshal(doc)
	if err != nil {
		return nil, wrap(err)
	}
	cj, err := json.Marshal(config)
	if err != nil {
		return nil, wrap(err)
	}
	return FromJSON(tj, cj)
}

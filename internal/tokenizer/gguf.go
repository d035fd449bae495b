package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
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
	// GPT-4o's o200k split: Phi-4-mini. llama.cpp runs an ASCII approximation of the letter
	// classes; Hone runs the tokenizer.json pattern, as transformers does.
	"gpt-4o": {pre: splitThenByteLevel(patternO200k)},
	// Mistral NeMo's tekken split (the o200k classes, digits one by one, no contractions).
	"tekken": {pre: splitThenByteLevel(patternTekken), ignoreMerges: true},
}

// The split patterns of the gpt-4o and tekken pre-tokenizers (run on the regex engine).
const (
	patternO200k  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patternTekken = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

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

// GGUF token type of a token id the vocabulary lacks (llama.cpp's LLAMA_TOKEN_TYPE_UNUSED).
const ggufTokenUnused = 5

// GGUFMetadata is the tokenizer.* metadata llama.cpp's convert_hf_to_gguf.py writes for the
// tokenizer of a Hugging Face model directory (tokenizer.json, tokenizer_config.json,
// chat_template.jinja, config.json; tokenizer.model and added_tokens.json for SentencePiece),
// for a model of vocabSize embeddings whose architecture's converter applies rules (package
// model's Family.GGUFVocab): the inverse of FromGGUF. Two kinds of vocabulary are written, as
// the converter writes them:
//
//   - byte-level BPE (tokenizer.ggml.model "gpt2"), whose normalizer and pre-tokenizer must be
//     one of FromGGUF's tokenizer.ggml.pre values (llama.cpp identifies pre-tokenizers by name
//     and would tokenize differently). Token types: the added tokens that are special, or
//     look special (<|...|>, <pad>), are control tokens (3), other added tokens
//     user-defined (4), the rest normal (1).
//   - SentencePiece BPE (tokenizer.json's BPE with byte fallback, as transformers converts
//     Llama 2, Mistral, Gemma and Phi-3 vocabularies; tokenizer.ggml.model "llama"): the
//     pieces, scores and types of tokenizer.model, which must be there (tokenizer.json drops
//     the scores), then the added tokens as _create_vocab_sentencepiece rewrites them (see
//     spmGGUFVocab).
//
// Either way ids below vocabSize that the vocabulary lacks become "[PAD<id>]" of type
// unused (5), and the special token ids, add_bos/eos/sep_token flags and chat template follow
// gguf.SpecialVocab.
func GGUFMetadata(dir string, vocabSize int, rules GGUFVocabRules) ([]gguf.KV, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var tj struct {
		Normalizer    json.RawMessage `json:"normalizer"`
		PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
		PostProcessor json.RawMessage `json:"post_processor"`
		AddedTokens   []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Model struct {
			Type         string            `json:"type"`
			Vocab        map[string]int    `json:"vocab"`
			Merges       []json.RawMessage `json:"merges"`
			IgnoreMerges bool              `json:"ignore_merges"`
			ByteFallback bool              `json:"byte_fallback"`
		} `json:"model"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil {
		return nil, fmt.Errorf("tokenizer: %s/tokenizer.json: %w", dir, err)
	}
	var tc map[string]json.RawMessage
	if b, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		if err := json.Unmarshal(b, &tc); err != nil {
			return nil, fmt.Errorf("tokenizer: %s/tokenizer_config.json: %w", dir, err)
		}
	}
	var cfg map[string]json.RawMessage
	if b, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil {
		_ = json.Unmarshal(b, &cfg)
	}
	var meta []gguf.KV
	var byID []string
	spm := tj.Model.Type == "BPE" && tj.Model.ByteFallback
	switch {
	case spm:
		added := make([]addedToken, len(tj.AddedTokens))
		for i, at := range tj.AddedTokens {
			added[i] = addedToken{at.ID, at.Content, at.Special}
		}
		if byID, meta, err = spmGGUFVocab(dir, tc, added, vocabSize, rules.Phi3AddedTokens); err != nil {
			return nil, err
		}
	case tj.Model.Type == "BPE":
		pre, err := ggufPreName(tj.Normalizer, tj.PreTokenizer, tj.Model.IgnoreMerges)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %s/tokenizer.json: %w", dir, err)
		}
		if vocabSize <= 0 {
			vocabSize = len(tj.Model.Vocab)
		}
		byID = make([]string, vocabSize)
		has := make([]bool, vocabSize)
		types := make([]int32, vocabSize)
		put := func(id int, tok string, typ int32) error {
			if id < 0 || id >= vocabSize {
				return fmt.Errorf("tokenizer: %s/tokenizer.json: token %q has id %d, outside the model's %d embeddings", dir, tok, id, vocabSize)
			}
			byID[id], has[id], types[id] = tok, true, typ
			return nil
		}
		for tok, id := range tj.Model.Vocab {
			if err := put(id, tok, ggufTokenNormal); err != nil {
				return nil, err
			}
		}
		for _, at := range tj.AddedTokens {
			typ := int32(ggufTokenUserDefined)
			if at.Special || looksSpecial(at.Content) {
				typ = ggufTokenControl
			}
			if err := put(at.ID, at.Content, typ); err != nil {
				return nil, err
			}
		}
		for i := range byID {
			if !has[i] {
				byID[i], types[i] = fmt.Sprintf("[PAD%d]", i), ggufTokenUnused
			}
		}
		merges := make([]string, len(tj.Model.Merges))
		for i, m := range tj.Model.Merges {
			var s string
			var pair []string
			switch {
			case json.Unmarshal(m, &s) == nil:
				merges[i] = s
			case json.Unmarshal(m, &pair) == nil && len(pair) == 2:
				merges[i] = pair[0] + " " + pair[1]
			default:
				return nil, fmt.Errorf("tokenizer: %s/tokenizer.json: merge %d is %s, neither \"a b\" nor [\"a\", \"b\"]", dir, i, m)
			}
		}
		meta = []gguf.KV{
			{Key: "tokenizer.ggml.model", Value: "gpt2"},
			{Key: "tokenizer.ggml.pre", Value: pre},
			{Key: "tokenizer.ggml.tokens", Value: byID},
			{Key: "tokenizer.ggml.token_type", Value: types},
			{Key: "tokenizer.ggml.merges", Value: merges},
		}
	default:
		return nil, fmt.Errorf("tokenizer: %s/tokenizer.json: a %q model has no GGUF export: byte-level BPE (tokenizer.ggml.model gpt2) or SentencePiece BPE with byte fallback (llama)", dir, tj.Model.Type)
	}
	vocabSize = len(byID)
	ids := map[string]int{}
	for tok, id := range tj.Model.Vocab {
		ids[tok] = id
	}
	for _, at := range tj.AddedTokens {
		ids[at.Content] = at.ID
	}
	special := map[string]int{}
	for _, k := range []struct{ typ, key string }{{"bos", "bos_token_id"}, {"eos", "eos_token_id"},
		{"unk", "unknown_token_id"}, {"pad", "padding_token_id"}} {
		id := -1
		// tokenizer_config.json's "<typ>_token" (a string or {"content": ...}) first, then
		// config.json's "<typ>_token_id".
		var s string
		var obj struct{ Content string }
		if v, ok := tc[k.typ+"_token"]; ok {
			if json.Unmarshal(v, &s) != nil && json.Unmarshal(v, &obj) == nil {
				s = obj.Content
			}
			if n, ok := ids[s]; ok && s != "" {
				id = n
			}
		}
		var n int
		if v, ok := cfg[k.typ+"_token_id"]; id < 0 && ok && json.Unmarshal(v, &n) == nil {
			id = n
		}
		if id >= 0 && id < vocabSize {
			special[k.typ] = id
			meta = append(meta, gguf.KV{Key: "tokenizer.ggml." + k.key, Value: uint32(id)})
		}
	}
	for _, a := range specialAdds(tj.PostProcessor, tc) {
		meta = append(meta, gguf.KV{Key: "tokenizer.ggml.add_" + a.typ + "_token", Value: a.on})
	}
	var addPrefix bool
	if v, ok := tc["add_prefix_space"]; ok && json.Unmarshal(v, &addPrefix) == nil {
		meta = append(meta, gguf.KV{Key: "tokenizer.ggml.add_space_prefix", Value: addPrefix})
	}
	tpl := ""
	if v, ok := tc["chat_template"]; ok {
		var named []struct{ Name, Template string }
		if json.Unmarshal(v, &tpl) != nil && json.Unmarshal(v, &named) == nil {
			for _, n := range named {
				if n.Name == "default" {
					tpl = n.Template
				}
			}
		}
	}
	if tpl == "" {
		if b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
			tpl = string(b)
		}
	}
	if tpl != "" {
		meta = append(meta, gguf.KV{Key: "tokenizer.chat_template", Value: tpl})
	}
	// The architectures' own rules (the model classes' set_vocab).
	if rules.NoBOSFor49152 && vocabSize == 49152 {
		meta = setKV(meta, "tokenizer.ggml.add_bos_token", false)
	}
	if rules.NoSpacePrefix {
		meta = setKV(meta, "tokenizer.ggml.add_space_prefix", false)
	}
	return meta, nil
}

// GGUFVocabRules are what llama.cpp's converter does differently for the vocabulary of a model
// class (its set_vocab); the zero value is none of it.
type GGUFVocabRules struct {
	// Phi3AddedTokens: SentencePiece added tokens as Phi3MiniModel.set_vocab writes them
	// (spmGGUFVocab).
	Phi3AddedTokens bool
	// NoBOSFor49152: add_bos_token off for a vocabulary of 49152 (LlamaModel, for Granite's
	// small models; SmolLM2's size too).
	NoBOSFor49152 bool
	// NoSpacePrefix: add_space_prefix off (Gemma 2 and 3).
	NoSpacePrefix bool
}

// setKV replaces key's value in meta, or appends it.
func setKV(meta []gguf.KV, key string, v any) []gguf.KV {
	for i := range meta {
		if meta[i].Key == key {
			meta[i].Value = v
			return meta
		}
	}
	return append(meta, gguf.KV{Key: key, Value: v})
}

// looksSpecial is convert_hf_to_gguf.py's test for added tokens it makes control tokens
// even when tokenizer.json does not mark them special.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		strings.HasPrefix(s, "<start_of_") && strings.HasSuffix(s, ">") ||
		strings.HasPrefix(s, "<end_of_") && strings.HasSuffix(s, ">") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}

// specialAdd is one add_<typ>_token flag.
type specialAdd struct {
	typ string
	on  bool
}

// specialAdds are the add_<typ>_token flags gguf.SpecialVocab derives, in its order: from
// the post-processor (RobertaProcessing adds bos, eos and sep; TemplateProcessing adds bos
// when its single template starts with the bos or cls token, eos when it ends with the eos
// token, and sep when its pair template puts the sep or eos token between A and B), then
// tokenizer_config.json's add_<typ>_token booleans, which override.
func specialAdds(post json.RawMessage, tc map[string]json.RawMessage) []specialAdd {
	var out []specialAdd
	set := func(typ string, on bool) {
		for i := range out {
			if out[i].typ == typ {
				out[i].on = on
				return
			}
		}
		out = append(out, specialAdd{typ, on})
	}
	tok := func(typ string) string {
		var s string
		var obj struct{ Content string }
		if v, ok := tc[typ+"_token"]; ok && json.Unmarshal(v, &s) != nil && json.Unmarshal(v, &obj) == nil {
			s = obj.Content
		}
		return s
	}
	bos, cls, eos, sep := tok("bos"), tok("cls"), tok("eos"), tok("sep")
	if bos == "" && cls != "" && tc != nil {
		bos = cls
	}
	if eos == "" && sep != "" && tc != nil {
		eos = sep
	}
	type piece struct {
		SpecialToken *struct{ ID string } `json:"SpecialToken"`
		Sequence     *struct{ ID string } `json:"Sequence"`
	}
	special := func(p piece) string {
		if p.SpecialToken != nil {
			return p.SpecialToken.ID
		}
		return ""
	}
	var pp struct {
		Type       string
		Processors []json.RawMessage
	}
	if json.Unmarshal(post, &pp) == nil && pp.Type != "" {
		procs := []json.RawMessage{post}
		if pp.Processors != nil {
			procs = pp.Processors
		}
		for _, raw := range procs {
			var p struct {
				Type         string
				Single, Pair []piece
			}
			if json.Unmarshal(raw, &p) != nil {
				continue
			}
			switch p.Type {
			case "RobertaProcessing":
				set("bos", true)
				set("eos", true)
				set("sep", true)
				continue
			case "TemplateProcessing":
			default:
				continue
			}
			first, last := "", ""
			if len(p.Single) > 1 {
				if first = special(p.Single[0]); first != "" {
					if tc == nil {
						bos = first
					}
					set("bos", first == bos || first == cls)
				}
				if last = special(p.Single[len(p.Single)-1]); last != "" {
					if tc == nil {
						eos = last
					} else if last != eos {
						eos = last
					}
					set("eos", last == eos)
				}
			}
			pair := p.Pair
			if len(pair) > 0 && first != "" && special(pair[0]) == first {
				pair = pair[1:]
			}
			if len(pair) > 0 && last != "" && special(pair[len(pair)-1]) == last {
				pair = pair[:len(pair)-1]
			}
			if len(pair) < 3 || pair[0].Sequence == nil || pair[0].Sequence.ID != "A" ||
				pair[len(pair)-1].Sequence == nil || pair[len(pair)-1].Sequence.ID != "B" {
				continue
			}
			mid := pair[1 : len(pair)-1]
			addSep := false
			if e := special(mid[0]); e != "" && (e == sep || e == eos) && last == "" {
				addSep = true
			}
			if len(mid) == 2 {
				if e := special(mid[1]); e != "" && (e == sep || e == eos) {
					addSep = true
				}
			}
			set("sep", addSep)
		}
	}
	if tc != nil {
		for _, typ := range []string{"bos", "eos", "unk", "sep", "pad", "cls", "mask"} {
			var on bool
			if v, ok := tc["add_"+typ+"_token"]; ok && json.Unmarshal(v, &on) == nil {
				set(typ, on)
			}
		}
	}
	return out
}

// ggufPreName finds the tokenizer.ggml.pre value whose normalizer, pre-tokenizer and
// ignore_merges (ggufPreTokenizers) are tokenizer.json's, ignoring trim_offsets (which
// changes offsets, not tokens).
func ggufPreName(normalizer, preTok json.RawMessage, ignoreMerges bool) (string, error) {
	canon := func(v any) string {
		b, _ := json.Marshal(v)
		var x any
		_ = json.Unmarshal(b, &x)
		var strip func(any) any
		strip = func(v any) any {
			switch t := v.(type) {
			case map[string]any:
				delete(t, "trim_offsets")
				for k, e := range t {
					t[k] = strip(e)
				}
			case []any:
				for i, e := range t {
					t[i] = strip(e)
				}
			}
			return v
		}
		out, _ := json.Marshal(strip(x))
		return string(out)
	}
	var n, p any
	_ = json.Unmarshal(normalizer, &n)
	_ = json.Unmarshal(preTok, &p)
	gotN, gotP := canon(n), canon(p)
	names := make([]string, 0, len(ggufPreTokenizers))
	for name := range ggufPreTokenizers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		e := ggufPreTokenizers[name]
		if canon(e.normalizer) == gotN && canon(e.pre) == gotP && e.ignoreMerges == ignoreMerges {
			return name, nil
		}
	}
	return "", fmt.Errorf("its normalizer and pre-tokenizer match none that Hone can name for llama.cpp (tokenizer.ggml.pre %s)", strings.Join(names, ", "))
}

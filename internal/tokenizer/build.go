package tokenizer

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Spec describes a byte-level BPE tokenizer to write as tokenizer.json and
// tokenizer_config.json, for the synthetic models Hone makes for tests and its demo.
type Spec struct {
	// Tokens are the model's vocabulary in id order, in the byte-level alphabet; the first 256
	// are normally the single bytes. Merges build every other token from two earlier ones.
	Tokens []string
	Merges [][2]string
	// Added tokens get ids after Tokens, in order.
	Added []AddedToken
	// Pattern is the split regex (PatternLlama3, PatternQwen2, PatternGPT2 or any other).
	Pattern string
	NFC     bool
	// Config.
	BOSToken, EOSToken, PadToken string
	AddBOSToken                  bool
	ChatTemplate                 string
	ModelMaxLength               int
}

// AddedToken is an added token of a Spec.
type AddedToken struct {
	Content string
	Special bool
}

// ByteTokens are the 256 single-byte tokens in byte order.
func ByteTokens() []string {
	out := make([]string, 256)
	for b := range out {
		out[b] = string(byteToRune[b])
	}
	return out
}

// TokenizerJSON writes the spec as tokenizer.json.
func (s Spec) TokenizerJSON() ([]byte, error) {
	vocab := make(map[string]int, len(s.Tokens))
	for i, t := range s.Tokens {
		if _, dup := vocab[t]; dup {
			return nil, fmt.Errorf("tokenizer: duplicate token %q", t)
		}
		vocab[t] = i
	}
	merges := make([]string, len(s.Merges))
	for i, m := range s.Merges {
		if _, ok := vocab[m[0]+m[1]]; !ok {
			return nil, fmt.Errorf("tokenizer: merge %q+%q makes a token missing from the vocabulary", m[0], m[1])
		}
		merges[i] = m[0] + " " + m[1]
	}
	var added []map[string]any
	for i, a := range s.Added {
		added = append(added, map[string]any{"id": len(s.Tokens) + i, "content": a.Content, "single_word": false,
			"lstrip": false, "rstrip": false, "normalized": false, "special": a.Special})
	}
	pattern := s.Pattern
	if pattern == "" {
		pattern = PatternQwen2
	}
	var normalizer any
	if s.NFC {
		normalizer = map[string]any{"type": "NFC"}
	}
	doc := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": added,
		"normalizer":   normalizer,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges},
	}
	return json.MarshalIndent(doc, "", " ")
}

// ConfigJSON writes the spec's tokenizer_config.json.
func (s Spec) ConfigJSON() ([]byte, error) {
	decoder := map[string]any{}
	for i, a := range s.Added {
		decoder[fmt.Sprint(len(s.Tokens)+i)] = map[string]any{"content": a.Content, "lstrip": false, "normalized": false,
			"rstrip": false, "single_word": false, "special": a.Special}
	}
	nullable := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	maxLen := s.ModelMaxLength
	if maxLen == 0 {
		maxLen = 2048
	}
	doc := map[string]any{
		"add_bos_token":                s.AddBOSToken,
		"add_prefix_space":             false,
		"added_tokens_decoder":         decoder,
		"bos_token":                    nullable(s.BOSToken),
		"eos_token":                    nullable(s.EOSToken),
		"pad_token":                    nullable(s.PadToken),
		"clean_up_tokenization_spaces": false,
		"model_max_length":             maxLen,
		"tokenizer_class":              "PreTrainedTokenizerFast",
	}
	if s.ChatTemplate != "" {
		doc["chat_template"] = s.ChatTemplate
	}
	return json.MarshalIndent(doc, "", " ")
}

// Build returns the tokenizer the spec describes.
func (s Spec) Build() (*Tokenizer, error) {
	tj, err := s.TokenizerJSON()
	if err != nil {
		return nil, err
	}
	cj, err := s.ConfigJSON()
	if err != nil {
		return nil, err
	}
	return FromJSON(tj, cj)
}

// Train learns a byte-level BPE vocabulary of vocabSize model tokens (256 bytes plus merges)
// from corpus, splitting it with pattern first, as Hugging Face's BPE trainer does: the most
// frequent adjacent pair is merged at each step (ties broken by the pair's text, so training
// is deterministic). The returned spec has no added tokens or config; set them before writing.
func Train(corpus []string, vocabSize int, pattern string) (Spec, error) {
	if vocabSize < 256 {
		return Spec{}, fmt.Errorf("tokenizer: vocabulary size %d is below the 256 byte tokens", vocabSize)
	}
	if pattern == "" {
		pattern = PatternQwen2
	}
	split, err := splitterFor(pattern)
	if err != nil {
		return Spec{}, err
	}
	// Words as sequences of token ids, with their counts.
	tokens := ByteTokens()
	index := map[string]int{}
	for i, t := range tokens {
		index[t] = i
	}
	type word struct {
		ids   []int
		count int
	}
	counts := map[string]int{}
	for _, text := range corpus {
		split(text, func(a, b int) { counts[text[a:b]]++ })
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	words := make([]word, 0, len(keys))
	for _, k := range keys {
		w := word{count: counts[k]}
		for i := 0; i < len(k); i++ {
			w.ids = append(w.ids, int(k[i]))
		}
		words = append(words, w)
	}
	spec := Spec{Tokens: tokens, Pattern: pattern}
	type pair struct{ a, b int }
	for len(spec.Tokens) < vocabSize {
		freq := map[pair]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.ids); i++ {
				freq[pair{w.ids[i], w.ids[i+1]}] += w.count
			}
		}
		var best pair
		bestN := 0
		bestText := ""
		for p, n := range freq {
			text := spec.Tokens[p.a] + "\x00" + spec.Tokens[p.b]
			if n > bestN || (n == bestN && text < bestText) {
				best, bestN, bestText = p, n, text
			}
		}
		if bestN < 2 {
			break // nothing left worth merging
		}
		merged := spec.Tokens[best.a] + spec.Tokens[best.b]
		id, exists := index[merged]
		if !exists {
			id = len(spec.Tokens)
			spec.Tokens = append(spec.Tokens, merged)
			index[merged] = id
		}
		spec.Merges = append(spec.Merges, [2]string{spec.Tokens[best.a], spec.Tokens[best.b]})
		for wi := range words {
			ids := words[wi].ids
			out := ids[:0]
			for i := 0; i < len(ids); i++ {
				if i+1 < len(ids) && ids[i] == best.a && ids[i+1] == best.b {
					out = append(out, id)
					i++
					continue
				}
				out = append(out, ids[i])
			}
			words[wi].ids = out
		}
	}
	return spec, nil
}

// TrainText is a convenience for Train on one text split into lines.
func TrainText(text string, vocabSize int, pattern string) (Spec, error) {
	return Train(strings.SplitAfter(text, "\n"), vocabSize, pattern)
}

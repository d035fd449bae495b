// Package tokenizer implements Hugging Face `tokenizer.json` BPE tokenizers in Go: byte-level
// BPE (the kind Llama 3.x, Qwen2/Qwen3, SmolLM2 and GPT-2 ship) and SentencePiece-style BPE
// with byte fallback (Llama 2, Mistral, TinyLlama), and the same vocabularies from GGUF
// metadata (FromGGUF). It has normalizers (NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace
// with a string pattern, Sequence), pre-tokenizers (Sequence, Split with any behavior, Digits,
// ByteLevel, Metaspace; hand-written splitters for the Llama 3, Qwen2 and GPT-2 patterns, a
// regex engine for others), BPE with merge ranks, ignore_merges, unk_token, fuse_unk and
// byte_fallback, added and special tokens, post-processor templates, and decoding (ByteLevel,
// or Replace, ByteFallback, Fuse, Strip and Metaspace), including an incremental decoder for
// streaming that never emits half a UTF-8 character. Any component or option that would
// change ids or text and that is not implemented is refused at load with its name.
//
// Ids agree with Hugging Face's `tokenizers` library on the committed golden corpus
// (testdata/goldens.jsonl and goldens-variants.jsonl, made by scripts/tokenizer-goldens), and
// with sentencepiece and tokenizers on a SentencePiece vocabulary (testdata/spm).
package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer is a loaded tokenizer. It is safe for concurrent use.
type Tokenizer struct {
	vocab     *vocabIndex      // token string -> id, model vocabulary and added tokens
	tokens    []string         // id -> token string ("" for unused ids)
	tokBytes  pieceTable       // id -> the bytes the token stands for (as the decoder makes them)
	special   []bool           // id -> special added token
	added     []bool           // id -> added token
	byteToken [256]int32       // id of each single-byte token (-1 if missing)
	merges    map[uint64]merge // (left id, right id) -> rank and result (mergeOf)
	spmRank   []int32          // id -> merge rank, for a SentencePiece vocabulary with scores (mergeOf)

	ignoreMerges bool
	// charLevel: SentencePiece-style BPE, whose words start as characters (bpeChars), not
	// bytes; byteFallback spells a character the vocabulary lacks with byteFallbackIDs.
	charLevel       bool
	byteFallback    bool
	byteFallbackIDs [256]int32
	metaspace       *metaspace // the Metaspace pre-tokenizer, run first (nil if none)
	dec             textDecoder
	normalize       func(string) string
	normShrink      int // how many times shorter normalize can make text (0: unbounded)
	perTokenOnce    sync.Once
	perToken        int // MaxInputBytesPerToken
	pre             preTokenizer
	unkID           int32 // id of model.unk_token for bytes the vocabulary lacks (-1: dropped)
	fuseUnk         bool
	addedMatch      *addedMatcher // added tokens matched in the raw text (normalized: false)
	addedNorm       *addedMatcher // added tokens matched in the normalized text (nil if none)

	// post-processor template for a single sequence: ids before and after the text.
	prefixIDs, suffixIDs []int

	config Config
	cache  *wordCache
}

type merge struct {
	rank   int32
	result int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// Config is what Hone reads from tokenizer_config.json.
type Config struct {
	BOSToken                  string
	EOSToken                  string
	PadToken                  string
	UnkToken                  string
	AddBOSToken               bool
	AddEOSToken               bool
	ModelMaxLength            int64
	CleanUpTokenizationSpaces bool
	ChatTemplates             map[string]string // "" is the default template
	// SpecialTokens maps names usable in chat templates (bos_token, eos_token, ...) to text.
	SpecialTokens map[string]string
}

// Load reads tokenizer.json (or tokenizer.json.gz) and tokenizer_config.json (optional) from
// dir; when dir is a .gguf file, the tokenizer its metadata describes (LoadGGUF).
func Load(dir string) (*Tokenizer, error) {
	if IsGGUF(dir) {
		return LoadGGUF(dir)
	}
	tj, err := readMaybeGz(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	cj, err := readMaybeGz(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := FromJSON(tj, cj)
	if err != nil {
		return nil, err
	}
	if err := t.loadTemplateFiles(dir); err != nil {
		return nil, err
	}
	return t, nil
}

// loadTemplateFiles reads the chat templates that transformers 4.43+ and 5 save as files:
// chat_template.jinja (the default template) and additional_chat_templates/NAME.jinja (named
// ones). As in transformers' from_pretrained, when any such file exists the files replace
// every template of tokenizer_config.json (whose chat_template is then ignored).
func (t *Tokenizer) loadTemplateFiles(dir string) error {
	files := map[string]string{}
	if b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		files[""] = string(b)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("tokenizer: %w", err)
	}
	extra, err := filepath.Glob(filepath.Join(dir, "additional_chat_templates", "*.jinja"))
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	for _, path := range extra {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
		name := strings.TrimSuffix(filepath.Base(path), ".jinja")
		if name == "default" {
			name = ""
		}
		files[name] = string(b)
	}
	if len(files) == 0 {
		return nil
	}
	t.config.ChatTemplates = files
	if t.config.SpecialTokens == nil {
		t.config.SpecialTokens = map[string]string{}
	}
	return nil
}

func readMaybeGz(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return b, nil
	}
	f, gzErr := os.Open(path + ".gz")
	if gzErr != nil {
		return nil, err
	}
	defer f.Close()
	zr, gzErr := gzip.NewReader(f)
	if gzErr != nil {
		return nil, fmt.Errorf("%s.gz: %w", path, gzErr)
	}
	return io.ReadAll(zr)
}

// JSON shapes of tokenizer.json.
type tokenizerJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         struct {
		Type                    string           `json:"type"`
		Vocab                   map[string]int32 `json:"vocab"`
		Merges                  json.RawMessage  `json:"merges"`
		IgnoreMerges            bool             `json:"ignore_merges"`
		ByteFallback            bool             `json:"byte_fallback"`
		UnkToken                *string          `json:"unk_token"`
		FuseUnk                 bool             `json:"fuse_unk"`
		Dropout                 *float64         `json:"dropout"`
		ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	} `json:"model"`
}

type addedTokenJSON struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type component struct {
	Type          string            `json:"type"`
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Processors    []json.RawMessage `json:"processors"`
	Decoders      []json.RawMessage `json:"decoders"`
	Pattern       struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Content        string            `json:"content"` // Replace (normalizer, decoder), Strip
	Prepend        string            `json:"prepend"`
	Start          int               `json:"start"` // Strip
	Stop           int               `json:"stop"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
	Single         []json.RawMessage `json:"single"`
	SpecialTokens  map[string]struct {
		IDs []int `json:"ids"`
	} `json:"special_tokens"`
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// FromJSON builds a tokenizer from the contents of tokenizer.json and tokenizer_config.json
// (configJSON may be nil).
func FromJSON(tokenizerJSONData, configJSON []byte) (*Tokenizer, error) {
	var tj tokenizerJSON
	if err := json.Unmarshal(tokenizerJSONData, &tj); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer: model type %q is not supported (Hone supports BPE)", tj.Model.Type)
	}
	t := &Tokenizer{merges: map[uint64]merge{}, cache: newWordCache(1 << 16)}
	vocab := make(map[string]int32, len(tj.Model.Vocab)+len(tj.AddedTokens))
	maxID := int32(-1)
	for s, id := range tj.Model.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("tokenizer: negative id %d for %q", id, s)
		}
		vocab[s] = id
		maxID = max(maxID, id)
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 || a.Content == "" {
			return nil, fmt.Errorf("tokenizer: bad added token %d %q", a.ID, a.Content)
		}
		maxID = max(maxID, a.ID)
	}
	if maxID > 1<<24 {
		return nil, fmt.Errorf("tokenizer: vocabulary too large (max id %d)", maxID)
	}
	n := int(maxID) + 1
	t.tokens = make([]string, n)
	tokBytes := make([][]byte, n)
	t.special = make([]bool, n)
	t.added = make([]bool, n)
	for s, id := range tj.Model.Vocab {
		t.tokens[id] = s
		if b, ok := byteLevelDecode(s); ok {
			tokBytes[id] = b
		} else {
			tokBytes[id] = []byte(s)
		}
	}
	for i := range t.byteToken {
		t.byteToken[i] = -1
		if id, ok := vocab[string(byteToRune[i])]; ok {
			t.byteToken[i] = id
		}
	}
	var addedList []addedTokenJSON
	for _, a := range tj.AddedTokens {
		t.tokens[a.ID] = a.Content
		tokBytes[a.ID] = []byte(a.Content)
		t.special[a.ID] = a.Special
		t.added[a.ID] = true
		vocab[a.Content] = a.ID
		addedList = append(addedList, a)
	}
	t.tokens = compactStrings(t.tokens)
	t.vocab = newVocabIndex(vocab, t.tokens)
	vocab = nil
	// As tokenizers' AddedVocabulary does: tokens with normalized false are found in the raw
	// text first, then those with normalized true in the normalized remainder.
	var raw, normed []addedTokenJSON
	for _, a := range addedList {
		if a.Normalized {
			normed = append(normed, a)
		} else {
			raw = append(raw, a)
		}
	}
	t.addedMatch = newAddedMatcher(raw)
	if len(normed) > 0 {
		t.addedNorm = newAddedMatcher(normed)
	}
	t.ignoreMerges = tj.Model.IgnoreMerges
	var err error
	if t.normalize, err = buildNormalizer(tj.Normalizer); err != nil {
		return nil, err
	}
	t.normShrink = normalizerShrink(tj.Normalizer)
	if err := t.buildPreTokenizer(tj.PreTokenizer); err != nil {
		return nil, err
	}
	if err := t.checkModel(&tj); err != nil {
		return nil, err
	}
	if err := t.loadMerges(tj.Model.Merges); err != nil {
		return nil, err
	}
	if err := t.buildPostProcessor(tj.PostProcessor); err != nil {
		return nil, err
	}
	if t.dec, err = buildDecoder(tj.Decoder, t.charLevel); err != nil {
		return nil, err
	}
	if t.charLevel {
		for id, tok := range t.tokens {
			tokBytes[id] = t.dec.piece(tok, false)
		}
	}
	t.tokBytes = newPieceTable(tokBytes)
	if len(configJSON) > 0 {
		if err := t.loadConfig(configJSON); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// checkModel refuses the BPE options that would change ids and that Hone does not implement,
// and reads unk_token (used, as in tokenizers, for a byte or character the vocabulary cannot
// spell) and byte_fallback (for a character-level BPE: the <0xXX> tokens spell them).
func (t *Tokenizer) checkModel(tj *tokenizerJSON) error {
	m := &tj.Model
	if m.Dropout != nil && *m.Dropout != 0 {
		return fmt.Errorf("tokenizer: model.dropout %v is not supported (ids would be random)", *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return fmt.Errorf("tokenizer: model.continuing_subword_prefix %q is not supported", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return fmt.Errorf("tokenizer: model.end_of_word_suffix %q is not supported", *m.EndOfWordSuffix)
	}
	complete := true
	for _, id := range t.byteToken {
		complete = complete && id >= 0
	}
	t.findByteFallback()
	t.byteFallback = m.ByteFallback && t.charLevel
	if m.ByteFallback && !complete && !t.charLevel {
		return fmt.Errorf("tokenizer: model.byte_fallback is not supported (the vocabulary lacks byte-level tokens for some bytes)")
	}
	t.unkID, t.fuseUnk = -1, m.FuseUnk
	if m.UnkToken != nil {
		if id, ok := t.vocab.get(*m.UnkToken); ok {
			t.unkID = id
		}
	}
	return nil
}

func (t *Tokenizer) loadMerges(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var pairs [][2]string
	var asStrings []string
	if err := json.Unmarshal(raw, &asStrings); err == nil {
		pairs = make([][2]string, 0, len(asStrings))
		for i, m := range asStrings {
			a, b, ok := strings.Cut(m, " ")
			if !ok {
				return fmt.Errorf("tokenizer: merge %d %q is not \"left right\"", i, m)
			}
			pairs = append(pairs, [2]string{a, b})
		}
	} else if err := json.Unmarshal(raw, &pairs); err != nil {
		return fmt.Errorf("tokenizer: merges: %w", err)
	}
	for rank, p := range pairs {
		a, okA := t.vocab.get(p[0])
		b, okB := t.vocab.get(p[1])
		r, okR := t.vocab.get(p[0] + p[1])
		if !okA || !okB || !okR {
			return fmt.Errorf("tokenizer: merge %d (%q %q) uses tokens missing from the vocabulary", rank, p[0], p[1])
		}
		k := pairKey(a, b)
		if _, dup := t.merges[k]; !dup {
			t.merges[k] = merge{rank: int32(rank), result: r}
		}
	}
	return nil
}

// normalizerShrink bounds how many times fewer bytes a normalizer's output can have than its
// input: 1 without one; 3 for Unicode normalisation and lowercasing (a Hangul syllable
// composed of three 3-byte jamo, U+212A KELVIN SIGN lowercased to "k"); len(from)/len(to)
// for Replace; the product for a Sequence; 0 (unbounded) for a Replace by nothing.
func normalizerShrink(raw json.RawMessage) int {
	if isNull(raw) {
		return 1
	}
	var c component
	if json.Unmarshal(raw, &c) != nil {
		return 0
	}
	switch c.Type {
	case "NFC", "NFD", "NFKC", "NFKD", "Lowercase":
		return 3
	case "Prepend":
		return 1
	case "Replace":
		if c.Pattern.String == nil || len(c.Content) == 0 {
			return 0
		}
		return max(1, (len(*c.Pattern.String)+len(c.Content)-1)/len(c.Content))
	case "Sequence":
		f := 1
		for _, sub := range c.Normalizers {
			g := normalizerShrink(sub)
			if g == 0 || f > 1<<20 {
				return 0
			}
			f *= g
		}
		return f
	}
	return 0
}

// MaxInputBytesPerToken bounds how many bytes of text one token of Encode's output can stand
// for: the longest token (its bytes or its vocabulary string, and at least 4, the longest
// character an unknown token replaces) times how much the normalizer can shrink text. So text
// of n bytes encodes to at least n/MaxInputBytesPerToken tokens, which lets a caller refuse an
// over-long text before encoding it. 0 means no bound is known.
func (t *Tokenizer) MaxInputBytesPerToken() int {
	t.perTokenOnce.Do(func() {
		shrink := t.normShrink
		if t.normalize == nil {
			shrink = 1
		}
		if shrink == 0 {
			return
		}
		longest := 4
		for id := range t.tokBytes.len() {
			longest = max(longest, len(t.tokBytes.at(id)))
			if id < len(t.tokens) {
				longest = max(longest, len(t.tokens[id]))
			}
		}
		t.perToken = longest * shrink
	})
	return t.perToken
}

func buildNormalizer(raw json.RawMessage) (func(string) string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("tokenizer: normalizer: %w", err)
	}
	switch c.Type {
	case "NFC":
		return norm.NFC.String, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Lowercase":
		return rustLowercase, nil
	case "Prepend":
		p := c.Prepend
		return func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}, nil
	case "Replace":
		if c.Pattern.String == nil || *c.Pattern.String == "" {
			return nil, fmt.Errorf("tokenizer: normalizer \"Replace\" with a regex pattern is not supported (string patterns only)")
		}
		from, to := *c.Pattern.String, c.Content
		return func(s string) string { return strings.ReplaceAll(s, from, to) }, nil
	case "Sequence":
		var fs []func(string) string
		for _, sub := range c.Normalizers {
			f, err := buildNormalizer(sub)
			if err != nil {
				return nil, err
			}
			if f != nil {
				fs = append(fs, f)
			}
		}
		return func(s string) string {
			for _, f := range fs {
				s = f(s)
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("tokenizer: normalizer %q is not supported", c.Type)
}

func (t *Tokenizer) buildPostProcessor(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("tokenizer: post_processor: %w", err)
	}
	parts := []json.RawMessage{raw}
	if c.Type == "Sequence" {
		parts = c.Processors
	}
	for _, p := range parts {
		var pc component
		if err := json.Unmarshal(p, &pc); err != nil {
			return fmt.Errorf("tokenizer: post_processor: %w", err)
		}
		switch pc.Type {
		case "ByteLevel":
		case "TemplateProcessing":
			seenText := false
			for _, item := range pc.Single {
				var it struct {
					SpecialToken *struct {
						ID string `json:"id"`
					} `json:"SpecialToken"`
					Sequence *struct {
						ID string `json:"id"`
					} `json:"Sequence"`
				}
				if err := json.Unmarshal(item, &it); err != nil {
					return fmt.Errorf("tokenizer: TemplateProcessing: %w", err)
				}
				switch {
				case it.Sequence != nil:
					seenText = true
				case it.SpecialToken != nil:
					// The ids are those of the processor's special_tokens entry.
					st, ok := pc.SpecialTokens[it.SpecialToken.ID]
					if !ok {
						return fmt.Errorf("tokenizer: TemplateProcessing names %q, which its special_tokens lacks", it.SpecialToken.ID)
					}
					for _, id := range st.IDs {
						if id < 0 || id >= len(t.tokens) {
							return fmt.Errorf("tokenizer: TemplateProcessing token %q has id %d outside the vocabulary", it.SpecialToken.ID, id)
						}
					}
					if seenText {
						t.suffixIDs = append(t.suffixIDs, st.IDs...)
					} else {
						t.prefixIDs = append(t.prefixIDs, st.IDs...)
					}
				}
			}
		default:
			return fmt.Errorf("tokenizer: post-processor %q is not supported", pc.Type)
		}
	}
	return nil
}

// tokenName reads a token field of tokenizer_config.json: a string or {"content": ...}.
func tokenName(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return o.Content
	}
	return ""
}

func (t *Tokenizer) loadConfig(data []byte) error {
	var c map[string]json.RawMessage
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("tokenizer: tokenizer_config.json: %w", err)
	}
	cfg := Config{ChatTemplates: map[string]string{}, SpecialTokens: map[string]string{}}
	for _, name := range []string{"bos_token", "eos_token", "pad_token", "unk_token", "sep_token", "cls_token", "mask_token"} {
		if raw, ok := c[name]; ok && !isNull(raw) {
			if v := tokenName(raw); v != "" {
				cfg.SpecialTokens[name] = v
			}
		}
	}
	cfg.BOSToken, cfg.EOSToken = cfg.SpecialTokens["bos_token"], cfg.SpecialTokens["eos_token"]
	cfg.PadToken, cfg.UnkToken = cfg.SpecialTokens["pad_token"], cfg.SpecialTokens["unk_token"]
	boolField := func(name string, dst *bool) {
		if raw, ok := c[name]; ok {
			_ = json.Unmarshal(raw, dst)
		}
	}
	boolField("add_bos_token", &cfg.AddBOSToken)
	boolField("add_eos_token", &cfg.AddEOSToken)
	boolField("clean_up_tokenization_spaces", &cfg.CleanUpTokenizationSpaces)
	if raw, ok := c["model_max_length"]; ok {
		var f float64
		if json.Unmarshal(raw, &f) == nil && f > 0 && f < 1e15 {
			cfg.ModelMaxLength = int64(f)
		}
	}
	if raw, ok := c["chat_template"]; ok && !isNull(raw) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			cfg.ChatTemplates[""] = s
		} else {
			var named []struct {
				Name     string `json:"name"`
				Template string `json:"template"`
			}
			if err := json.Unmarshal(raw, &named); err != nil {
				return fmt.Errorf("tokenizer: chat_template must be a string or a list of {name, template}")
			}
			for _, n := range named {
				key := n.Name
				if key == "default" {
					key = ""
				}
				cfg.ChatTemplates[key] = n.Template
			}
		}
	}
	t.config = cfg
	return nil
}

// Config returns what was read from tokenizer_config.json.
func (t *Tokenizer) Config() Config { return t.config }

// ChatTemplate returns the named chat template ("" is the default one; "tool_use" is chosen
// by callers when tools are given and it exists), or "".
func (t *Tokenizer) ChatTemplate(name string) string { return t.config.ChatTemplates[name] }

// VocabSize is the number of ids (max id + 1), added tokens included.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// TokenString is the token's string in the vocabulary (byte-level alphabet for the model
// tokens of a byte-level BPE, SentencePiece's "▁" for a space in a character-level one, the
// content for added tokens).
func (t *Tokenizer) TokenString(id int) string {
	if id < 0 || id >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// TokenBytes is the bytes a token stands for (nil for unknown ids).
func (t *Tokenizer) TokenBytes(id int) []byte {
	if id < 0 || id >= t.tokBytes.len() {
		return nil
	}
	return t.tokBytes.at(id)
}

// TokenID returns the id of a token string (vocabulary or added token).
func (t *Tokenizer) TokenID(s string) (int, bool) {
	id, ok := t.vocab.get(s)
	return int(id), ok
}

// IsSpecial reports whether id is a special added token.
func (t *Tokenizer) IsSpecial(id int) bool { return id >= 0 && id < len(t.special) && t.special[id] }

// IsAdded reports whether id is an added token.
func (t *Tokenizer) IsAdded(id int) bool { return id >= 0 && id < len(t.added) && t.added[id] }

// BOS returns the id of the configured beginning-of-sequence token.
func (t *Tokenizer) BOS() (int, bool) { return t.TokenID(t.config.BOSToken) }

// EOS returns the id of the configured end-of-sequence token.
func (t *Tokenizer) EOS() (int, bool) {
	if t.config.EOSToken == "" {
		return 0, false
	}
	return t.TokenID(t.config.EOSToken)
}

// SpecialIDs returns the ids of all special tokens, sorted.
func (t *Tokenizer) SpecialIDs() []int {
	var out []int
	for id, s := range t.special {
		if s {
			out = append(out, id)
		}
	}
	sort.Ints(out)
	return out
}

// Encode tokenizes text. Added tokens written in the text are recognised. With
// addSpecialTokens the post-processor's template is applied (for example a BOS token).
func (t *Tokenizer) Encode(text string, addSpecialTokens bool) []int {
	out := make([]int, 0, len(text)/3+len(t.prefixIDs)+len(t.suffixIDs))
	if addSpecialTokens {
		out = append(out, t.prefixIDs...)
	}
	atStart := true // no piece before this one (Metaspace's prepend_scheme "first")
	t.splitAdded(text, func(piece string, addedID int32) {
		if addedID >= 0 {
			out = append(out, int(addedID))
		} else {
			out = t.encodePlain(piece, atStart, out)
		}
		atStart = false
	})
	if addSpecialTokens {
		out = append(out, t.suffixIDs...)
	}
	return out
}

// splitAdded cuts text into added tokens (id >= 0) and normalized plain pieces (id -1).
func (t *Tokenizer) splitAdded(text string, emit func(piece string, id int32)) {
	t.addedMatch.split(text, func(piece string, id int32) {
		if id >= 0 {
			emit(piece, id)
			return
		}
		if t.normalize != nil {
			piece = t.normalize(piece)
		}
		if t.addedNorm == nil {
			emit(piece, -1)
			return
		}
		t.addedNorm.split(piece, emit)
	})
}

// encodePlain tokenizes normalized text that holds no added token; atStart says whether it
// begins the text.
func (t *Tokenizer) encodePlain(text string, atStart bool, out []int) []int {
	if text == "" {
		return out
	}
	word := func(piece string) { out = t.encodeWord(piece, out) }
	if t.metaspace != nil {
		t.metaspace.run(text, atStart, func(piece string) { t.pre(piece, word) })
		return out
	}
	t.pre(text, word)
	return out
}

// wordCache is a bounded cache of pre-token encodings.
type wordCache struct {
	mu  sync.RWMutex
	m   map[string][]int32
	max int
}

func newWordCache(n int) *wordCache { return &wordCache{m: make(map[string][]int32), max: n} }

func (c *wordCache) get(w string) ([]int32, bool) {
	c.mu.RLock()
	v, ok := c.m[w]
	c.mu.RUnlock()
	return v, ok
}

func (c *wordCache) put(w string, ids []int32) {
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m) // simple and bounded: start over when full
	}
	c.m[w] = ids
	c.mu.Unlock()
}

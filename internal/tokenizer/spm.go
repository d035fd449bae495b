package tokenizer

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// SentencePiece-style BPE (Llama 2, Mistral, TinyLlama, Gemma): the vocabulary holds text, with
// "▁" for a space, rather than GPT-2's byte-level alphabet; a word starts as its characters,
// and a character the vocabulary lacks is spelled with the byte tokens <0x00>..<0xFF>
// (byte_fallback) or becomes the unknown token.

// metaspaceChar is SentencePiece's stand-in for a space.
const metaspaceChar = "\u2581"

// byteFallbackName is the vocabulary entry of byte b, as SentencePiece names it ("<0x0A>").
func byteFallbackName(b byte) string { return fmt.Sprintf("<0x%02X>", b) }

// parseByteFallback returns the byte a "<0xXX>" token stands for.
func parseByteFallback(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			b = b<<4 | (c - '0')
		case c >= 'A' && c <= 'F':
			b = b<<4 | (c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return b, true
}

// bpeChars merges the characters of a pre-token (character-level BPE, as tokenizers' BPE does
// with byte_fallback): each character is its vocabulary token, else its bytes' <0xXX> tokens
// when byte_fallback is on and all of them exist, else the unknown token (one for a run with
// fuse_unk) or nothing. Bytes that are not valid UTF-8 count as characters of their own.
func (t *Tokenizer) bpeChars(w string) []int32 {
	if t.ignoreMerges {
		if id, ok := t.vocab.get(w); ok {
			return []int32{id}
		}
	}
	syms := make([]symbol, 0, len(w))
	push := func(id int32, unk bool) {
		syms = append(syms, symbol{id: id, prev: int32(len(syms)) - 1, next: int32(len(syms)) + 1, alive: true, unk: unk})
	}
	for i := 0; i < len(w); {
		_, n := utf8.DecodeRuneInString(w[i:])
		ch := w[i : i+n]
		i += n
		if id, ok := t.vocab.get(ch); ok {
			push(id, false)
			continue
		}
		if t.byteFallback {
			all := true
			for k := 0; k < len(ch); k++ {
				all = all && t.byteFallbackIDs[ch[k]] >= 0
			}
			if all {
				for k := 0; k < len(ch); k++ {
					push(t.byteFallbackIDs[ch[k]], false)
				}
				continue
			}
		}
		if t.unkID < 0 {
			continue
		}
		if n := len(syms); t.fuseUnk && n > 0 && syms[n-1].id == t.unkID && syms[n-1].unk {
			continue
		}
		push(t.unkID, true)
	}
	return t.mergeSymbols(syms)
}

// findByteFallback records the ids of the <0xXX> tokens of the vocabulary.
func (t *Tokenizer) findByteFallback() {
	for b := range t.byteFallbackIDs {
		t.byteFallbackIDs[b] = -1
		if id, ok := t.vocab.get(byteFallbackName(byte(b))); ok {
			t.byteFallbackIDs[b] = id
		}
	}
}

// mergesFromScores sets the merges of a SentencePiece vocabulary from its scores, as
// llama.cpp's SPM tokenizer merges: two adjacent symbols merge when their concatenation is a
// token, the one with the highest score first (the leftmost on ties). Tokens of equal score
// share a rank, so that the leftmost pair wins between them as in llama.cpp. The merges are
// not listed pair by pair (Gemma 3's 262,144 tokens make about 640,000 pairs, 18 MB of map
// held for the server's life): each token's rank is kept (spmRank) and mergeOf looks the
// concatenation up in the vocabulary.
func (t *Tokenizer) mergesFromScores(tokens []string, scores []float64) {
	uniq := append([]float64(nil), scores...)
	sort.Sort(sort.Reverse(sort.Float64Slice(uniq)))
	rank := map[float64]int32{}
	for _, s := range uniq {
		if _, ok := rank[s]; !ok {
			rank[s] = int32(len(rank))
		}
	}
	t.merges = nil
	t.spmRank = make([]int32, len(t.tokens))
	for id := range tokens {
		if id < len(t.spmRank) {
			t.spmRank[id] = rank[scores[id]]
		}
	}
}

// mergeOf is the merge of adjacent symbols a and b: the entry of merges, or, for a
// SentencePiece vocabulary with scores (spmRank), the token the two texts make together when
// the vocabulary has it (a split of a token at a character boundary into two tokens, as
// mergesFromScores defines the merges).
func (t *Tokenizer) mergeOf(a, b int32) (merge, bool) {
	if t.spmRank == nil {
		m, ok := t.merges[pairKey(a, b)]
		return m, ok
	}
	l, r := t.tokens[a], t.tokens[b]
	if l == "" || r == "" || !utf8.RuneStart(r[0]) {
		return merge{}, false
	}
	var buf [128]byte
	k := append(append(buf[:0], l...), r...)
	id, ok := t.vocab.getBytes(k)
	if !ok || int(id) >= len(t.spmRank) {
		return merge{}, false
	}
	return merge{rank: t.spmRank[id], result: id}, true
}

// metaspace is the Metaspace pre-tokenizer: spaces become the replacement character, which is
// prepended (always, to the first piece of the text only, or never) unless the piece starts
// with it, and with split the piece is cut before each replacement character.
type metaspace struct {
	replacement string
	prepend     string // "always", "first" or "never"
	split       bool
}

func newMetaspace(p preTokenizerJSON) (*metaspace, error) {
	m := &metaspace{replacement: p.Replacement, prepend: "always", split: p.Split == nil || *p.Split}
	if utf8.RuneCountInString(m.replacement) != 1 {
		return nil, fmt.Errorf("tokenizer: Metaspace replacement %q is not one character", p.Replacement)
	}
	switch {
	case p.PrependScheme != nil:
		m.prepend = *p.PrependScheme
	case p.AddPrefixSpace != nil && !*p.AddPrefixSpace:
		m.prepend = "never" // the form of tokenizers before prepend_scheme
	}
	switch m.prepend {
	case "always", "first", "never":
	default:
		return nil, fmt.Errorf("tokenizer: Metaspace prepend_scheme %q is not supported", m.prepend)
	}
	return m, nil
}

// run pre-tokenizes one piece of normalized text; atStart says whether the piece begins the
// text (for prepend_scheme "first").
func (m *metaspace) run(s string, atStart bool, emit func(string)) {
	s = strings.ReplaceAll(s, " ", m.replacement)
	if s != "" && !strings.HasPrefix(s, m.replacement) && (m.prepend == "always" || m.prepend == "first" && atStart) {
		s = m.replacement + s
	}
	if !m.split {
		if s != "" {
			emit(s)
		}
		return
	}
	last := 0
	for i := 1; i < len(s); i++ {
		if strings.HasPrefix(s[i:], m.replacement) {
			emit(s[last:i])
			last = i
		}
	}
	if last < len(s) {
		emit(s[last:])
	}
}

package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
)

// textDecoder is the decoder of tokenizer.json as Hone runs it: each token becomes bytes
// (piece, kept in tokBytes), the bytes are joined, and up to strip leading spaces of the
// whole text are removed.
type textDecoder struct {
	byteLevel    bool        // ByteLevel: model tokens are in the byte-level alphabet
	replace      [][2]string // Replace decoders (string patterns), in order
	byteFallback bool        // ByteFallback: a <0xXX> token stands for its byte
	metaspace    string      // the Metaspace decoder's replacement character ("" if none)
	metaFirst    bool        // Metaspace with a prepend scheme: the first token loses its replacements
	strip        int         // Strip after Fuse: leading spaces removed from the text
}

// piece is the text of one token (first: the first token of the text, for metaFirst). For
// byte-level decoders tokBytes is set at load instead.
func (d *textDecoder) piece(tok string, first bool) []byte {
	if d.byteFallback {
		if b, ok := parseByteFallback(tok); ok {
			return []byte{b}
		}
	}
	for _, r := range d.replace {
		tok = strings.ReplaceAll(tok, r[0], r[1])
	}
	if d.metaspace != "" {
		with := " "
		if first && d.metaFirst {
			with = ""
		}
		tok = strings.ReplaceAll(tok, d.metaspace, with)
	}
	return []byte(tok)
}

// buildDecoder reads the decoder of tokenizer.json. A byte-level tokenizer takes ByteLevel (or
// none); a character-level one a Sequence of Replace (string patterns), ByteFallback and
// Metaspace, which work token by token, then Fuse, then Strip of leading spaces, which works
// on the fused text (the decoder transformers writes for Llama 2 is Replace("▁", " "),
// ByteFallback, Fuse, Strip(" ", 1, 0)). Anything else is refused with its name.
func buildDecoder(raw json.RawMessage, charLevel bool) (textDecoder, error) {
	d := textDecoder{byteLevel: !charLevel}
	if isNull(raw) {
		if charLevel {
			return d, fmt.Errorf("tokenizer: no decoder: Hone needs one for a tokenizer without the ByteLevel pre-tokenizer")
		}
		return d, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return d, fmt.Errorf("tokenizer: decoder: %w", err)
	}
	parts := []json.RawMessage{raw}
	if c.Type == "Sequence" {
		parts = c.Decoders
	}
	fused := false
	for _, p := range parts {
		var pc component
		if err := json.Unmarshal(p, &pc); err != nil {
			return d, fmt.Errorf("tokenizer: decoder: %w", err)
		}
		if !charLevel {
			if pc.Type != "ByteLevel" {
				return d, fmt.Errorf("tokenizer: decoder %q is not supported for a byte-level tokenizer (ByteLevel only)", pc.Type)
			}
			continue
		}
		if fused && pc.Type != "Strip" {
			return d, fmt.Errorf("tokenizer: decoder %q after Fuse is not supported", pc.Type)
		}
		switch pc.Type {
		case "Replace":
			if pc.Pattern.String == nil || *pc.Pattern.String == "" {
				return d, fmt.Errorf("tokenizer: decoder \"Replace\" with a regex pattern is not supported (string patterns only)")
			}
			d.replace = append(d.replace, [2]string{*pc.Pattern.String, pc.Content})
		case "ByteFallback":
			d.byteFallback = true
		case "Metaspace":
			var mj preTokenizerJSON
			if err := json.Unmarshal(p, &mj); err != nil {
				return d, fmt.Errorf("tokenizer: decoder: %w", err)
			}
			m, err := newMetaspace(mj)
			if err != nil {
				return d, err
			}
			d.metaspace, d.metaFirst = m.replacement, m.prepend != "never"
		case "Fuse":
			fused = true
		case "Strip":
			if !fused || pc.Content != " " || pc.Stop != 0 || pc.Start < 0 {
				return d, fmt.Errorf("tokenizer: decoder \"Strip\" is supported after Fuse, of leading spaces only (content %q, start %d, stop %d)", pc.Content, pc.Start, pc.Stop)
			}
			d.strip += pc.Start
		default:
			return d, fmt.Errorf("tokenizer: decoder %q is not supported (ByteLevel; Replace, ByteFallback, Metaspace, Fuse, Strip)", pc.Type)
		}
	}
	return d, nil
}

// Decode turns ids back into text, as Hugging Face tokenizers' decode does: the tokens' bytes
// are joined (for SentencePiece vocabularies "▁" is a space, <0xXX> tokens are bytes, and the
// leading space the tokenizer prepended is stripped as its decoder says), and invalid UTF-8
// becomes U+FFFD, one for each maximal ill-formed subpart (as Rust's from_utf8_lossy). For
// byte tokens that do not make valid UTF-8 that is not what the references do: tokenizers'
// ByteFallback writes one U+FFFD per byte of a run of byte tokens that is invalid as a whole,
// sentencepiece one per invalid byte; Hone keeps one rule, which its incremental Decoder can
// follow without holding text back. Special tokens are dropped when skipSpecialTokens is set;
// ids out of range are ignored.
func (t *Tokenizer) Decode(ids []int, skipSpecialTokens bool) string {
	var b []byte
	first := true
	for _, id := range ids {
		if id < 0 || id >= t.tokBytes.len() || (skipSpecialTokens && t.special[id]) {
			continue
		}
		b = append(b, t.pieceBytes(id, first)...)
		first = false
	}
	for k := 0; k < t.dec.strip && len(b) > 0 && b[0] == ' '; k++ {
		b = b[1:]
	}
	return lossyUTF8(b)
}

// pieceBytes is the bytes of token id at its place in the text.
func (t *Tokenizer) pieceBytes(id int, first bool) []byte {
	if first && t.dec.metaFirst {
		return t.dec.piece(t.tokens[id], true)
	}
	return t.tokBytes.at(id)
}

// CleanUpTokenizationSpaces applies transformers' clean_up_tokenization (" ." -> "." and the
// like), which its decode applies when tokenizer_config.json asks for it.
func CleanUpTokenizationSpaces(s string) string {
	return strings.NewReplacer(" .", ".", " ?", "?", " !", "!", " ,", ",", " ' ", "'",
		" n't", "n't", " 'm", "'m", " 's", "'s", " 've", "'ve", " 're", "'re").Replace(s)
}

// Decoder turns a stream of ids into text incrementally: Add returns only complete text, so
// a character split across tokens is emitted whole, once its last byte arrives.
type Decoder struct {
	t           *Tokenizer
	skipSpecial bool
	pending     []byte // bytes of an unfinished UTF-8 character
	started     bool   // a token was added
	strip       int    // leading spaces still to strip (the decoder's Strip)
}

// NewDecoder returns an incremental decoder.
func (t *Tokenizer) NewDecoder(skipSpecialTokens bool) *Decoder {
	return &Decoder{t: t, skipSpecial: skipSpecialTokens, strip: t.dec.strip}
}

// Add consumes one id and returns the text it completes (possibly "").
func (d *Decoder) Add(id int) string {
	t := d.t
	if id < 0 || id >= t.tokBytes.len() || (d.skipSpecial && t.special[id]) {
		return ""
	}
	d.pending = append(d.pending, t.pieceBytes(id, !d.started)...)
	d.started = true
	return d.drain(false)
}

// Flush returns what is left, with an unfinished character as U+FFFD.
func (d *Decoder) Flush() string { return d.drain(true) }

// drain emits the longest prefix of pending that cannot change with more bytes.
func (d *Decoder) drain(final bool) string {
	p := d.pending
	cut := len(p)
	if !final {
		// Hold back a trailing incomplete (but so far well-formed) UTF-8 sequence.
		for k := 1; k <= 3 && k <= len(p); k++ {
			c := p[len(p)-k]
			if c < 0x80 {
				break
			}
			if c >= 0xC0 { // a lead byte k bytes from the end
				if need := utf8SeqLen(c); need > k && maximalSubpart(p[len(p)-k:]) == k {
					cut = len(p) - k
				}
				break
			}
		}
	}
	out := lossyUTF8(p[:cut])
	d.pending = append(d.pending[:0], p[cut:]...)
	for ; d.strip > 0 && strings.HasPrefix(out, " "); d.strip-- {
		out = out[1:]
	}
	if out != "" {
		d.strip = 0
	}
	return out
}

func utf8SeqLen(c byte) int {
	switch {
	case c >= 0xF0:
		return 4
	case c >= 0xE0:
		return 3
	case c >= 0xC0:
		return 2
	}
	return 1
}

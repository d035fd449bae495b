package tokenizer

import "strings"

// Decode turns ids back into text, as Hugging Face tokenizers' decode does for byte-level
// tokenizers: the tokens' bytes are joined and invalid UTF-8 becomes U+FFFD. Special tokens
// are dropped when skipSpecialTokens is set; ids out of range are ignored.
func (t *Tokenizer) Decode(ids []int, skipSpecialTokens bool) string {
	var b []byte
	for _, id := range ids {
		if id < 0 || id >= len(t.tokBytes) || (skipSpecialTokens && t.special[id]) {
			continue
		}
		b = append(b, t.tokBytes[id]...)
	}
	return lossyUTF8(b)
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
}

// NewDecoder returns an incremental decoder.
func (t *Tokenizer) NewDecoder(skipSpecialTokens bool) *Decoder {
	return &Decoder{t: t, skipSpecial: skipSpecialTokens}
}

// Add consumes one id and returns the text it completes (possibly "").
func (d *Decoder) Add(id int) string {
	t := d.t
	if id < 0 || id >= len(t.tokBytes) || (d.skipSpecial && t.special[id]) {
		return ""
	}
	d.pending = append(d.pending, t.tokBytes[id]...)
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

package tokenizer

import "strings"

// rustLowercase is the Lowercase normalizer of the tokenizers library: each character through
// Rust's char::to_lowercase, Unicode's full lowercase mapping character by character. It
// differs from Go's strings.ToLower only for U+0130 (İ), whose mapping is "i̇" (i and a
// combining dot above); like the library, it has no final-sigma rule (Σ is always σ).
func rustLowercase(s string) string {
	if !strings.ContainsRune(s, '\u0130') {
		return strings.ToLower(s)
	}
	return strings.ToLower(strings.ReplaceAll(s, "\u0130", "i\u0307"))
}

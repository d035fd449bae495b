package tokenizer

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// A splitter cuts text into pre-tokens, calling emit with the byte range of each, in order,
// covering the whole text (the "Isolated" split behaviour).
type splitter func(text string, emit func(start, end int))

// The split patterns of the common byte-level tokenizers, recognised by their exact text and
// run by hand-written splitters that follow the regex's leftmost-first alternation.
const (
	patternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patternQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patternGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// PatternLlama3, PatternQwen2 and PatternGPT2 name the built-in split patterns (for Build).
const (
	PatternLlama3 = patternLlama3
	PatternQwen2  = patternQwen2
	PatternGPT2   = patternGPT2
)

func isLetter(r rune) bool { return unicode.IsLetter(r) }
func isNumber(r rune) bool { return unicode.IsNumber(r) }

// isSpace is the regex \s of the tokenizers library (Unicode White_Space).
func isSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

func at(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	c := s[i]
	if c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// contraction matches 's 't 're 've 'm 'll 'd at i (case-insensitively when fold).
func contraction(s string, i int, fold bool) int {
	if i >= len(s) || s[i] != '\'' {
		return 0
	}
	lower := func(c byte) byte {
		if fold && c >= 'A' && c <= 'Z' {
			return c + 32
		}
		return c
	}
	rest := s[i+1:]
	for _, suf := range []string{"s", "t", "re", "ve", "m", "ll", "d"} {
		if len(rest) < len(suf) {
			continue
		}
		ok := true
		for k := 0; k < len(suf); k++ {
			if lower(rest[k]) != suf[k] {
				ok = false
				break
			}
		}
		if ok {
			return 1 + len(suf)
		}
	}
	return 0
}

// spaceRun returns the end of the run of whitespace starting at i.
func spaceRun(s string, i int) int {
	for i < len(s) {
		r, n := at(s, i)
		if !isSpace(r) {
			break
		}
		i += n
	}
	return i
}

// whitespaceTail applies the last alternatives shared by all patterns at a whitespace rune:
// `\s+(?!\S)` then `\s+` (withNewline adds `\s*[\r\n]+` first, as Llama 3 and Qwen2 do).
func whitespaceTail(s string, i int, withNewline bool) int {
	end := spaceRun(s, i)
	if withNewline {
		// \s*[\r\n]+ : the longest match ends right after the last newline of the run.
		last := -1
		for k := i; k < end; {
			r, n := at(s, k)
			if r == '\r' || r == '\n' {
				last = k + n
			}
			k += n
		}
		if last > 0 {
			return last
		}
	}
	// \s+(?!\S): the whole run at the end of text; otherwise the run minus its last rune when
	// that leaves at least one; otherwise \s+ takes the run.
	if end == len(s) {
		return end
	}
	_, lastSize := utf8.DecodeLastRuneInString(s[i:end])
	if end-lastSize > i {
		return end - lastSize
	}
	return end
}

// splitLlamaQwen is the splitter of the Llama 3 (maxDigits 3) and Qwen2 (maxDigits 1) patterns.
func splitLlamaQwen(maxDigits int) splitter {
	return func(s string, emit func(int, int)) {
		for i := 0; i < len(s); {
			j := llamaQwenToken(s, i, maxDigits)
			emit(i, j)
			i = j
		}
	}
}

func llamaQwenToken(s string, i, maxDigits int) int {
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if n := contraction(s, i, true); n > 0 {
		return i + n
	}
	r, n := at(s, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	j := i
	if !isLetter(r) && !isNumber(r) && r != '\r' && r != '\n' {
		if r2, _ := at(s, i+n); isLetter(r2) {
			j = i + n
		}
	}
	if r2, _ := at(s, j); isLetter(r2) {
		for j < len(s) {
			r3, n3 := at(s, j)
			if !isLetter(r3) {
				break
			}
			j += n3
		}
		return j
	}
	// \p{N}{1,maxDigits}
	if isNumber(r) {
		j = i
		for k := 0; k < maxDigits && j < len(s); k++ {
			r3, n3 := at(s, j)
			if !isNumber(r3) {
				break
			}
			j += n3
		}
		return j
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	j = i
	if r == ' ' {
		j = i + 1
	}
	if r2, _ := at(s, j); r2 >= 0 && !isSpace(r2) && !isLetter(r2) && !isNumber(r2) {
		for j < len(s) {
			r3, n3 := at(s, j)
			if r3 < 0 || isSpace(r3) || isLetter(r3) || isNumber(r3) {
				break
			}
			j += n3
		}
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	if isSpace(r) {
		return whitespaceTail(s, i, true)
	}
	// Unreachable for valid text: every rune is a letter, number, space or other. Take one
	// rune so that the split always advances.
	return i + max(n, 1)
}

// splitGPT2 is the splitter of the GPT-2 pattern.
func splitGPT2(s string, emit func(int, int)) {
	for i := 0; i < len(s); {
		j := gpt2Token(s, i)
		emit(i, j)
		i = j
	}
}

func gpt2Token(s string, i int) int {
	if n := contraction(s, i, false); n > 0 {
		return i + n
	}
	r, n := at(s, i)
	j := i
	if r == ' ' {
		j = i + 1
	}
	r2, _ := at(s, j)
	class := func(x rune) int {
		switch {
		case x < 0:
			return 0
		case isLetter(x):
			return 1
		case isNumber(x):
			return 2
		case isSpace(x):
			return 0
		}
		return 3
	}
	if c := class(r2); c != 0 {
		for j < len(s) {
			r3, n3 := at(s, j)
			if class(r3) != c {
				break
			}
			j += n3
		}
		return j
	}
	if isSpace(r) {
		return whitespaceTail(s, i, false)
	}
	return i + max(n, 1)
}

// splitterFor returns the splitter of a pattern ("Isolated": text between matches is a piece
// too): a hand-written one for the known patterns, the regex engine otherwise.
func splitterFor(pattern string) (splitter, error) {
	if sp, ok := handWritten(pattern); ok {
		return sp, nil
	}
	re, err := regexp2.Compile(pattern, regexp2.Unicode)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: split pattern %q: %w", pattern, err)
	}
	f := regexFinder(re)
	return func(s string, emit func(int, int)) {
		f(s, func(a, b int, _ bool) {
			if b > a {
				emit(a, b)
			}
		})
	}, nil
}

package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// A preTokenizer cuts a piece of text into pre-tokens, calling emit with each non-empty one in
// order. Stages of a Sequence run one after another on every piece the previous one emits, as
// Hugging Face tokenizers' PreTokenizedString.split does.
type preTokenizer func(s string, emit func(piece string))

// A finder covers a text with segments, in order, each flagged as a match of the pattern or
// not (the find_matches of tokenizers' Pattern): a regex's matches and the text between them,
// or each character a predicate accepts and the runs between.
type finder func(s string, emit func(start, end int, match bool))

// splitterFinder is the finder of a hand-written splitter: its patterns match every character,
// so every piece is a match.
func splitterFinder(sp splitter) finder {
	return func(s string, emit func(int, int, bool)) {
		sp(s, func(a, b int) { emit(a, b, true) })
	}
}

// regexFinder runs a split pattern with a backtracking regex engine (lookaheads included).
// Empty matches are reported too: they matter to the merging behaviours, as in tokenizers.
func regexFinder(re *regexp2.Regexp) finder {
	return func(s string, emit func(int, int, bool)) {
		if s == "" {
			return
		}
		runes := []rune(s)
		// regexp2 reports rune indexes; map them back to bytes.
		offs := make([]int, len(runes)+1)
		b := 0
		for k, r := range runes {
			offs[k] = b
			b += utf8.RuneLen(r)
		}
		offs[len(runes)] = b
		prev := 0
		m, _ := re.FindRunesMatch(runes)
		for m != nil {
			start, end := offs[m.Index], offs[m.Index+m.Length]
			if start != prev {
				emit(prev, start, false)
			}
			emit(start, end, true)
			prev = end
			m, _ = re.FindNextMatch(m)
		}
		if prev != len(s) {
			emit(prev, len(s), false)
		}
	}
}

// charFinder reports each character that pred accepts as its own match.
func charFinder(pred func(rune) bool) finder {
	return func(s string, emit func(int, int, bool)) {
		last := 0
		for i, r := range s {
			if pred(r) {
				n := utf8.RuneLen(r)
				if r == utf8.RuneError {
					_, n = utf8.DecodeRuneInString(s[i:])
				}
				if last < i {
					emit(last, i, false)
				}
				emit(i, i+n, true)
				last = i + n
			}
		}
		if last < len(s) {
			emit(last, len(s), false)
		}
	}
}

type segment struct {
	start, end int
	match      bool
}

// splitStage is tokenizers' NormalizedString.split with a SplitDelimiterBehavior: Removed
// drops the matches, Isolated keeps each segment, MergedWithPrevious and MergedWithNext glue
// a match to the text before or after it, Contiguous joins adjacent segments of one kind.
// invert swaps matches and non-matches first.
func splitStage(f finder, behavior string, invert bool) (preTokenizer, error) {
	switch behavior {
	case "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous":
	default:
		return nil, fmt.Errorf("tokenizer: split behavior %q is not supported", behavior)
	}
	if behavior == "Isolated" {
		return func(s string, emit func(string)) {
			f(s, func(a, b int, _ bool) {
				if b > a {
					emit(s[a:b])
				}
			})
		}, nil
	}
	return func(s string, emit func(string)) {
		var segs []segment
		f(s, func(a, b int, m bool) { segs = append(segs, segment{a, b, m != invert}) })
		var out []segment // match here means "remove"
		switch behavior {
		case "Removed":
			out = segs
		case "Contiguous":
			prev := false
			for _, g := range segs {
				if g.match == prev && len(out) > 0 {
					out[len(out)-1].end = g.end
				} else {
					out = append(out, segment{g.start, g.end, false})
				}
				prev = g.match
			}
		case "MergedWithPrevious":
			prev := false
			for _, g := range segs {
				if g.match && !prev && len(out) > 0 {
					out[len(out)-1].end = g.end
				} else {
					out = append(out, segment{g.start, g.end, false})
				}
				prev = g.match
			}
		case "MergedWithNext":
			prev := false
			for i := len(segs) - 1; i >= 0; i-- {
				g := segs[i]
				if g.match && !prev && len(out) > 0 {
					out[len(out)-1].start = g.start
				} else {
					out = append(out, segment{g.start, g.end, false})
				}
				prev = g.match
			}
			for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
				out[i], out[j] = out[j], out[i]
			}
		}
		for _, g := range out {
			if !g.match && g.end > g.start {
				emit(s[g.start:g.end])
			}
		}
	}, nil
}

// byteLevelStage is the ByteLevel pre-tokenizer on raw text (the mapping of bytes to the
// byte-level alphabet happens in BPE): a space before each piece that does not start with
// one (add_prefix_space), then the GPT-2 split pattern (use_regex).
func byteLevelStage(addPrefixSpace, useRegex bool) preTokenizer {
	if !addPrefixSpace && !useRegex {
		return nil // the identity
	}
	return func(s string, emit func(string)) {
		if addPrefixSpace && !strings.HasPrefix(s, " ") {
			s = " " + s
		}
		if !useRegex {
			emit(s)
			return
		}
		splitGPT2(s, func(a, b int) { emit(s[a:b]) })
	}
}

// chain runs the stages in order (nil stages are the identity).
func chain(stages []preTokenizer) preTokenizer {
	var live []preTokenizer
	for _, s := range stages {
		if s != nil {
			live = append(live, s)
		}
	}
	switch len(live) {
	case 0:
		return func(s string, emit func(string)) {
			if s != "" {
				emit(s)
			}
		}
	case 1:
		return live[0]
	}
	first, rest := live[0], chain(live[1:])
	return func(s string, emit func(string)) {
		first(s, func(p string) { rest(p, emit) })
	}
}

// preTokenizerJSON is one pre-tokenizer of tokenizer.json.
type preTokenizerJSON struct {
	Type          string            `json:"type"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Pattern       *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior         string `json:"behavior"`
	Invert           bool   `json:"invert"`
	AddPrefixSpace   *bool  `json:"add_prefix_space"`
	UseRegex         *bool  `json:"use_regex"`
	IndividualDigits bool   `json:"individual_digits"`
	TrimOffsets      *bool  `json:"trim_offsets"`
	// Metaspace.
	Replacement   string  `json:"replacement"`
	PrependScheme *string `json:"prepend_scheme"`
	Split         *bool   `json:"split"`
}

// buildPreTokenizer builds the pre-tokenizer of tokenizer.json: Sequence, Split (a regex or
// string pattern, any behavior, invert), Digits (individual_digits or runs), ByteLevel
// (add_prefix_space, use_regex; trim_offsets changes offsets only) and Metaspace (replacement,
// prepend_scheme, split). ByteLevel must come last, since it maps the text to the byte-level
// alphabet that any later stage would see; Metaspace must come first. Without ByteLevel the
// model is character-level BPE (SentencePiece style, charLevel); then the pre-tokenizer may
// also be null (the whole text is one word). Anything else is refused with its name.
func (t *Tokenizer) buildPreTokenizer(raw json.RawMessage) error {
	var flat []preTokenizerJSON
	if !isNull(raw) {
		if err := flattenPreTokenizers(raw, &flat, 0); err != nil {
			return err
		}
	}
	var stages []preTokenizer
	byteLevel := false
	for i, p := range flat {
		if p.Type == "Metaspace" {
			if i > 0 {
				return fmt.Errorf("tokenizer: pre-tokenizer Metaspace after %q is not supported (Metaspace must come first)", flat[0].Type)
			}
			m, err := newMetaspace(p)
			if err != nil {
				return err
			}
			t.metaspace = m
			continue
		}
		if byteLevel {
			return fmt.Errorf("tokenizer: pre-tokenizer %q after ByteLevel is not supported (it would see the byte-level alphabet)", p.Type)
		}
		switch p.Type {
		case "Split":
			if p.Pattern == nil {
				return fmt.Errorf("tokenizer: Split pre-tokenizer without a pattern")
			}
			var f finder
			switch {
			case p.Pattern.Regex != nil:
				if sp, ok := handWritten(*p.Pattern.Regex); ok {
					f = splitterFinder(sp)
					break
				}
				re, err := regexp2.Compile(*p.Pattern.Regex, regexp2.Unicode)
				if err != nil {
					return fmt.Errorf("tokenizer: split pattern %q: %w", *p.Pattern.Regex, err)
				}
				f = regexFinder(re)
			case p.Pattern.String != nil && *p.Pattern.String != "":
				f = regexFinder(regexp2.MustCompile(regexp2.Escape(*p.Pattern.String), regexp2.None))
			default:
				return fmt.Errorf("tokenizer: Split pre-tokenizer with an empty pattern is not supported")
			}
			st, err := splitStage(f, p.Behavior, p.Invert)
			if err != nil {
				return err
			}
			stages = append(stages, st)
		case "Digits":
			behavior := "Contiguous"
			if p.IndividualDigits {
				behavior = "Isolated"
			}
			st, _ := splitStage(charFinder(unicode.IsNumber), behavior, false)
			stages = append(stages, st)
		case "ByteLevel":
			if t.metaspace != nil {
				return fmt.Errorf("tokenizer: pre-tokenizers Metaspace and ByteLevel together are not supported")
			}
			byteLevel = true
			stages = append(stages, byteLevelStage(p.AddPrefixSpace != nil && *p.AddPrefixSpace, p.UseRegex == nil || *p.UseRegex))
		default:
			return fmt.Errorf("tokenizer: pre-tokenizer %q is not supported (Sequence, Split, Digits, ByteLevel, Metaspace)", p.Type)
		}
	}
	t.charLevel = !byteLevel
	t.pre = chain(stages)
	return nil
}

func flattenPreTokenizers(raw json.RawMessage, out *[]preTokenizerJSON, depth int) error {
	if depth > 8 {
		return fmt.Errorf("tokenizer: pre_tokenizer nested too deep")
	}
	var p preTokenizerJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("tokenizer: pre_tokenizer: %w", err)
	}
	if p.Type != "Sequence" {
		*out = append(*out, p)
		return nil
	}
	for _, sub := range p.Pretokenizers {
		if err := flattenPreTokenizers(sub, out, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// handWritten returns the hand-written splitter of a known pattern.
func handWritten(pattern string) (splitter, bool) {
	switch pattern {
	case patternLlama3:
		return splitLlamaQwen(3), true
	case patternQwen2:
		return splitLlamaQwen(1), true
	case patternGPT2:
		return splitGPT2, true
	}
	return nil, false
}

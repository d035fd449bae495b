package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// addedMatcher finds added tokens in text (leftmost-longest, as Hugging Face's added
// vocabulary does), honouring single_word, lstrip and rstrip.
type addedMatcher struct {
	root   *trieNode
	tokens map[int32]addedTokenJSON
}

type trieNode struct {
	next map[byte]*trieNode
	id   int32 // -1 when no token ends here
}

func newAddedMatcher(list []addedTokenJSON) *addedMatcher {
	m := &addedMatcher{root: &trieNode{next: map[byte]*trieNode{}, id: -1}, tokens: map[int32]addedTokenJSON{}}
	for _, a := range list {
		n := m.root
		for i := 0; i < len(a.Content); i++ {
			c := a.Content[i]
			nx, ok := n.next[c]
			if !ok {
				nx = &trieNode{next: map[byte]*trieNode{}, id: -1}
				n.next[c] = nx
			}
			n = nx
		}
		n.id = a.ID
		m.tokens[a.ID] = a
	}
	return m
}

// longestAt returns the id and end of the longest added token starting at i (id -1: none).
func (m *addedMatcher) longestAt(s string, i int) (int32, int) {
	n := m.root
	best, end := int32(-1), i
	for j := i; j < len(s); j++ {
		nx, ok := n.next[s[j]]
		if !ok {
			break
		}
		n = nx
		if n.id >= 0 {
			best, end = n.id, j+1
		}
	}
	return best, end
}

func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// split calls emit for each piece of text in order: plain text with id -1, added tokens with
// their id.
func (m *addedMatcher) split(s string, emit func(piece string, id int32)) {
	if len(m.tokens) == 0 {
		if s != "" {
			emit(s, -1)
		}
		return
	}
	last := 0
	for i := 0; i < len(s); {
		if _, ok := m.root.next[s[i]]; !ok {
			i++
			continue
		}
		id, end := m.longestAt(s, i)
		if id < 0 {
			i++
			continue
		}
		tok := m.tokens[id]
		if tok.SingleWord {
			before, _ := utf8.DecodeLastRuneInString(s[:i])
			after, _ := utf8.DecodeRuneInString(s[end:])
			if (i > 0 && isWordRune(before)) || (end < len(s) && isWordRune(after)) {
				i++
				continue
			}
		}
		start := i
		if tok.LStrip {
			for start > last {
				r, n := utf8.DecodeLastRuneInString(s[last:start])
				if !unicode.IsSpace(r) {
					break
				}
				start -= n
			}
		}
		stop := end
		if tok.RStrip {
			for stop < len(s) {
				r, n := utf8.DecodeRuneInString(s[stop:])
				if !unicode.IsSpace(r) {
					break
				}
				stop += n
			}
		}
		if start > last {
			emit(s[last:start], -1)
		}
		emit(s[i:end], id)
		last, i = stop, stop
	}
	if last < len(s) {
		emit(s[last:], -1)
	}
}

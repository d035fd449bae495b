package chattemplate

import "strings"

// Conditional expressions inside brackets. Jinja2 allows Python's `A if B else C` anywhere an
// expression goes; gonja (v2.9.1, pinned) parses it only as a whole `{{ ... }}` output or `set`
// value, and fails on one in parentheses, as Gemma 3's template writes
// `'<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "")`.
//
// rewriteConditionals is a source pre-pass run before parsing: inside every tag ({{ }} and
// {% %}), each comma-separated item of a parenthesised or bracketed group that reads
// `A if B else C` becomes `((B) and [A] or [C])[0]`. gonja's `and` and `or` follow Python
// (they return an operand and short-circuit) and a one-item list is true, so this yields A
// when B is true and C otherwise, evaluating only the branch taken, as Python does. C may
// itself be a conditional (`a if b else c if d else e`); a keyword argument (`name=A if B else
// C`) keeps its name; dictionary items and slices are left as they are.

// ctok is a token of a tag's expression text.
type ctok struct {
	s    string
	kind byte // 'w' word, 's' string, '(' '[' '{' open, ')' close, ',' comma, ':' colon, '=' assign, ' ' other
}

// rewriteConditionals rewrites the bracketed conditional expressions of src (see above).
func rewriteConditionals(src string) string {
	if !strings.Contains(src, " if ") {
		return src
	}
	var b strings.Builder
	for i := 0; i < len(src); {
		j := strings.Index(src[i:], "{")
		if j < 0 {
			b.WriteString(src[i:])
			break
		}
		j += i
		b.WriteString(src[i:j])
		if j+1 >= len(src) {
			b.WriteString(src[j:])
			break
		}
		var end string
		switch src[j+1] {
		case '{':
			end = "}}"
		case '%':
			end = "%}"
		case '#':
			k := strings.Index(src[j:], "#}")
			if k < 0 {
				b.WriteString(src[j:])
				return b.String()
			}
			b.WriteString(src[j : j+k+2])
			i = j + k + 2
			continue
		default:
			b.WriteByte('{')
			i = j + 1
			continue
		}
		toks, n := tagTokens(src[j+2:], end)
		if n < 0 { // unterminated: leave it to the parser's error
			b.WriteString(src[j:])
			break
		}
		b.WriteString(src[j : j+2])
		b.WriteString(rewriteItems(toks, false))
		b.WriteString(end)
		i = j + 2 + n + len(end)
	}
	return b.String()
}

// tagTokens splits s up to the tag's end marker (outside strings) into tokens; n is the
// length of the tag's text before the marker, or -1 when there is none.
func tagTokens(s, end string) (toks []ctok, n int) {
	i, depth := 0, 0
	for i < len(s) {
		if depth == 0 && strings.HasPrefix(s[i:], end) {
			return toks, i
		}
		c := s[i]
		switch c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth = max(0, depth-1)
		}
		switch {
		case c == '\'' || c == '"':
			k := i + 1
			for k < len(s) && s[k] != c {
				if s[k] == '\\' {
					k++
				}
				k++
			}
			if k >= len(s) {
				return nil, -1
			}
			toks = append(toks, ctok{s[i : k+1], 's'})
			i = k + 1
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
			k := i
			for k < len(s) && (s[k] == '_' || s[k] >= 'a' && s[k] <= 'z' || s[k] >= 'A' && s[k] <= 'Z' || s[k] >= '0' && s[k] <= '9') {
				k++
			}
			toks = append(toks, ctok{s[i:k], 'w'})
			i = k
		case c == '(' || c == '[' || c == '{':
			toks = append(toks, ctok{s[i : i+1], c})
			i++
		case c == ')' || c == ']' || c == '}':
			toks = append(toks, ctok{s[i : i+1], ')'})
			i++
		case c == ',' || c == ':':
			toks = append(toks, ctok{s[i : i+1], c})
			i++
		case c == '=' || c == '!' || c == '<' || c == '>':
			if i+1 < len(s) && s[i+1] == '=' {
				toks = append(toks, ctok{s[i : i+2], ' '})
				i += 2
			} else if c == '=' {
				toks = append(toks, ctok{"=", '='})
				i++
			} else {
				toks = append(toks, ctok{s[i : i+1], ' '})
				i++
			}
		default:
			toks = append(toks, ctok{s[i : i+1], ' '})
			i++
		}
	}
	return nil, -1
}

// rewriteItems renders toks (one level: nested groups are rewritten recursively); inGroup
// says they are a bracketed group's contents, whose comma-separated items are rewritten.
func rewriteItems(toks []ctok, inGroup bool) string {
	// Collapse each nested group into one item.
	var items []ctok
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind != '(' && t.kind != '[' && t.kind != '{' {
			items = append(items, t)
			continue
		}
		depth, k := 1, i+1
		for ; k < len(toks) && depth > 0; k++ {
			switch toks[k].kind {
			case '(', '[', '{':
				depth++
			case ')':
				depth--
			}
		}
		if depth > 0 { // unbalanced: leave the rest to the parser's error
			items = append(items, toks[i:]...)
			break
		}
		inner := rewriteItems(toks[i+1:k-1], t.kind != '{')
		items = append(items, ctok{t.s + inner + toks[k-1].s, 'g'})
		i = k - 1
	}
	if !inGroup {
		return join(items)
	}
	var b strings.Builder
	start := 0
	for i := 0; i <= len(items); i++ {
		if i < len(items) && items[i].kind != ',' {
			continue
		}
		b.WriteString(conditional(items[start:i]))
		if i < len(items) {
			b.WriteString(items[i].s)
		}
		start = i + 1
	}
	return b.String()
}

// conditional rewrites one item `A if B else C` (see rewriteConditionals); any other item is
// returned as it is.
func conditional(items []ctok) string {
	ifAt, elseAt := -1, -1
	for i, t := range items {
		switch {
		case t.kind == ':':
			return join(items) // a dictionary item or a slice
		case t.kind == 'w' && t.s == "if" && ifAt < 0:
			ifAt = i
		case t.kind == 'w' && t.s == "else" && ifAt >= 0 && elseAt < 0:
			elseAt = i
		}
	}
	if ifAt < 0 || elseAt < 0 {
		return join(items)
	}
	prefix, a := "", items[:ifAt]
	// A keyword argument: name = A if B else C.
	for i, t := range a {
		if t.kind == '=' {
			if onlyWord(a[:i]) {
				prefix, a = join(a[:i+1]), a[i+1:]
			}
			break
		}
	}
	return prefix + "((" + strings.TrimSpace(join(items[ifAt+1:elseAt])) + ") and [" + strings.TrimSpace(join(a)) +
		"] or [" + strings.TrimSpace(conditional(items[elseAt+1:])) + "])[0]"
}

// onlyWord reports whether items are one word, with spaces around it.
func onlyWord(items []ctok) bool {
	words := 0
	for _, t := range items {
		switch {
		case t.kind == 'w':
			words++
		case strings.TrimSpace(t.s) != "":
			return false
		}
	}
	return words == 1
}

func join(items []ctok) string {
	var b strings.Builder
	for _, t := range items {
		b.WriteString(t.s)
	}
	return b.String()
}

package structured

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// GrammarRules compiles a grammar into a rule set: GBNF as llama.cpp writes it
// (`name ::= ...`, start rule `root`) or a Lark subset (`name: ...`, start rule `start`).
// Both allow sequences, `|` alternatives, parentheses, `?`, `*`, `+`, `{m}`, `{m,}`, `{m,n}`
// (GBNF), string literals with escapes, character classes `[...]` (GBNF) and `/regex/`
// terminals (Lark), `.` (GBNF: any character) and comments (`#` in GBNF, `//` in Lark).
// Non-recursive rules are inlined; recursive ones become rules of a pushdown automaton (a
// grammar without recursion is one regular expression and runs on a DFA).
func GrammarRules(src string) (RuleSet, error) {
	lark := !strings.Contains(src, "::=")
	rules, order, err := parseGrammar(src, lark)
	if err != nil {
		return RuleSet{}, err
	}
	start := "root"
	if lark {
		start = "start"
	}
	if _, ok := rules[start]; !ok {
		if len(order) == 0 {
			return RuleSet{}, fmt.Errorf("the grammar has no rules")
		}
		return RuleSet{}, fmt.Errorf("the grammar has no %q rule to start from", start)
	}
	g := &grammar{rules: rules, done: map[string]string{}, active: map[string]bool{}, call: map[string]int{}, lark: lark}
	g.set.Rules, g.set.Names = []string{""}, []string{start}
	re, err := g.expand(start)
	if err != nil {
		return RuleSet{}, err
	}
	g.set.Rules[0] = re
	for i, r := range g.set.Rules {
		if !utf8.ValidString(r) {
			return RuleSet{}, fmt.Errorf("the grammar holds bytes that are not valid UTF-8")
		}
		if _, err := CompileRegex(r); err != nil {
			return RuleSet{}, fmt.Errorf("rule %q is not valid: %w", g.set.Names[i], err)
		}
	}
	if len(g.set.Rules) > 1 {
		if _, err := CompileRules(g.set); err != nil {
			return RuleSet{}, err
		}
	}
	return g.set, nil
}

type grammar struct {
	rules  map[string]string // rule → body (source)
	done   map[string]string // rule → regex (inlined form, or a call of a recursive rule)
	active map[string]bool   // rules being expanded
	call   map[string]int    // recursive rule → its index in set
	set    RuleSet
	lark   bool
}

// expand returns the regex of a reference to rule name: its body inlined, or a call when the
// rule is recursive (it refers to itself while being expanded).
func (g *grammar) expand(name string) (string, error) {
	if re, ok := g.done[name]; ok {
		return re, nil
	}
	body, ok := g.rules[name]
	if !ok {
		return "", fmt.Errorf("rule %q is used but not defined", name)
	}
	if g.active[name] || g.call[name] > 0 {
		return g.callOf(name)
	}
	g.active[name] = true
	p := &exprParser{s: body, g: g}
	re, err := p.alternatives()
	if err == nil {
		p.skipSpace()
		if p.i < len(p.s) {
			err = fmt.Errorf("rule %q: unexpected %q", name, p.s[p.i:])
		}
	}
	g.active[name] = false
	if err != nil {
		return "", err
	}
	if k, rec := g.call[name]; rec {
		g.set.Rules[k] = re
		re = callRef(k)
	}
	g.done[name] = re
	return re, nil
}

func (g *grammar) callOf(name string) (string, error) {
	k, ok := g.call[name]
	if !ok {
		if len(g.set.Rules) >= maxRules {
			return "", fmt.Errorf("the grammar has more than %d recursive rules", maxRules-1)
		}
		k = len(g.set.Rules)
		g.call[name] = k
		g.set.Rules = append(g.set.Rules, "")
		g.set.Names = append(g.set.Names, name)
	}
	return callRef(k), nil
}

// parseGrammar splits the source into rules (a rule's body may continue on following lines).
func parseGrammar(src string, lark bool) (map[string]string, []string, error) {
	rules := map[string]string{}
	var order []string
	cur := ""
	sep := "::="
	if lark {
		sep = ":"
	}
	defRe := regexp.MustCompile(`^\s*\??([A-Za-z_][A-Za-z0-9_-]*)\s*` + regexp.QuoteMeta(sep))
	for n, line := range strings.Split(src, "\n") {
		line = stripComment(line, lark)
		if strings.TrimSpace(line) == "" {
			continue
		}
		if m := defRe.FindStringSubmatchIndex(line); m != nil && !(lark && strings.HasPrefix(strings.TrimSpace(line), "%")) {
			name := line[m[2]:m[3]]
			if _, dup := rules[name]; dup {
				return nil, nil, fmt.Errorf("line %d: rule %q is defined twice", n+1, name)
			}
			rules[name] = line[m[1]:]
			order = append(order, name)
			cur = name
			continue
		}
		if lark && strings.HasPrefix(strings.TrimSpace(line), "%") {
			return nil, nil, fmt.Errorf("line %d: Lark directives (%s) are not supported", n+1, strings.Fields(line)[0])
		}
		if cur == "" {
			return nil, nil, fmt.Errorf("line %d: expected a rule definition (name %s ...)", n+1, sep)
		}
		rules[cur] += " " + line
	}
	return rules, order, nil
}

// stripComment removes a comment outside string literals and classes.
func stripComment(line string, lark bool) string {
	inStr, inClass, inRe := false, false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case (inStr || inClass || inRe) && c == '\\':
			i++
		case inStr:
			inStr = c != '"'
		case inClass:
			inClass = c != ']'
		case inRe:
			inRe = c != '/'
		case c == '"':
			inStr = true
		case c == '[' && !lark:
			inClass = true
		case c == '/' && lark && !(i+1 < len(line) && line[i+1] == '/'):
			inRe = true
		case c == '#' && !lark:
			return line[:i]
		case c == '/' && lark && i+1 < len(line) && line[i+1] == '/':
			return line[:i]
		}
	}
	return line
}

type exprParser struct {
	s string
	i int
	g *grammar
}

func (p *exprParser) skipSpace() {
	for p.i < len(p.s) && strings.ContainsRune(" \t\r\n", rune(p.s[p.i])) {
		p.i++
	}
}

func (p *exprParser) alternatives() (string, error) {
	var alts []string
	for {
		seq, err := p.sequence()
		if err != nil {
			return "", err
		}
		alts = append(alts, seq)
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == '|' {
			p.i++
			continue
		}
		break
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return "(?:" + strings.Join(alts, "|") + ")", nil
}

func (p *exprParser) sequence() (string, error) {
	var b strings.Builder
	for {
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] == '|' || p.s[p.i] == ')' {
			return b.String(), nil
		}
		atom, err := p.atom()
		if err != nil {
			return "", err
		}
		atom, err = p.repeat(atom)
		if err != nil {
			return "", err
		}
		b.WriteString(atom)
	}
}

func (p *exprParser) repeat(atom string) (string, error) {
	for p.i < len(p.s) {
		switch c := p.s[p.i]; c {
		case '*', '+', '?':
			p.i++
			atom = "(?:" + atom + ")" + string(c)
		case '{':
			end := strings.IndexByte(p.s[p.i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unclosed repetition %q", p.s[p.i:])
			}
			spec := strings.ReplaceAll(p.s[p.i+1:p.i+end], " ", "")
			lo, hi, hasComma := strings.Cut(spec, ",")
			if _, err := strconv.Atoi(lo); err != nil {
				return "", fmt.Errorf("bad repetition {%s}", spec)
			}
			if hasComma && hi != "" {
				if _, err := strconv.Atoi(hi); err != nil {
					return "", fmt.Errorf("bad repetition {%s}", spec)
				}
			}
			p.i += end + 1
			atom = "(?:" + atom + "){" + spec + "}"
		default:
			return atom, nil
		}
	}
	return atom, nil
}

func (p *exprParser) atom() (string, error) {
	c := p.s[p.i]
	switch {
	case c == '(':
		p.i++
		re, err := p.alternatives()
		if err != nil {
			return "", err
		}
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			return "", fmt.Errorf("unclosed parenthesis")
		}
		p.i++
		return "(?:" + re + ")", nil
	case c == '"' || (c == '\'' && p.g.lark):
		lit, err := p.literal(c)
		if err != nil {
			return "", err
		}
		return regexp.QuoteMeta(lit), nil
	case c == '[' && !p.g.lark:
		end := p.i + 1
		for end < len(p.s) && p.s[end] != ']' {
			if p.s[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(p.s) {
			return "", fmt.Errorf("unclosed character class")
		}
		class := p.s[p.i : end+1]
		p.i = end + 1
		if _, err := regexp.Compile(class); err != nil {
			return "", fmt.Errorf("bad character class %s: %w", class, err)
		}
		return class, nil
	case c == '/' && p.g.lark:
		end := p.i + 1
		for end < len(p.s) && p.s[end] != '/' {
			if p.s[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(p.s) {
			return "", fmt.Errorf("unclosed /regex/")
		}
		re := p.s[p.i+1 : end]
		p.i = end + 1
		if p.i < len(p.s) && strings.ContainsRune("imsux", rune(p.s[p.i])) {
			return "", fmt.Errorf("regex flags after /%s/ are not supported", re)
		}
		if _, err := regexp.Compile(re); err != nil {
			return "", fmt.Errorf("bad regex /%s/: %w", re, err)
		}
		return "(?:" + re + ")", nil
	case c == '.' && !p.g.lark:
		p.i++
		return `(?s:.)`, nil
	case c == '_' || c == '-' || (c|0x20 >= 'a' && c|0x20 <= 'z'):
		start := p.i
		for p.i < len(p.s) && (p.s[p.i] == '_' || p.s[p.i] == '-' || p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i]|0x20 >= 'a' && p.s[p.i]|0x20 <= 'z') {
			p.i++
		}
		re, err := p.g.expand(p.s[start:p.i])
		if err != nil {
			return "", err
		}
		return "(?:" + re + ")", nil
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.i:])
	return "", fmt.Errorf("unexpected %q in a grammar rule", r)
}

// literal reads a quoted string with GBNF/Lark escapes (\n \t \r \" \\ \xHH \uHHHH).
func (p *exprParser) literal(q byte) (string, error) {
	var b strings.Builder
	p.i++
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			return b.String(), nil
		case c == '\\' && p.i+1 < len(p.s):
			e := p.s[p.i+1]
			p.i += 2
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if p.i+n > len(p.s) {
					return "", fmt.Errorf("bad escape in a literal")
				}
				v, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
				if err != nil {
					return "", fmt.Errorf("bad escape \\%c%s", e, p.s[p.i:p.i+n])
				}
				b.WriteRune(rune(v))
				p.i += n
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return "", fmt.Errorf("unclosed string literal")
}

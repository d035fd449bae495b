// Package structured turns structured-output constraints (choice, regex, JSON schema,
// json_object) into token masks for sampling: a constraint compiles to a byte-level
// automaton, built lazily from Go's regexp/syntax program (UTF-8 aware: a state may sit in
// the middle of a multi-byte character), and an Index over a tokenizer's vocabulary walks a
// byte trie of all tokens against an automaton state to find the tokens that keep the output
// matchable. Masks are cached per state, so after warm-up a step costs a map lookup.
package structured

import (
	"errors"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// dead is the state from which nothing matches.
const dead = -1

// DFA is a lazily built deterministic automaton over bytes for one regular expression, with
// full-match semantics (the whole output must match). Safe for concurrent use.
type DFA struct {
	prog *syntax.Prog

	mu     sync.Mutex
	states []dstate
	index  map[string]int
}

type dstate struct {
	pcs     []uint32 // NFA threads after ε-closure (before consuming the next rune)
	pending string   // bytes of an incomplete UTF-8 character ("*" when abstract; see cont)
	cont    int      // > 0: abstract pending state: cont continuation bytes (any) complete a character that every thread in pcs accepts
	accept  bool
	calls   []int32 // rules this state may call (pushdown rule sets; see callRef)
	after   map[int32]int32
	next    [256]int32 // 0: not computed yet; -1: dead; else the next state + 1
}

// CompileRegex builds the automaton of a Go/RE2 regular expression (Perl classes, no
// backreferences). Word boundaries are not supported (an error says so).
func CompileRegex(expr string) (*DFA, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	if hasWordBoundary(re) {
		return nil, errors.New("word boundaries (\\b, \\B) are not supported in structured-output regexes")
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, err
	}
	d := &DFA{prog: prog, index: map[string]int{}}
	d.start()
	return d, nil
}

func hasWordBoundary(re *syntax.Regexp) bool {
	if re.Op == syntax.OpWordBoundary || re.Op == syntax.OpNoWordBoundary {
		return true
	}
	for _, s := range re.Sub {
		if hasWordBoundary(s) {
			return true
		}
	}
	return false
}

// closure adds pc and what it reaches without consuming input; begin is whether no input
// has been consumed yet.
func (d *DFA) closure(pcs []uint32, pc uint32, begin bool, seen map[uint32]bool) []uint32 {
	if seen[pc] {
		return pcs
	}
	seen[pc] = true
	in := &d.prog.Inst[pc]
	switch in.Op {
	case syntax.InstAlt, syntax.InstAltMatch:
		pcs = d.closure(pcs, in.Out, begin, seen)
		return d.closure(pcs, in.Arg, begin, seen)
	case syntax.InstCapture, syntax.InstNop:
		return d.closure(pcs, in.Out, begin, seen)
	case syntax.InstEmptyWidth:
		e := syntax.EmptyOp(in.Arg)
		if e&(syntax.EmptyBeginText|syntax.EmptyBeginLine) != 0 && !begin {
			return pcs
		}
		if e&(syntax.EmptyEndText|syntax.EmptyEndLine) != 0 {
			// Only satisfiable at the end: keep the thread; acceptance checks it.
			return append(pcs, pc)
		}
		return d.closure(pcs, in.Out, begin, seen)
	case syntax.InstFail:
		return pcs
	case syntax.InstRune:
		if len(in.Rune) == 0 { // an empty class: matches nothing
			return pcs
		}
	}
	return append(pcs, pc) // InstRune*, InstMatch
}

// acceptsAt reports whether the threads can match with no more input; begin is whether no
// input was consumed (so ^ still holds).
func (d *DFA) acceptsAt(pcs []uint32, begin bool) bool {
	var walk func(pc uint32, seen map[uint32]bool) bool
	walk = func(pc uint32, seen map[uint32]bool) bool {
		if seen[pc] {
			return false
		}
		seen[pc] = true
		in := &d.prog.Inst[pc]
		switch in.Op {
		case syntax.InstMatch:
			return true
		case syntax.InstEmptyWidth:
			e := syntax.EmptyOp(in.Arg)
			if e&(syntax.EmptyWordBoundary|syntax.EmptyNoWordBoundary) != 0 || !begin && e&(syntax.EmptyBeginText|syntax.EmptyBeginLine) != 0 {
				return false
			}
			return walk(in.Out, seen)
		case syntax.InstAlt, syntax.InstAltMatch:
			return walk(in.Out, seen) || walk(in.Arg, seen)
		case syntax.InstCapture, syntax.InstNop:
			return walk(in.Out, seen)
		}
		return false
	}
	for _, pc := range pcs {
		if walk(pc, map[uint32]bool{}) {
			return true
		}
	}
	return false
}

func (d *DFA) intern(pcs []uint32, pending string) int { return d.internAt(pcs, pending, false) }

// internAt interns a state; begin marks the start state (no input consumed: ^ holds there,
// so it is a state of its own even when a later state has the same threads).
func (d *DFA) internAt(pcs []uint32, pending string, begin bool) int {
	tag := pending
	if begin {
		tag += "|^"
	}
	pcs, key := stateKey(pcs, tag)
	if len(pcs) == 0 {
		return dead
	}
	if id, ok := d.index[key]; ok {
		return id
	}
	id := len(d.states)
	var calls []int32
	if pending == "" {
		for _, pc := range pcs {
			if k, ok := d.callAt(pc); ok && !slices.Contains(calls, k) {
				calls = append(calls, k)
			}
		}
	}
	d.states = append(d.states, dstate{pcs: pcs, pending: pending, accept: pending == "" && d.acceptsAt(pcs, begin), calls: calls})
	d.index[key] = id
	return id
}

// internAbstract is the state inside a character whose every completion (any n more
// continuation bytes) is accepted by all of pcs. States inside a character depend on the
// bytes read so far only through what can still complete it, so lead bytes whose ranges a
// class covers whole (a negated class, any character) share one state instead of one per
// byte sequence: thousands of states fewer per string state on a large vocabulary.
func (d *DFA) internAbstract(pcs []uint32, n int) int {
	pcs, key := stateKey(pcs, "*"+strconv.Itoa(n)) // pending bytes never start with '*'
	if len(pcs) == 0 {
		return dead
	}
	if id, ok := d.index[key]; ok {
		return id
	}
	id := len(d.states)
	d.states = append(d.states, dstate{pcs: pcs, pending: "*", cont: n})
	d.index[key] = id
	return id
}

// stateKey sorts and deduplicates pcs and returns them with the index key of the state of
// those threads and tag (the rest of the state: pending bytes, an abstract count, the start
// marker).
func stateKey(pcs []uint32, tag string) ([]uint32, string) {
	slices.Sort(pcs)
	pcs = slices.Compact(pcs)
	var b strings.Builder
	for _, pc := range pcs {
		b.WriteString(strconv.FormatUint(uint64(pc), 36))
		b.WriteByte(',')
	}
	b.WriteByte('|')
	b.WriteString(tag)
	return pcs, b.String()
}

func (d *DFA) start() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.states) > 0 {
		return 0
	}
	return d.internAt(d.closure(nil, uint32(d.prog.Start), true, map[uint32]bool{}), "", true)
}

// Start is the initial state.
func (d *DFA) Start() int { return 0 }

// Accepting reports whether the output may end in state s.
func (d *DFA) Accepting(s int) bool {
	if s < 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.states[s].accept
}

// Step is the state after byte b (dead when nothing can match).
func (d *DFA) Step(s int, b byte) int {
	if s < 0 {
		return dead
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.step(s, b)
}

func (d *DFA) step(s int, b byte) int {
	if n := d.states[s].next[b]; n != 0 {
		if n < 0 {
			return dead
		}
		return int(n) - 1
	}
	t := d.compute(s, b)
	if t == dead {
		d.states[s].next[b] = -1
	} else {
		d.states[s].next[b] = int32(t + 1)
	}
	return t
}

func (d *DFA) compute(s int, b byte) int {
	st := d.states[s]
	if st.cont > 0 { // abstract: any continuation byte
		if b < 0x80 || b > 0xBF {
			return dead
		}
		if st.cont > 1 {
			return d.internAbstract(append([]uint32(nil), st.pcs...), st.cont-1)
		}
		var next []uint32
		seen := map[uint32]bool{}
		for _, pc := range st.pcs {
			next = d.closure(next, d.prog.Inst[pc].Out, false, seen)
		}
		return d.intern(next, "")
	}
	buf := st.pending + string([]byte{b})
	if !utf8.FullRuneInString(buf) {
		// A valid prefix of a longer character?
		if len(buf) >= utf8.UTFMax || !validPrefix(buf) {
			return dead
		}
		// Live only if some character starting with these bytes can be consumed.
		lo, hi := prefixRange(buf)
		var live []uint32
		partial := false
		for _, pc := range st.pcs {
			in := &d.prog.Inst[pc]
			if d.matchesRange(in, lo, hi) {
				live = append(live, pc)
				partial = partial || !coversRange(in, lo, hi)
			}
		}
		if len(live) == 0 {
			return dead
		}
		// After the lead byte, every continuation byte is valid except after E0, ED, F0
		// and F4 (overlong and surrogate encodings, code points past U+10FFFF).
		restricted := len(buf) == 1 && (buf[0] == 0xE0 || buf[0] == 0xED || buf[0] == 0xF0 || buf[0] == 0xF4)
		if !partial && !restricted {
			return d.internAbstract(live, utf8Len(buf[0])-len(buf))
		}
		return d.intern(append([]uint32(nil), st.pcs...), buf)
	}
	r, size := utf8.DecodeRuneInString(buf)
	if r == utf8.RuneError && size <= 1 || size != len(buf) {
		return dead
	}
	var next []uint32
	seen := map[uint32]bool{}
	for _, pc := range st.pcs {
		in := &d.prog.Inst[pc]
		switch in.Op {
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			if in.MatchRune(r) {
				next = d.closure(next, in.Out, false, seen)
			}
		}
	}
	return d.intern(next, "")
}

// prefixRange is the smallest and largest character whose UTF-8 encoding starts with the
// valid prefix p.
func prefixRange(p string) (rune, rune) {
	n := utf8Len(p[0])
	lo, hi := []byte(p), []byte(p)
	for len(lo) < n {
		l, h := byte(0x80), byte(0xBF)
		if len(lo) == 1 {
			switch p[0] {
			case 0xE0:
				l = 0xA0
			case 0xED:
				h = 0x9F
			case 0xF0:
				l = 0x90
			case 0xF4:
				h = 0x8F
			}
		}
		lo, hi = append(lo, l), append(hi, h)
	}
	a, _ := utf8.DecodeRune(lo)
	b, _ := utf8.DecodeRune(hi)
	return a, b
}

// matchesRange reports whether a rune instruction accepts some character in [lo, hi].
func (d *DFA) matchesRange(in *syntax.Inst, lo, hi rune) bool {
	switch in.Op {
	case syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
		return true
	case syntax.InstRune1:
		return in.Rune[0] >= lo && in.Rune[0] <= hi
	case syntax.InstRune:
		if syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
			// The ranges' characters and their case folds.
			total := 0
			for i := 0; i+1 < len(in.Rune); i += 2 {
				total += int(in.Rune[i+1]-in.Rune[i]) + 1
			}
			if len(in.Rune) == 1 {
				total = 1
			}
			if total > 4096 {
				return true // conservative
			}
			each := func(fn func(r rune) bool) bool {
				if len(in.Rune) == 1 {
					return fn(in.Rune[0])
				}
				for i := 0; i+1 < len(in.Rune); i += 2 {
					for r := in.Rune[i]; r <= in.Rune[i+1]; r++ {
						if fn(r) {
							return true
						}
					}
				}
				return false
			}
			return each(func(r rune) bool {
				for f := r; ; {
					if f >= lo && f <= hi {
						return true
					}
					if f = unicode.SimpleFold(f); f == r {
						return false
					}
				}
			})
		}
		if len(in.Rune) == 1 {
			return in.Rune[0] >= lo && in.Rune[0] <= hi
		}
		for i := 0; i+1 < len(in.Rune); i += 2 {
			if in.Rune[i] <= hi && in.Rune[i+1] >= lo {
				return true
			}
		}
	}
	return false
}

// coversRange reports whether a rune instruction accepts every character in [lo, hi]
// (conservatively false for case folding).
func coversRange(in *syntax.Inst, lo, hi rune) bool {
	switch in.Op {
	case syntax.InstRuneAny:
		return true
	case syntax.InstRuneAnyNotNL:
		return lo > '\n' || hi < '\n'
	case syntax.InstRune:
		if syntax.Flags(in.Arg)&syntax.FoldCase != 0 || len(in.Rune) == 1 {
			return len(in.Rune) == 1 && lo == hi && in.Rune[0] == lo
		}
		cur := lo
		for i := 0; i+1 < len(in.Rune); i += 2 {
			if in.Rune[i] <= cur && in.Rune[i+1] >= cur {
				if cur = in.Rune[i+1] + 1; cur > hi {
					return true
				}
			}
		}
	case syntax.InstRune1:
		return lo == hi && in.Rune[0] == lo
	}
	return false
}

// utf8Len is the length of the UTF-8 encoding that lead byte b (0xC2..0xF4) begins.
func utf8Len(b byte) int {
	switch {
	case b >= 0xF0:
		return 4
	case b >= 0xE0:
		return 3
	}
	return 2
}

// validPrefix reports whether s (1 to 3 bytes) can begin a valid UTF-8 encoding of a longer
// character.
func validPrefix(s string) bool {
	b0 := s[0]
	var n int
	switch {
	case b0 >= 0xC2 && b0 <= 0xDF:
		n = 2
	case b0 >= 0xE0 && b0 <= 0xEF:
		n = 3
	case b0 >= 0xF0 && b0 <= 0xF4:
		n = 4
	default:
		return false
	}
	if len(s) >= n {
		return false
	}
	for i := 1; i < len(s); i++ {
		lo, hi := byte(0x80), byte(0xBF)
		if i == 1 {
			switch b0 {
			case 0xE0:
				lo = 0xA0
			case 0xED:
				hi = 0x9F
			case 0xF0:
				lo = 0x90
			case 0xF4:
				hi = 0x8F
			}
		}
		if s[i] < lo || s[i] > hi {
			return false
		}
	}
	return true
}

// callAt reports whether the instruction at pc is a call of a rule (a rule reference in a
// pushdown rule set: a literal surrogate code point, never produced by UTF-8 input).
func (d *DFA) callAt(pc uint32) (int32, bool) {
	in := &d.prog.Inst[pc]
	if in.Op == syntax.InstRune1 || in.Op == syntax.InstRune && len(in.Rune) == 1 && syntax.Flags(in.Arg)&syntax.FoldCase == 0 {
		if r := in.Rune[0]; r >= callBase && r < callBase+maxRules {
			return int32(r - callBase), true
		}
	}
	return 0, false
}

// Calls lists the rules state s may call.
func (d *DFA) Calls(s int) []int32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.states[s].calls
}

// CallStep is the state after a call of rule k from state s returns.
func (d *DFA) CallStep(s int, k int32) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.states[s].after[k]; ok {
		return int(t)
	}
	var next []uint32
	seen := map[uint32]bool{}
	for _, pc := range d.states[s].pcs {
		if j, ok := d.callAt(pc); ok && j == k {
			next = d.closure(next, d.prog.Inst[pc].Out, false, seen)
		}
	}
	t := d.intern(next, "")
	if d.states[s].after == nil {
		d.states[s].after = map[int32]int32{}
	}
	d.states[s].after[k] = int32(t)
	return t
}

// States is how many states have been built.
func (d *DFA) States() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.states)
}

// MatchString reports whether the whole of s matches (for tests).
func (d *DFA) MatchString(s string) bool {
	st := 0
	for i := 0; i < len(s); i++ {
		if st = d.Step(st, s[i]); st == dead {
			return false
		}
	}
	return d.Accepting(st)
}

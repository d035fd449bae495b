package structured

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Rule sets: a context-free constraint (a recursive grammar or JSON schema) is a list of
// rules, each a regular expression in which a rule reference is written callRef(k). Rule 0
// is the start rule. Non-recursive references are inlined by the compilers, so a rule set
// with one rule is a plain regular expression and runs on a DFA alone.

// callBase is the first code point used for rule references: surrogates, which no valid
// UTF-8 input decodes to, so a reference is never matched by text.
const callBase = 0xD800

// maxRules bounds a rule set (the surrogate range).
const maxRules = 0x800

// callRef is the regex of a call of rule k. The capture group keeps regexp/syntax from
// merging references with neighbouring literals or classes.
func callRef(k int) string { return `(\x{` + strconv.FormatInt(int64(callBase+k), 16) + `})` }

// RuleSet is the source of a constraint: Rules[0] is the start rule; callRef(k) inside a rule
// calls rule k; Names are the rules' names for errors. A rule may instead be built in
// (free text until a trigger, for structural tags).
type RuleSet struct {
	Rules []string
	Names []string
	text  map[int]*triggerText // built-in rules by index (their Rules entry is unused)
}

// ruleAutomaton is one rule of a pushdown automaton: a DFA over bytes whose states may call
// other rules.
type ruleAutomaton interface {
	Step(s int, b byte) int
	Accepting(s int) bool
	Calls(s int) []int32
	CallStep(s int, k int32) int
	// search reports whether the end of the rule is reachable from its start, crossing
	// calls of rules that callOK accepts and, when consume is set, input; onCall (if not
	// nil) sees every call met on the way.
	search(consume bool, callOK func(int32) bool, onCall func(int32)) bool
	callees() []int32
}

// frame ids at the bottom of a stack.
const (
	bottom = -1 // the output's own bottom: popping it ends the output
	base   = -2 // the placeholder below a frame whose tokens are computed without its context
)

// frame is one entry of a pushdown stack: a rule's DFA state above its caller (interned, so
// a stack is one frame id and stacks share their lower parts).
type frame struct {
	parent int32
	rule   int32
	state  int32
}

// pconf is a configuration of the pushdown automaton: every stack the output may be in
// (nondeterminism), closed under calls and returns that consume nothing.
type pconf struct {
	frames  []int32 // all frames that may be on top
	roots   []int32 // those not pushed by another frame of the set (their local masks cover the rest)
	accept  bool    // a frame on the bottom may end: the output may end here
	popBase bool    // a frame on the base may end (local walks)
	next    [256]int32
}

// PDA is a lazily built pushdown automaton over bytes: one DFA per rule and stacks of
// frames. Its states (configurations) are interned like a DFA's, so the masks machinery is
// the same, and a configuration's mask is assembled from per-(rule, state) local masks.
type PDA struct {
	rules []ruleAutomaton
	names []string

	mu      sync.Mutex
	frames  []frame
	frameIx map[frame]int32
	confs   []pconf
	confIx  map[string]int32
	locals  map[[2]int32]*localInfo // (rule, state) → what a frame allows by itself
}

var errRules = errors.New("invalid rule set")

// CompileRules builds the automaton of a rule set with more than one rule. Left recursion
// (a rule that can reach a call of itself without consuming input) and rules that can never
// end are errors naming the rule.
func CompileRules(rs RuleSet) (*PDA, error) {
	if len(rs.Rules) == 0 || len(rs.Rules) > maxRules {
		return nil, fmt.Errorf("%w: %d rules", errRules, len(rs.Rules))
	}
	p := &PDA{names: rs.Names, frameIx: map[frame]int32{}, confIx: map[string]int32{}}
	for i, src := range rs.Rules {
		if t, ok := rs.text[i]; ok {
			p.rules = append(p.rules, t)
			continue
		}
		d, err := CompileRegex(src)
		if err != nil {
			return nil, fmt.Errorf("rule %s: %w", p.name(i), err)
		}
		p.rules = append(p.rules, d)
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.frame(bottom, 0, 0)
	p.conf([]int32{f})
	return p, nil
}

func (p *PDA) name(i int) string {
	if i < len(p.names) && p.names[i] != "" {
		return strconv.Quote(p.names[i])
	}
	return "#" + strconv.Itoa(i)
}

// check finds calls of unknown rules, rules that never end (unproductive) and left
// recursion, by searches over the rules' instruction graphs.
func (p *PDA) check() error {
	n := len(p.rules)
	for r, d := range p.rules {
		for _, k := range d.callees() {
			if int(k) >= n {
				return fmt.Errorf("rule %s calls rule #%d, which does not exist", p.name(r), k)
			}
		}
	}
	fixed := func(consume bool) []bool {
		ok := make([]bool, n)
		for changed := true; changed; {
			changed = false
			for r, d := range p.rules {
				if !ok[r] && d.search(consume, func(k int32) bool { return ok[k] }, nil) {
					ok[r], changed = true, true
				}
			}
		}
		return ok
	}
	productive := fixed(true) // the rule can end after finite input
	for r := range p.rules {
		if !productive[r] {
			return fmt.Errorf("rule %s can never end (every alternative refers to itself)", p.name(r))
		}
	}
	nullable := fixed(false)   // the rule can end without input
	left := make([][]int32, n) // rules called before any input; a cycle is left recursion
	for r, d := range p.rules {
		d.search(false, func(k int32) bool { return nullable[k] }, func(k int32) {
			if !slices.Contains(left[r], k) {
				left[r] = append(left[r], k)
			}
		})
	}
	state := make([]int8, n) // 0 new, 1 on the path, 2 done
	var visit func(r int32) error
	visit = func(r int32) error {
		switch state[r] {
		case 1:
			return fmt.Errorf("rule %s is left-recursive (it can call itself before consuming any input)", p.name(int(r)))
		case 2:
			return nil
		}
		state[r] = 1
		for _, k := range left[r] {
			if err := visit(k); err != nil {
				return err
			}
		}
		state[r] = 2
		return nil
	}
	for r := range p.rules {
		if err := visit(int32(r)); err != nil {
			return err
		}
	}
	return nil
}

func (d *DFA) callees() []int32 {
	var ks []int32
	for pc := range d.prog.Inst {
		if k, ok := d.callAt(uint32(pc)); ok {
			ks = append(ks, k)
		}
	}
	return ks
}

func (d *DFA) search(consume bool, callOK func(int32) bool, onCall func(int32)) bool {
	seen := make([]bool, len(d.prog.Inst))
	work := []uint32{uint32(d.prog.Start)}
	found := false
	for len(work) > 0 {
		pc := work[len(work)-1]
		work = work[:len(work)-1]
		if seen[pc] {
			continue
		}
		seen[pc] = true
		in := &d.prog.Inst[pc]
		switch in.Op {
		case syntax.InstMatch:
			found = true
		case syntax.InstAlt, syntax.InstAltMatch:
			work = append(work, in.Out, in.Arg)
		case syntax.InstCapture, syntax.InstNop, syntax.InstEmptyWidth:
			work = append(work, in.Out)
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			if k, ok := d.callAt(pc); ok {
				if onCall != nil {
					onCall(k)
				}
				if callOK(k) {
					work = append(work, in.Out)
				}
			} else if consume && !(in.Op == syntax.InstRune && len(in.Rune) == 0) {
				work = append(work, in.Out)
			}
		}
	}
	return found
}

// frame interns a frame (p.mu held).
func (p *PDA) frame(parent, rule int32, state int) int32 {
	f := frame{parent, rule, int32(state)}
	if id, ok := p.frameIx[f]; ok {
		return id
	}
	id := int32(len(p.frames))
	p.frames = append(p.frames, f)
	p.frameIx[f] = id
	return id
}

// conf interns the configuration reached from the seed frames (p.mu held). It returns dead
// when no frame is left.
func (p *PDA) conf(seeds []int32) int {
	if len(seeds) == 0 {
		return dead
	}
	var c pconf
	seen := map[int32]bool{}
	pushed := map[int32]bool{}
	type item struct {
		f    int32
		push bool
	}
	work := make([]item, 0, len(seeds))
	for _, f := range seeds {
		work = append(work, item{f, false})
	}
	for len(work) > 0 {
		it := work[len(work)-1]
		work = work[:len(work)-1]
		if it.push {
			pushed[it.f] = true
		}
		if seen[it.f] {
			continue
		}
		seen[it.f] = true
		c.frames = append(c.frames, it.f)
		fr := p.frames[it.f]
		d := p.rules[fr.rule]
		for _, k := range d.Calls(int(fr.state)) {
			after := d.CallStep(int(fr.state), k)
			if after == dead {
				continue
			}
			g := p.frame(fr.parent, fr.rule, after)
			work = append(work, item{p.frame(g, k, 0), true})
		}
		if d.Accepting(int(fr.state)) {
			switch fr.parent {
			case bottom:
				c.accept = true
			case base:
				c.popBase = true
			default:
				work = append(work, item{fr.parent, false})
			}
		}
	}
	slices.Sort(c.frames)
	for _, f := range c.frames {
		if !pushed[f] {
			c.roots = append(c.roots, f)
		}
	}
	var b strings.Builder
	for _, f := range c.frames {
		b.WriteString(strconv.FormatInt(int64(f), 36))
		b.WriteByte(',')
	}
	key := b.String()
	if id, ok := p.confIx[key]; ok {
		return int(id)
	}
	id := len(p.confs)
	p.confs = append(p.confs, c)
	p.confIx[key] = int32(id)
	return id
}

// step is the configuration after byte b (p.mu held).
func (p *PDA) step(s int, b byte) int {
	if n := p.confs[s].next[b]; n != 0 {
		if n < 0 {
			return dead
		}
		return int(n) - 1
	}
	var seeds []int32
	for _, f := range p.confs[s].frames {
		fr := p.frames[f]
		if t := p.rules[fr.rule].Step(int(fr.state), b); t != dead {
			seeds = append(seeds, p.frame(fr.parent, fr.rule, t))
		}
	}
	t := p.conf(seeds)
	if t == dead {
		p.confs[s].next[b] = -1
	} else {
		p.confs[s].next[b] = int32(t + 1)
	}
	return t
}

// Start is the initial configuration.
func (p *PDA) Start() int { return 0 }

// Step is the configuration after byte b (dead when nothing can match).
func (p *PDA) Step(s int, b byte) int {
	if s < 0 {
		return dead
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.step(s, b)
}

// Accepting reports whether the output may end in configuration s.
func (p *PDA) Accepting(s int) bool {
	if s < 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.confs[s].accept
}

// States is how many configurations have been built.
func (p *PDA) States() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.confs)
}

// MatchString reports whether the whole of s is accepted (for tests).
func (p *PDA) MatchString(s string) bool {
	st := 0
	for i := 0; i < len(s); i++ {
		if st = p.Step(st, s[i]); st == dead {
			return false
		}
	}
	return p.Accepting(st)
}

// localInfo is what a frame of a rule in a state allows by itself, whatever lies below it:
// the tokens consumed without ending the frame's rule below its own level, and the trie
// nodes (token prefixes) after which the rule may end, where the token goes on in the caller.
type localInfo struct {
	mask []uint64
	pops []int32
}

// fillMask writes the tokens allowed in configuration s into m (zeroed): for each root frame
// its local mask (cached per rule and state), plus, where its rule can end inside a token,
// the rest of those tokens walked from the caller. End-of-sequence tokens where the output
// may end.
func (p *PDA) fillMask(ix *Index, s int, m []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.confs[s]
	for _, f := range c.roots {
		fr := p.frames[f]
		li := p.local(ix, fr.rule, fr.state)
		for i, w := range li.mask {
			m[i] |= w
		}
		if fr.parent < 0 || len(li.pops) == 0 {
			continue // at the bottom nothing may follow the end of the output
		}
		caller := p.conf([]int32{fr.parent})
		for _, n := range li.pops {
			p.walk(ix, n, caller, m, nil)
		}
	}
	if c.accept {
		for _, id := range ix.eos {
			if id < ix.size {
				m[id>>6] |= 1 << (id & 63)
			}
		}
	}
}

// local returns (building once) the local information of a frame of rule r in state st
// (p.mu held).
func (p *PDA) local(ix *Index, r, st int32) *localInfo {
	if p.locals == nil {
		p.locals = map[[2]int32]*localInfo{}
	}
	key := [2]int32{r, st}
	if li, ok := p.locals[key]; ok {
		return li
	}
	li := &localInfo{mask: make([]uint64, ix.Words())}
	start := p.conf([]int32{p.frame(base, r, int(st))})
	p.walk(ix, 0, start, li.mask, &li.pops)
	p.locals[key] = li
	return li
}

// walk marks the tokens below trie node n that configuration s allows, recording in pops
// (when not nil) the nodes where a frame on the base may end (p.mu held).
func (p *PDA) walk(ix *Index, n int32, s int, m []uint64, pops *[]int32) {
	for _, e := range ix.nodes[n].edges {
		t := p.step(s, e.b)
		if t == dead {
			continue
		}
		for _, id := range ix.nodes[e.child].ids {
			m[id>>6] |= 1 << (id & 63)
		}
		if pops != nil && p.confs[t].popBase {
			*pops = append(*pops, e.child)
		}
		p.walk(ix, e.child, t, m, pops)
	}
}

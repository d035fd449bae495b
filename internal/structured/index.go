package structured

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Vocab is a tokenizer's vocabulary as the masks see it: token id → the bytes it produces
// (nil for special tokens that produce nothing a constraint can match), and the
// end-of-sequence ids, allowed only where the output may end.
type Vocab struct {
	Tokens [][]byte
	EOS    []int
}

// Index is a byte trie over a vocabulary, built once per tokenizer and shared.
type Index struct {
	size  int
	eos   []int
	nodes []trieNode
}

type trieNode struct {
	edges []trieEdge // sorted by byte
	ids   []int32    // tokens that end here
}

type trieEdge struct {
	b     byte
	child int32
}

// NewIndex builds the trie of v.
func NewIndex(v Vocab) *Index {
	ix := &Index{size: len(v.Tokens), eos: slices.Clone(v.EOS), nodes: []trieNode{{}}}
	for id, tok := range v.Tokens {
		if len(tok) == 0 {
			continue
		}
		n := int32(0)
		for _, b := range tok {
			i, found := slices.BinarySearchFunc(ix.nodes[n].edges, b, func(e trieEdge, b byte) int { return int(e.b) - int(b) })
			if found {
				n = ix.nodes[n].edges[i].child
				continue
			}
			child := int32(len(ix.nodes))
			ix.nodes = append(ix.nodes, trieNode{})
			ix.nodes[n].edges = slices.Insert(ix.nodes[n].edges, i, trieEdge{b, child})
			n = child
		}
		ix.nodes[n].ids = append(ix.nodes[n].ids, int32(id))
	}
	return ix
}

// Size is the vocabulary size (mask length in bits).
func (ix *Index) Size() int { return ix.size }

// Words is the mask length in uint64 words.
func (ix *Index) Words() int { return (ix.size + 63) / 64 }

// Constraint is a compiled constraint over one vocabulary: masks cached per automaton state.
// The automaton is a DFA (regular constraints) or a pushdown automaton (recursive grammars
// and schemas).
type Constraint struct {
	ix  *Index
	dfa *DFA
	pda *PDA
	src string

	mu       sync.Mutex
	masks    map[int][]uint64
	inflight map[int]chan struct{} // states whose mask is being computed
}

// NewConstraint binds an automaton to an index.
func NewConstraint(ix *Index, d *DFA, src string) *Constraint {
	return &Constraint{ix: ix, dfa: d, src: src, masks: map[int][]uint64{}, inflight: map[int]chan struct{}{}}
}

// NewPushdownConstraint binds a pushdown automaton to an index.
func NewPushdownConstraint(ix *Index, p *PDA, src string) *Constraint {
	return &Constraint{ix: ix, pda: p, src: src, masks: map[int][]uint64{}, inflight: map[int]chan struct{}{}}
}

func (c *Constraint) step(s int, b byte) int {
	if c.pda != nil {
		return c.pda.Step(s, b)
	}
	return c.dfa.Step(s, b)
}

func (c *Constraint) accepting(s int) bool {
	if c.pda != nil {
		return c.pda.Accepting(s)
	}
	return c.dfa.Accepting(s)
}

// maxCachedMasks bounds the per-state mask cache (pushdown configurations are unbounded);
// the cache starts over when full.
const maxCachedMasks = 4096

// mask returns the allowed tokens of state s (shared; do not modify).
func (c *Constraint) mask(s int) []uint64 {
	c.mu.Lock()
	for {
		if m, ok := c.masks[s]; ok {
			c.mu.Unlock()
			return m
		}
		ch, busy := c.inflight[s]
		if !busy {
			break
		}
		c.mu.Unlock()
		<-ch // computed by another goroutine (a prefetch)
		c.mu.Lock()
	}
	done := make(chan struct{})
	c.inflight[s] = done
	c.mu.Unlock()
	return c.compute(s, done)
}

// compute builds the mask of state s, registered in c.inflight with done.
func (c *Constraint) compute(s int, done chan struct{}) []uint64 {
	defer close(done)
	m := make([]uint64, c.ix.Words())
	if c.pda != nil {
		c.pda.fillMask(c.ix, s, m)
	} else {
		c.dfaMask(s, m)
	}
	c.mu.Lock()
	if len(c.masks) >= maxCachedMasks {
		clear(c.masks)
	}
	c.masks[s] = m
	delete(c.inflight, s)
	c.mu.Unlock()
	return m
}

func (c *Constraint) dfaMask(s int, m []uint64) {
	d := c.dfa
	d.mu.Lock()
	var walk func(n int32, st int)
	walk = func(n int32, st int) {
		for _, e := range c.ix.nodes[n].edges {
			t := d.step(st, e.b)
			if t == dead {
				continue
			}
			for _, id := range c.ix.nodes[e.child].ids {
				m[id>>6] |= 1 << (id & 63)
			}
			walk(e.child, t)
		}
	}
	walk(0, s)
	accept := d.states[s].accept
	d.mu.Unlock()
	if accept {
		for _, id := range c.ix.eos {
			if id < c.ix.size {
				m[id>>6] |= 1 << (id & 63)
			}
		}
	}
}

// prefetch computes the mask of state s in the background when it is not cached, so that it
// is ready when the next step asks (off the engine's critical path).
func (c *Constraint) prefetch(s int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.masks[s]
	_, busy := c.inflight[s]
	if !ok && !busy {
		done := make(chan struct{})
		c.inflight[s] = done
		go c.compute(s, done)
	}
}

// Matcher follows one output through a constraint.
type Matcher struct {
	c     *Constraint
	state int
	done  bool
}

// NewMatcher starts at the beginning of the output.
func (c *Constraint) NewMatcher() *Matcher { return &Matcher{c: c, state: 0} }

// Mask writes the allowed next tokens into dst (a bitset of Words() uint64s): tokens whose
// bytes keep the output matchable, and end-of-sequence tokens where it may end.
func (m *Matcher) Mask(dst []uint64) {
	if m.done {
		clear(dst)
		return
	}
	copy(dst, m.c.mask(m.state))
}

// ErrRejected is returned by Accept for a token the constraint does not allow.
var ErrRejected = errors.New("structured: token not allowed by the constraint")

// Accept advances past token tok.
func (m *Matcher) Accept(tok int, bytes []byte) error {
	if m.done {
		return ErrRejected
	}
	if slices.Contains(m.c.ix.eos, tok) {
		if !m.c.accepting(m.state) {
			return ErrRejected
		}
		m.done = true
		return nil
	}
	st := m.state
	for _, b := range bytes {
		if st = m.c.step(st, b); st == dead {
			return fmt.Errorf("%w (token %d)", ErrRejected, tok)
		}
	}
	m.state = st
	m.c.prefetch(st)
	return nil
}

// Accepting reports whether the output may end here.
func (m *Matcher) Accepting() bool { return !m.done && m.c.accepting(m.state) }

// Done reports whether an end-of-sequence token was accepted.
func (m *Matcher) Done() bool { return m.done }

// MustEnd reports whether the output can only end here (accepting, and no byte continues it).
func (m *Matcher) MustEnd() bool {
	if m.done || !m.Accepting() {
		return false
	}
	for b := 0; b < 256; b++ {
		if m.c.step(m.state, byte(b)) != dead {
			return false
		}
	}
	return true
}

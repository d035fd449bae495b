package inference

import "testing"

// onlyGuide allows one token, then must end.
type onlyGuide struct {
	tok      int
	accepted []int
}

func (g *onlyGuide) Mask(dst []uint64) {
	clear(dst)
	dst[g.tok>>6] |= 1 << (g.tok & 63)
}
func (g *onlyGuide) Accept(tok int) error { g.accepted = append(g.accepted, tok); return nil }
func (g *onlyGuide) MustEnd() bool        { return len(g.accepted) > 0 }

type onlyFactory struct{ g *onlyGuide }

func (f onlyFactory) NewGuide() Guide { return f.g }

func allowed(g Guide, tok int) bool {
	m := make([]uint64, 2)
	g.Mask(m)
	return m[tok>>6]&(1<<(tok&63)) != 0
}

// TestThinkFirst: before the first token the constrained answer or <think> is allowed;
// inside the block anything (the inner guide sees none of it); after </think> the inner
// guide alone; a prompt that opened the block starts inside it.
func TestThinkFirst(t *testing.T) {
	const start, end, want, other = 70, 71, 5, 9
	inner := &onlyGuide{tok: want}
	g := ThinkFirst(onlyFactory{inner}, start, end, false).NewGuide()
	if !allowed(g, want) || !allowed(g, start) || allowed(g, other) || allowed(g, end) || g.MustEnd() {
		t.Fatal("before the first token")
	}
	g.Accept(start)
	if !allowed(g, other) || !allowed(g, end) || g.MustEnd() {
		t.Fatal("inside the block")
	}
	g.Accept(other)
	g.Accept(end)
	if allowed(g, other) || !allowed(g, want) || len(inner.accepted) != 0 {
		t.Fatalf("after the block: inner saw %v", inner.accepted)
	}
	g.Accept(want)
	if !g.MustEnd() || len(inner.accepted) != 1 {
		t.Fatalf("the answer: inner saw %v", inner.accepted)
	}
	// No block: the first token goes to the inner guide.
	inner2 := &onlyGuide{tok: want}
	g2 := ThinkFirst(onlyFactory{inner2}, start, end, false).NewGuide()
	g2.Accept(want)
	if allowed(g2, start) || !g2.MustEnd() {
		t.Fatal("answered without thinking: <think> is still allowed")
	}
	// Opened by the prompt.
	g3 := ThinkFirst(onlyFactory{&onlyGuide{tok: want}}, start, end, true).NewGuide()
	if !allowed(g3, other) {
		t.Fatal("a block the prompt opened is not free")
	}
}

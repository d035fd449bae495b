package inference

// ThinkFirst lets a thinking model reason before a guide constrains its answer, as vLLM
// applies structured outputs (and a required tool call's) only after the reasoning parser
// sees the reasoning end: the model may open a <think> block (token start) where the
// constraint begins, reasons freely inside it, and the constraint applies from the token
// after its end (token end). open says the prompt already opened the block (a template that
// writes <think> in the generation prompt). A prompt that closed it (thinking turned off)
// needs no ThinkFirst.
func ThinkFirst(f GuideFactory, start, end int, open bool) GuideFactory {
	return &thinkFirst{f: f, start: start, end: end, open: open}
}

type thinkFirst struct {
	f          GuideFactory
	start, end int
	open       bool
}

func (t *thinkFirst) NewGuide() Guide {
	g := &thinkGuide{inner: t.f.NewGuide(), start: t.start, end: t.end}
	if t.open {
		g.state = thinking
	}
	return g
}

const (
	mayThink  = iota // before the first token: a <think> or the constrained answer
	thinking         // inside the block: anything
	answering        // after it: the inner guide
)

type thinkGuide struct {
	inner      Guide
	start, end int
	state      int
}

func (g *thinkGuide) Mask(dst []uint64) {
	switch g.state {
	case mayThink:
		g.inner.Mask(dst)
		dst[g.start>>6] |= 1 << (g.start & 63)
	case thinking:
		for i := range dst {
			dst[i] = ^uint64(0)
		}
	default:
		g.inner.Mask(dst)
	}
}

func (g *thinkGuide) Accept(tok int) error {
	switch g.state {
	case mayThink:
		if tok == g.start {
			g.state = thinking
			return nil
		}
		g.state = answering
	case thinking:
		if tok == g.end {
			g.state = answering
		}
		return nil
	}
	return g.inner.Accept(tok)
}

func (g *thinkGuide) MustEnd() bool { return g.state == answering && g.inner.MustEnd() }

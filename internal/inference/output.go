package inference

import (
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/honeai/hone/internal/sample"
	"github.com/honeai/hone/internal/tokenizer"
	"github.com/honeai/hone/internal/toolcall"
)

// Output asks the engine to turn a request's tokens into text, as vLLM's output processor
// does: each choice is detokenised incrementally, ends at the first stop string (finish
// "stop", the string as its stop reason; the text cut before it, or after it with
// IncludeStop) once it has Params.MinTokens tokens, and its events carry the new text. Text
// that may still turn out to start a stop string is held back until it cannot, so what was
// sent is never taken back. With Reasoning, a leading <think>…</think> block is reported
// apart from the answer.
type Output struct {
	Tok         *tokenizer.Tokenizer
	SkipSpecial bool
	Stops       []string
	IncludeStop bool
	Reasoning   bool
	// ToolCalls, when set, finds tool calls in the answer (after any reasoning): the text of
	// a call never reaches Text.Content; its name and arguments come as Text.Calls.
	ToolCalls *ToolCalls
}

// ToolCalls is how to read a choice's tool calls: the parser family and its options.
type ToolCalls struct {
	Family  string
	Options toolcall.Options
}

// Text is the text of one choice's event: what became visible since its last event.
type Text struct {
	Content   string
	Reasoning string
	// Calls is what became visible of tool calls (Output.ToolCalls).
	Calls []toolcall.CallDelta
	// Full is the whole text of the choice (stop string cut), on its finishing event.
	Full string
}

// outputState follows one choice's text.
type outputState struct {
	o                          *Output
	maxStop                    int
	dec                        *tokenizer.Decoder
	text                       string // generated text so far (a stop string cut)
	tokens                     int
	sentContent, sentReasoning int
	finished                   bool
	calls                      *toolcall.Stream
}

func newOutputState(o *Output) *outputState {
	st := &outputState{o: o, dec: o.Tok.NewDecoder(o.SkipSpecial)}
	if o.ToolCalls != nil {
		st.calls = toolcall.NewStream(o.ToolCalls.Family, o.ToolCalls.Options)
	}
	for _, s := range o.Stops {
		st.maxStop = max(st.maxStop, len(s))
	}
	return st
}

// token takes a sampled token (finishing when the engine ends the choice with it) and
// returns the stop string that ends the choice here, if one does.
func (st *outputState) token(tok int, finishing bool, minTokens int) (stop string, found bool) {
	st.tokens++
	piece := st.dec.Add(tok)
	if finishing {
		piece += st.dec.Flush()
	}
	before := len(st.text)
	st.text += piece
	if len(st.o.Stops) == 0 || st.tokens < minTokens {
		return "", false
	}
	from := max(0, before-st.maxStop)
	bestAt := -1
	for _, s := range st.o.Stops {
		if i := strings.Index(st.text[from:], s); i >= 0 && (bestAt < 0 || from+i < bestAt) {
			stop, bestAt = s, from+i
		}
	}
	if bestAt < 0 {
		return "", false
	}
	if st.o.IncludeStop {
		st.text = st.text[:bestAt+len(stop)]
	} else {
		st.text = st.text[:bestAt]
	}
	return stop, true
}

// flush ends the text (an unfinished character becomes U+FFFD).
func (st *outputState) flush() { st.text += st.dec.Flush() }

// delta is the text that became visible: all of it once finished; before that, all but
// what could still be the start of a stop string, split into reasoning and answer.
func (st *outputState) delta(finished bool) Text {
	avail := len(st.text)
	if !finished && st.maxStop > 1 {
		avail = max(st.sentContent+st.sentReasoning, avail-(st.maxStop-1))
		for avail > 0 && avail < len(st.text) && !utf8.RuneStart(st.text[avail]) {
			avail--
		}
	}
	visible := st.text[:avail]
	var reasoning *string
	content := visible
	if st.o.Reasoning {
		reasoning, content = SplitReasoning(visible)
		if !finished && reasoning != nil && !strings.Contains(visible, "</think>") {
			content = ""
		}
	}
	var t Text
	if reasoning != nil && len(*reasoning) > st.sentReasoning {
		t.Reasoning = (*reasoning)[st.sentReasoning:]
		st.sentReasoning = len(*reasoning)
	}
	if len(content) > st.sentContent {
		t.Content = content[st.sentContent:]
		st.sentContent = len(content)
	}
	if st.calls != nil {
		d := st.calls.Feed(t.Content, finished)
		t.Content, t.Calls = d.Content, d.Calls
	}
	if finished {
		t.Full = st.text
	}
	return t
}

// SplitReasoning separates a leading <think>…</think> block from the answer: reasoning is
// nil when the text has none; an unclosed block is all reasoning.
func SplitReasoning(text string) (reasoning *string, content string) {
	t := strings.TrimLeft(text, " \n")
	t = strings.TrimPrefix(t, "<think>")
	end := strings.Index(t, "</think>")
	if end < 0 {
		if strings.HasPrefix(strings.TrimLeft(text, " \n"), "<think>") {
			r := strings.TrimSpace(t)
			return &r, ""
		}
		return nil, text
	}
	r := strings.TrimSpace(t[:end])
	return &r, strings.TrimLeft(t[end+len("</think>"):], "\n")
}

// emit sends ev to h after output processing and returns it as sent: a token may have
// ended its choice at a stop string (Finish "stop"); false when the event was dropped, its
// choice having ended already.
func (e *Engine) emit(h *Handle, ev Event) (Event, bool) {
	o := h.req.Output
	if o == nil || ev.Choice < 0 {
		h.events <- ev
		return ev, true
	}
	for len(h.outs) <= ev.Choice {
		h.outs = append(h.outs, newOutputState(o))
	}
	st := h.outs[ev.Choice]
	if st.finished {
		return ev, false
	}
	if ev.HasToken {
		if stop, ok := st.token(ev.Token, ev.Finish != "", h.req.Params.MinTokens); ok {
			ev.Finish, ev.StopReason = "stop", stop
		}
	} else if ev.Finish != "" {
		st.flush() // ended without a token (abort, a caller's stop): the rest of the text
	}
	if ev.Finish != "" {
		st.finished = true
	}
	ev.Text = st.delta(ev.Finish != "")
	h.events <- ev
	return ev, true
}

// nonFiniteLogits counts the logits that are NaN or +Inf (-Inf is a masked token).
func nonFiniteLogits(raw []float32) int {
	n := 0
	for _, v := range raw {
		if v != v || v > math.MaxFloat32 {
			n++
		}
	}
	return n
}

// promptLogprobs gathers the logprob of each prompt token given the ones before it, a prefill
// chunk at a time, and sends them all in one event once the prompt's last chunk is done (a
// long prompt, or one sharing a step's token budget, takes several chunks).
func (e *Engine) promptLogprobs(c *choice, start int, tokens []int, logits [][]float32) {
	req := c.h.req
	lps := c.promptLPs
	if start == 0 {
		lps = append(lps[:0], PromptLogprob{Token: req.Prompt[0], Rank: 0})
	}
	for j := range tokens {
		pos := start + j + 1 // the token these logits predict
		if pos >= len(req.Prompt) {
			break
		}
		tok := req.Prompt[pos]
		lp, rank, top := sample.Logprobs(logits[j], tok, req.PromptTopLogprobs)
		lps = append(lps, PromptLogprob{Token: tok, Logprob: lp, Rank: rank, Top: top})
	}
	c.promptLPs = lps
	if start+len(tokens) >= len(req.Prompt) {
		e.emit(c.h, Event{Choice: -1, PromptLogprobs: lps})
		c.promptLPs = nil
	}
}

// sampleNext samples the next token of c from raw logits and checks stop conditions.
func (e *Engine) sampleNext(c *choice, raw []float32) { e.sampleAt(c, raw, c.seq.Len()) }

// sampleAt samples the token after seqLen cached positions of c (a speculative step caches
// more) and checks stop conditions; it returns the token (-1 when none was sampled).
func (e *Engine) sampleAt(c *choice, raw []float32, seqLen int) int {
	req := c.h.req
	if bad := nonFiniteLogits(raw); bad > 0 {
		// Broken weights (an adapter of training that diverged): nothing can be sampled
		// from NaN. The choice ends with "error", which the API answers as such.
		adapter := ""
		if req.Adapter != nil {
			adapter = req.Adapter.Name
		}
		e.log.Error("inference: non-finite logits; the choice ends with an error", "adapter", adapter,
			"non_finite", bad, "vocab", len(raw), "generated", len(c.output))
		e.finish(c, FinishError, nil)
		return -1
	}
	ev := Event{Choice: c.index, HasToken: true}
	var rawCopy []float32
	if req.Logprobs {
		rawCopy = append([]float32(nil), raw...)
	}
	c.sampler.Process(raw, req.Prompt, c.output)
	if c.guide != nil {
		words := (len(raw) + 63) / 64
		if len(c.mask) != words {
			c.mask = make([]uint64, words)
		}
		clear(c.mask)
		c.guide.Mask(c.mask)
		ninf := float32(math.Inf(-1))
		for i := range raw {
			if c.mask[i>>6]&(1<<(i&63)) == 0 {
				raw[i] = ninf
			}
		}
	}
	tok := c.sampler.Sample(raw)
	ev.Token = tok
	if req.Logprobs {
		ev.Logprob, ev.Rank, ev.Top = sample.Logprobs(rawCopy, tok, req.TopLogprobs)
	}
	c.output = append(c.output, tok)
	if c.h.FirstToken.IsZero() {
		c.h.FirstToken = time.Now()
	}
	e.observeToken(c)
	e.statsMu.Lock()
	e.stats.GeneratedTokens++
	e.statsMu.Unlock()
	switch {
	case !req.IgnoreEOS && slices.Contains(req.Params.EOS, tok):
		ev.Finish = "stop"
	case slices.Contains(req.Params.StopTokenIDs, tok):
		ev.Finish, ev.StopReason = "stop", tok
	case len(c.output) >= req.MaxTokens || seqLen+1 >= e.m.Config.MaxPositionEmbeddings:
		ev.Finish = "length"
	case req.Repetition != nil && len(c.output) >= req.Params.MinTokens && req.Repetition.Repeats(c.output):
		ev.Finish = "repetition"
	}
	if c.guide != nil && ev.Finish == "" {
		if err := c.guide.Accept(tok); err != nil || c.guide.MustEnd() {
			ev.Finish = "stop" // the constraint is complete (or, never expected, violated)
		}
	}
	ev, _ = e.emit(c.h, ev)
	if ev.Finish != "" {
		c.finished = true
		c.seq.Free()
	}
	return tok
}

func (e *Engine) finish(c *choice, reason string, stopReason any) {
	if c.finished {
		return
	}
	c.finished = true
	c.seq.Free()
	e.emit(c.h, Event{Choice: c.index, Finish: reason, StopReason: stopReason})
}

func (e *Engine) finishAll(r *running, reason string) {
	for _, c := range r.choices {
		e.finish(c, reason, nil)
	}
	// Choices not forked yet (still prefilling) finish too.
	for k := len(r.choices); k < r.h.req.N; k++ {
		e.emit(r.h, Event{Choice: k, Finish: reason})
	}
}

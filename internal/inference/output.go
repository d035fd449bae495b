package inference

import (
	"strings"
	"unicode/utf8"

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

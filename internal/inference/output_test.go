package inference

import (
	"context"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/sample"
	"github.com/honeai/hone/internal/tokenizer"
)

func testTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tiny(t) // writes the model directory
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// feed runs text's tokens through an output state as the engine would, one event per token
// (the last finishing), and returns what the events carried.
func feed(tok *tokenizer.Tokenizer, o *Output, text string, minTokens int) (deltas []Text, stop string, tokens int) {
	st := newOutputState(o)
	ids := tok.Encode(text, false)
	for i, id := range ids {
		last := i == len(ids)-1
		s, found := st.token(id, last, minTokens)
		tokens++
		if found {
			return append(deltas, st.delta(true)), s, tokens
		}
		deltas = append(deltas, st.delta(last))
	}
	return deltas, "", tokens
}

func joined(ds []Text) (content, reasoning string) {
	for _, d := range ds {
		content += d.Content
		reasoning += d.Reasoning
	}
	return
}

// TestOutputStops: a stop string across tokens ends the choice; the text is cut before it
// (or after, with IncludeStop); nothing sent is taken back; stop strings count only from
// MinTokens on.
func TestOutputStops(t *testing.T) {
	tok := testTokenizer(t)
	text := "The answer is forty two. END and more words after it"
	ds, stop, n := feed(tok, &Output{Tok: tok, Stops: []string{"END", "nothing"}}, text, 0)
	content, _ := joined(ds)
	if stop != "END" || content != "The answer is forty two. " || ds[len(ds)-1].Full != content {
		t.Fatalf("stop %q content %q full %q", stop, content, ds[len(ds)-1].Full)
	}
	if n >= len(tok.Encode(text, false)) {
		t.Fatal("the choice did not end at the stop string")
	}
	// Held back: no delta before the end shows a prefix of END it would have to take back.
	for _, d := range ds[:len(ds)-1] {
		if strings.Contains(d.Content, "E") {
			t.Fatalf("sent %q before knowing it was not the stop string", d.Content)
		}
	}
	ds, _, _ = feed(tok, &Output{Tok: tok, Stops: []string{"END"}, IncludeStop: true}, text, 0)
	if c, _ := joined(ds); c != "The answer is forty two. END" {
		t.Fatalf("include_stop_str_in_output: %q", c)
	}
	ds, stop, _ = feed(tok, &Output{Tok: tok, Stops: []string{"The"}}, text, 3)
	if c, _ := joined(ds); stop != "" || c != text {
		t.Fatalf("a stop string before min_tokens ended the choice: %q %q", stop, c)
	}
	ds, _, _ = feed(tok, &Output{Tok: tok}, "héllo wörld ✓", 0)
	if c, _ := joined(ds); c != "héllo wörld ✓" {
		t.Fatalf("no stops: %q", c)
	}
}

// TestOutputReasoning: a leading <think> block streams as reasoning, the rest as content,
// and the deltas add up to the split of the whole text.
func TestOutputReasoning(t *testing.T) {
	tok := testTokenizer(t)
	text := "<think>\nLet me see: two plus two.\n</think>\n\nIt is four."
	ds, _, _ := feed(tok, &Output{Tok: tok, Reasoning: true}, text, 0)
	content, reasoning := joined(ds)
	r, c := SplitReasoning(text)
	if reasoning != *r || content != c || content != "It is four." || reasoning != "Let me see: two plus two." {
		t.Fatalf("reasoning %q content %q", reasoning, content)
	}
	if r, c := SplitReasoning("no thinking here"); r != nil || c != "no thinking here" {
		t.Fatalf("no block: %v %q", r, c)
	}
	if r, c := SplitReasoning("<think>still thinking"); r == nil || *r != "still thinking" || c != "" {
		t.Fatalf("unclosed block: %v %q", r, c)
	}
}

// TestEngineStopsAtStopString: the engine itself ends a choice at a stop string, with the
// string as its stop reason, and sends no token after it.
func TestEngineStopsAtStopString(t *testing.T) {
	m := tiny(t)
	tok := testTokenizer(t)
	e := New(m, Options{})
	defer e.Close()
	run := func(o *Output) (string, []Event) {
		p := sample.Defaults()
		p.Temperature = 0
		h, err := e.Submit(context.Background(), &Request{Prompt: []int{3, 4, 5}, Params: p, MaxTokens: 40, IgnoreEOS: true, Output: o})
		if err != nil {
			t.Fatal(err)
		}
		var evs []Event
		text := ""
		for ev := range h.Events() {
			evs = append(evs, ev)
			text += ev.Text.Content
		}
		return text, evs
	}
	full, evs := run(&Output{Tok: tok})
	if len(evs) != 40 || evs[39].Text.Full != full || full == "" {
		t.Fatalf("%d events, text %q", len(evs), full)
	}
	// Stop at a piece of the greedy text past its first tokens: an ASCII piece of one token
	// and the start of the next one's.
	stop := ""
	for i := 4; i < len(evs)-1 && stop == ""; i++ {
		a, b := evs[i].Text.Content, evs[i+1].Text.Content
		if len(a) >= 2 && len(b) >= 1 && isASCII(a+b[:1]) && strings.Index(full, a+b[:1]) == strings.Index(full, a) {
			stop = a[len(a)-1:] + b[:1]
		}
	}
	if stop == "" || !strings.Contains(full, stop) {
		t.Fatalf("no stop string to try in %q", full)
	}
	text, evs := run(&Output{Tok: tok, Stops: []string{stop}})
	last := evs[len(evs)-1]
	if last.Finish != "stop" || last.StopReason != stop || text != full[:strings.Index(full, stop)] || len(evs) >= 40 {
		t.Fatalf("stop %q: %d events, text %q, last %+v", stop, len(evs), text, last)
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

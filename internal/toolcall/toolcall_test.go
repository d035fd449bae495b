package toolcall

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

type parseCase struct {
	family, text string
	forced       bool
	content      string
	calls        []Call
	ok           bool
}

var parseCases = []parseCase{
	// hermes
	{family: Hermes, text: `<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
</tool_call>`, calls: []Call{{"get_weather", `{"city": "Paris", "days": 3}`}}, ok: true},
	{family: Hermes, text: `Let me check.<tool_call>{"name":"a","arguments":{}}</tool_call>
<tool_call>{"arguments": {"x": [1, {"y": "}"}]}, "name": "b"}</tool_call>`, content: "Let me check.",
		calls: []Call{{"a", `{}`}, {"b", `{"x": [1, {"y": "}"}]}`}}, ok: true},
	{family: Hermes, text: `<tool_call>{"name": "a", "arguments": "{\"q\": 1}"}</tool_call>`, calls: []Call{{"a", `{"q": 1}`}}, ok: true},
	{family: Hermes, text: `<tool_call>{"name": "a"}</tool_call>`, calls: []Call{{"a", `{}`}}, ok: true},
	{family: Hermes, text: `<tool_call>{"name": "a", "arguments": {"x": 1}}`, calls: []Call{{"a", `{"x": 1}`}}, ok: true}, // no closing tag
	{family: Hermes, text: `<tool_call>{"name": "a", "arguments": {"x": 1}</tool_call>`, content: `<tool_call>{"name": "a", "arguments": {"x": 1}</tool_call>`},
	{family: Hermes, text: `<tool_call>not json</tool_call>`, content: `<tool_call>not json</tool_call>`},
	{family: Hermes, text: `<tool_call>{"arguments": {}}</tool_call>`, content: `<tool_call>{"arguments": {}}</tool_call>`},
	{family: Hermes, text: `plain answer`, content: `plain answer`},
	{family: Hermes, text: `{"name": "a", "arguments": {}}`, content: `{"name": "a", "arguments": {}}`},
	{family: Hermes, forced: true, text: `{"name": "a", "arguments": {}}`, calls: []Call{{"a", `{}`}}, ok: true},
	// cut short (max_tokens, a stop string, a cancel): complete calls kept, the partial one
	// dropped with its markup
	{family: Hermes, text: "<tool_call>\n{\"name\": \"final_result\", \"arguments\": {\"a\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"f",
		calls: []Call{{"final_result", `{"a": 1}`}}, ok: true},
	{family: Hermes, text: `Sure. <tool_call>{"name": "f", "argu`, content: "Sure. ", ok: true},
	{family: Hermes, text: `Sure. <tool_call>`, content: "Sure. ", ok: true},
	{family: Hermes, text: `<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>junk`, calls: []Call{{"a", `{}`}}, ok: true},
	{family: Hermes, forced: true, text: `{"na`, ok: true},
	{family: Hermes, forced: true, text: `{"name": "a", "arguments": {"x": 1}}` + "\n" + `{"name": "b", "arguments": {"y"`, calls: []Call{{"a", `{"x": 1}`}}, ok: true},
	// generic: hermes' syntax
	{family: Generic, text: `Let me look. <tool_call>{"name": "a", "arguments": {"q": "x"}}</tool_call>`, content: "Let me look. ", calls: []Call{{"a", `{"q": "x"}`}}, ok: true},
	{family: Generic, forced: true, text: `{"name": "a", "arguments": {}}`, calls: []Call{{"a", `{}`}}, ok: true},
	{family: Generic, text: `<tool_call>{"name": "a", "arguments": {"q": "x"}}</tool_call>` + "\n<tool_call>{\"name\": \"a\", \"arguments\": {\"q\"", calls: []Call{{"a", `{"q": "x"}`}}, ok: true},
	// llama3_json
	{family: Llama3JSON, text: `{"name": "get_weather", "parameters": {"city": "Rome"}}`, calls: []Call{{"get_weather", `{"city": "Rome"}`}}, ok: true},
	{family: Llama3JSON, text: `<|python_tag|>{"name": "a", "parameters": {"n": -1.5e3}}; {"name": "b", "parameters": {"t": true}}`,
		calls: []Call{{"a", `{"n": -1.5e3}`}, {"b", `{"t": true}`}}, ok: true},
	{family: Llama3JSON, text: `Sure. <|python_tag|>{"name": "a", "parameters": {}}`, content: "Sure. ", calls: []Call{{"a", `{}`}}, ok: true},
	{family: Llama3JSON, text: `{"answer": 42}`, content: `{"answer": 42}`},
	{family: Llama3JSON, text: `{"name": "a", "parameters": {"x": 1`, ok: true}, // cut inside its only call
	{family: Llama3JSON, text: `{"name": "a", "parameters": {}}; {"name": "b", "para`, calls: []Call{{"a", `{}`}}, ok: true},
	// mistral
	{family: Mistral, text: `[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]`,
		calls: []Call{{"a", `{"x": 1}`}, {"b", `{}`}}, ok: true},
	{family: Mistral, text: `[{"name": "a", "arguments": {"x": "y"}}]`, calls: []Call{{"a", `{"x": "y"}`}}, ok: true},
	{family: Mistral, text: `Checking [TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}[TOOL_CALLS]b[ARGS]{}`, content: "Checking ",
		calls: []Call{{"get_weather", `{"city": "Oslo"}`}, {"b", `{}`}}, ok: true},
	{family: Mistral, text: `[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "argu`, calls: []Call{{"a", `{"x": 1}`}}, ok: true},
	{family: Mistral, text: `[1] is a citation`, content: `[1] is a citation`},
	{family: Mistral, text: `[TOOL_CALLS][{"name": 3}]`, content: `[TOOL_CALLS][{"name": 3}]`},
	{family: Mistral, text: `[TOOL_CALLS]bad name[ARGS]{}`, content: `[TOOL_CALLS]bad name[ARGS]{}`},
	// none
	{family: None, text: `<tool_call>{"name": "a", "arguments": {}}</tool_call>`, content: `<tool_call>{"name": "a", "arguments": {}}</tool_call>`},
}

func TestParse(t *testing.T) {
	for i, c := range parseCases {
		content, calls, ok := Parse(c.family, c.text, Options{Forced: c.forced})
		if content != c.content || ok != c.ok || !reflect.DeepEqual(calls, c.calls) {
			t.Errorf("%d %s %q: got %q %v %v, want %q %v %v", i, c.family, c.text, content, calls, ok, c.content, c.calls, c.ok)
		}
		for _, call := range calls {
			if !json.Valid([]byte(call.Arguments)) {
				t.Errorf("%d: arguments %q are not JSON", i, call.Arguments)
			}
		}
	}
}

func TestSingle(t *testing.T) {
	_, calls, ok := Parse(Hermes, `<tool_call>{"name":"a","arguments":{}}</tool_call><tool_call>{"name":"b","arguments":{}}</tool_call>`, Options{Single: true})
	if !ok || len(calls) != 1 || calls[0].Name != "a" {
		t.Fatal(calls, ok)
	}
}

// streamed feeds text in the given pieces and adds up what the stream reports.
func streamed(t testing.TB, family string, pieces []string, o Options) (content string, calls []Call) {
	s := NewStream(family, o)
	ids := map[int]string{}
	add := func(d Delta) {
		content += d.Content
		for _, cd := range d.Calls {
			if cd.ID != "" {
				if cd.Index != len(calls) || cd.Name == "" || !strings.HasPrefix(cd.ID, "call_") || len(cd.ID) != 29 {
					t.Fatalf("bad first delta %+v after %d calls", cd, len(calls))
				}
				ids[cd.Index] = cd.ID
				calls = append(calls, Call{Name: cd.Name})
			} else if cd.Name != "" || cd.Index >= len(calls) {
				t.Fatalf("bad delta %+v", cd)
			}
			calls[cd.Index].Arguments += cd.Arguments
		}
	}
	for _, p := range pieces {
		add(s.Feed(p, false))
	}
	add(s.Feed("", true))
	return content, calls
}

func split(r *rand.Rand, s string) []string {
	var out []string
	for s != "" {
		n := 1 + r.IntN(min(len(s), 7))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// TestStreamMatchesParse: in any fragment split, the stream adds up to Parse's result (or,
// when the text holds no call, to the whole text as content).
func TestStreamMatchesParse(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i, c := range parseCases {
		for round := 0; round < 40; round++ {
			pieces := split(r, c.text)
			if round == 0 {
				pieces = []string{c.text}
			}
			content, calls := streamed(t, c.family, pieces, Options{Forced: c.forced})
			if content != c.content || !reflect.DeepEqual(calls, c.calls) && !(len(calls) == 0 && len(c.calls) == 0) {
				t.Fatalf("%d %q split %q: got %q %v, want %q %v", i, c.text, pieces, content, calls, c.content, c.calls)
			}
		}
	}
}

// TestStreamNoTagLeak: the call markers never appear in streamed content of a call.
func TestStreamNoTagLeak(t *testing.T) {
	text := "Hi <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"<tool_call>\"}}</tool_call>"
	for n := 1; n < 12; n++ {
		var pieces []string
		for s := text; s != ""; {
			k := min(n, len(s))
			pieces, s = append(pieces, s[:k]), s[k:]
		}
		s := NewStream(Hermes, Options{})
		var content strings.Builder
		for _, p := range pieces {
			d := s.Feed(p, false)
			content.WriteString(d.Content)
		}
		content.WriteString(s.Feed("", true).Content)
		if content.String() != "Hi " {
			t.Fatalf("piece %d: content %q", n, content.String())
		}
	}
}

// TestStreamCallWhole: a call is reported once it is complete, its id and name first, then
// its arguments whole; nothing of a call the output cuts short is sent.
func TestStreamCallWhole(t *testing.T) {
	s := NewStream(Hermes, Options{})
	pieces := []string{"<tool_call>", `{"name": "f", `, `"arguments": {"a"`, `: 1, "b": `, `2}`, `}`, "</tool_call>", "\n<tool_call>", `{"name": "g", "arguments": {`}
	var deltas []CallDelta
	for i, p := range pieces {
		d := s.Feed(p, false)
		if i < 5 && (len(d.Calls) > 0 || d.Content != "") {
			t.Fatalf("piece %d: %+v before the call was complete", i, d)
		}
		deltas = append(deltas, d.Calls...)
	}
	final := s.Feed("", true)
	if final.Content != "" || len(final.Calls) != 0 {
		t.Fatalf("final %+v: the cut call must be dropped", final)
	}
	if len(deltas) != 2 || deltas[0].Name != "f" || deltas[0].ID == "" || deltas[0].Arguments != "" ||
		deltas[1].ID != "" || deltas[1].Arguments != `{"a": 1, "b": 2}` {
		t.Fatalf("%+v", deltas)
	}
}

func TestDetect(t *testing.T) {
	for tpl, want := range map[string]string{
		"{{ '<tool_call>' }}":                         Hermes,
		"[AVAILABLE_TOOLS] ... [TOOL_CALLS]":          Mistral,
		"<|python_tag|>":                              Llama3JSON,
		`<|start_header_id|> {"name": "parameters": `: Llama3JSON,
		"<|im_start|>":                                None,
	} {
		if got := Detect(tpl); got != want {
			t.Errorf("%q: %s, want %s", tpl, got, want)
		}
	}
}

// FuzzParse: Parse never panics, its calls' arguments are JSON, and a stream fed the same text
// in two pieces agrees with it.
func FuzzParse(f *testing.F) {
	for _, c := range parseCases {
		f.Add(c.family, c.text, 3)
	}
	f.Fuzz(func(t *testing.T, family, text string, cut int) {
		if !Valid(family) {
			family = Families[len(family)%len(Families)]
		}
		content, calls, ok := Parse(family, text, Options{})
		if !ok && content != text {
			t.Fatalf("not ok but content %q", content)
		}
		if m := Marker(family); ok && m != "" && strings.Contains(content, m) {
			t.Fatalf("content %q holds the call marker", content)
		}
		for _, c := range calls {
			if !json.Valid([]byte(c.Arguments)) || c.Name == "" {
				t.Fatalf("call %+v", c)
			}
		}
		if cut < 0 {
			cut = -cut
		}
		cut %= len(text) + 1
		sc, scalls := streamed(t, family, []string{text[:cut], text[cut:]}, Options{})
		if ok {
			if sc != content || !reflect.DeepEqual(scalls, calls) && !(len(scalls) == 0 && len(calls) == 0) {
				t.Fatalf("stream %q %v, parse %q %v", sc, scalls, content, calls)
			}
		} else if len(scalls) == 0 && sc != text {
			t.Fatalf("stream content %q, want the text %q", sc, text)
		}
	})
}

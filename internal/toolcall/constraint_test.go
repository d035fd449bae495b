package toolcall

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/structured"
)

var testTools = []Tool{
	{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"enum":["Paris","Rome"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`)},
	{Name: "now", Parameters: nil},
}

// walk samples a random output under spec over a vocabulary of single bytes plus a few
// longer tokens (the markers among them); the last id is end-of-sequence.
func walk(t *testing.T, spec *structured.Spec, r *rand.Rand, markers []string) (string, bool) {
	var v structured.Vocab
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, []byte{byte(b)})
	}
	for _, m := range append(markers, `{"name": `, `"arguments": `, "Paris", "</tool_call>") {
		v.Tokens = append(v.Tokens, []byte(m))
	}
	eos := len(v.Tokens)
	v.Tokens = append(v.Tokens, nil)
	v.EOS = []int{eos}
	c, err := structured.NewCompiler(structured.NewIndex(v)).Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	m := c.NewMatcher()
	mask := make([]uint64, (len(v.Tokens)+63)/64)
	var out strings.Builder
	for step := 0; step < 400; step++ {
		m.Mask(mask)
		var allowed []int
		for id := range v.Tokens {
			if mask[id>>6]&(1<<(id&63)) != 0 {
				allowed = append(allowed, id)
			}
		}
		if len(allowed) == 0 {
			t.Fatalf("empty mask after %q", out.String())
		}
		tok := allowed[r.IntN(len(allowed))]
		for _, id := range allowed {
			if id == eos && r.IntN(3) == 0 {
				tok = eos
			}
		}
		if err := m.Accept(tok, v.Tokens[tok]); err != nil {
			t.Fatal(err)
		}
		if tok == eos {
			return out.String(), true
		}
		out.Write(v.Tokens[tok])
		if m.MustEnd() {
			return out.String(), true
		}
	}
	return out.String(), false
}

// TestForcedAlwaysParses: under the constraint of tool_choice required, random outputs are
// always calls that parse, with a known name and JSON arguments, for every family.
func TestForcedAlwaysParses(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, fam := range []string{Hermes, Llama3JSON, Mistral, Generic} {
		for _, special := range []bool{false, true} {
			spec, err := Forced(fam, testTools, true, special)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 30; i++ {
				out, ended := walk(t, spec, r, []string{Marker(fam)})
				if !ended {
					continue // cut by the walk's step limit
				}
				content, calls, ok := Parse(fam, out, Options{Forced: true})
				if !ok || strings.TrimSpace(content) != "" {
					t.Fatalf("%s special=%v: %q does not parse (%q %v)", fam, special, out, content, calls)
				}
				for _, c := range calls {
					if c.Name != "get_weather" && c.Name != "now" || !json.Valid([]byte(c.Arguments)) {
						t.Fatalf("%s: call %+v in %q", fam, c, out)
					}
				}
			}
		}
	}
}

// TestAutoTriggers: under tool_choice auto, text is free until the marker, after which a whole
// call follows.
func TestAutoTriggers(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, fam := range []string{Hermes, Mistral, Generic} {
		spec, err := Auto(fam, testTools, false)
		if err != nil || spec == nil {
			t.Fatal(err)
		}
		calls := 0
		for i := 0; i < 200; i++ {
			out, ended := walk(t, spec, r, []string{Marker(fam), Marker(fam), Marker(fam)})
			if !strings.Contains(out, Marker(fam)) {
				continue
			}
			_, cs, ok := Parse(fam, out, Options{})
			if !ok {
				// Only a call cut by the walk's step limit may fail to parse.
				if ended {
					t.Fatalf("%s: %q does not parse", fam, out)
				}
				continue
			}
			calls += len(cs)
		}
		if calls == 0 {
			t.Fatalf("%s: no walk made a call", fam)
		}
	}
	if s, err := Auto(Llama3JSON, testTools, false); s != nil || err != nil {
		t.Fatal("llama3_json auto has no constraint")
	}
}

// TestForcedEndsAfterNewline: with several calls allowed, a model that writes the newline a
// hermes call is usually followed by may still end there, or go on with another call; after
// the newline nothing but a call or the end is allowed.
func TestForcedEndsAfterNewline(t *testing.T) {
	var v structured.Vocab
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, []byte{byte(b)})
	}
	eos := len(v.Tokens)
	v.Tokens = append(v.Tokens, nil)
	v.EOS = []int{eos}
	for _, fam := range []string{Hermes, Generic} {
		spec, err := Forced(fam, testTools, true, false)
		if err != nil {
			t.Fatal(err)
		}
		c, err := structured.NewCompiler(structured.NewIndex(v)).Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		m := c.NewMatcher()
		mask := make([]uint64, (len(v.Tokens)+63)/64)
		allowed := func(id int) bool { m.Mask(mask); return mask[id>>6]&(1<<(id&63)) != 0 }
		text := "<tool_call>\n" + `{"name": "now", "arguments": {}}` + "\n</tool_call>"
		for i := 0; i < len(text); i++ {
			if err := m.Accept(int(text[i]), []byte{text[i]}); err != nil {
				t.Fatalf("%s: %q refused at %d: %v", fam, text, i, err)
			}
		}
		if !allowed(eos) || !allowed('\n') {
			t.Fatalf("%s: after a call, the end and a newline must be allowed", fam)
		}
		if err := m.Accept('\n', []byte("\n")); err != nil {
			t.Fatal(err)
		}
		if !allowed(eos) || !allowed('<') || allowed('x') || allowed(' ') {
			t.Fatalf("%s: after the newline, only the end or another call", fam)
		}
	}
}

// TestAutoOrCallsOrAnswer: tool_choice auto beside a JSON format: random outputs under the
// constraint are either calls that parse or an answer matching the format, never both and
// never free text; where calls could not be told from the answer, there is no such constraint.
func TestAutoOrCallsOrAnswer(t *testing.T) {
	answer := json.RawMessage(`{"type":"object","properties":{"city":{"enum":["Paris","Rome"]}},"required":["city"],"additionalProperties":false}`)
	r := rand.New(rand.NewPCG(7, 8))
	for _, fam := range []string{Hermes, Generic, Mistral} {
		spec, err := AutoOr(fam, testTools, true, false, answer)
		if err != nil || spec == nil {
			t.Fatal(fam, err)
		}
		seen := map[bool]int{}
		for i := 0; i < 120; i++ {
			out, ended := walk(t, spec, r, []string{Marker(fam), `{"city": `})
			if !ended {
				continue
			}
			content, calls, ok := Parse(fam, out, Options{})
			if ok {
				if strings.TrimSpace(content) != "" || len(calls) == 0 {
					t.Fatalf("%s: %q read as %q %v", fam, out, content, calls)
				}
				seen[true]++
				continue
			}
			var a struct {
				City string `json:"city"`
			}
			dec := json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&a); err != nil || (a.City != "Paris" && a.City != "Rome") || dec.More() {
				t.Fatalf("%s: %q is neither calls nor the answer (%v)", fam, out, err)
			}
			seen[false]++
		}
		if seen[true] == 0 || seen[false] == 0 {
			t.Fatalf("%s: calls %d, answers %d: both must be possible", fam, seen[true], seen[false])
		}
	}
	for _, c := range []struct {
		fam     string
		special bool
	}{{Llama3JSON, false}, {Hermes, true}, {None, false}} {
		if s, err := AutoOr(c.fam, testTools, true, c.special, answer); s != nil || err != nil {
			t.Errorf("%s special=%v: %v %v, want no constraint", c.fam, c.special, s, err)
		}
	}
}

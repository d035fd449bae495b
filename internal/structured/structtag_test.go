package structured

import (
	"bytes"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/apierror"
)

const weatherTag = `{"structures":[
 {"begin":"<function=get_weather>","schema":{"type":"object","properties":{"city":{"type":"string","maxLength":6},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"]},"end":"</function>"},
 {"begin":"<function=get_time>","schema":{"type":"object","properties":{"tz":{"enum":["UTC","CET"]}},"required":["tz"],"additionalProperties":false},"end":"</function>"},
 {"begin":"<tool>","schema":{"$defs":{"l":{"type":"array","items":{"$ref":"#/$defs/l"},"maxItems":2}},"$ref":"#/$defs/l"},"end":"</tool>"}],
 "triggers":["<function=","<tool>"]}`

// tagVocab: single bytes plus the pieces of the tags (so tokens span the trigger, the begin,
// the JSON and the end) and an EOS.
func tagVocab() Vocab {
	v := testVocab()
	toks := v.Tokens[:len(v.Tokens)-1]
	for _, s := range []string{"<function=", "get_weather>", "get_time>", "</function>", "<tool>", "</tool>", "<func", "tion=get", `{"city": "`, `"}</function>`, "]</tool>", "hello ", "<", "=<"} {
		toks = append(toks, []byte(s))
	}
	toks = append(toks, nil)
	return Vocab{Tokens: toks, EOS: []int{len(toks) - 1}}
}

// checkTagged parses out as free text with tagged sections: every trigger occurrence must
// open one of the structures, whose content must be JSON valid against its schema, then its
// end. It returns how many sections it saw.
func checkTagged(t *testing.T, out string) int {
	t.Helper()
	var st StructuralTag
	if err := json.Unmarshal([]byte(weatherTag), &st); err != nil {
		t.Fatal(err)
	}
	n := 0
	rest := out
	for {
		at, trig := -1, ""
		for _, tr := range st.Triggers {
			if i := strings.Index(rest, tr); i >= 0 && (at < 0 || i < at) {
				at, trig = i, tr
			}
		}
		if at < 0 {
			return n
		}
		rest = rest[at:]
		matched := false
		for _, s := range st.Structures {
			if !strings.HasPrefix(s.Begin, trig) || !strings.HasPrefix(rest, s.Begin) {
				continue
			}
			body := rest[len(s.Begin):]
			dec := json.NewDecoder(strings.NewReader(body))
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatalf("%q: content after %q is not JSON: %v", out, s.Begin, err)
			}
			after := strings.TrimLeft(body[dec.InputOffset():], " \t\n")
			if !strings.HasPrefix(after, s.End) {
				t.Fatalf("%q: %q content not followed by %q", out, s.Begin, s.End)
			}
			sch := compileSchema(t, string(s.Schema))
			inst, _ := jsonschemaUnmarshal(string(raw))
			if err := sch.Validate(inst); err != nil {
				t.Fatalf("%q: content %s does not validate: %v", out, raw, err)
			}
			rest = after[len(s.End):]
			matched, n = true, n+1
			break
		}
		if !matched {
			t.Fatalf("%q: trigger %q at %q opens no structure", out, trig, rest)
		}
	}
}

// TestStructuralTag: random walks through a structural tag's masks (biased towards the
// tag pieces) give free text whose tagged sections all validate, the mask never empties, and
// tagged sections do occur.
func TestStructuralTag(t *testing.T) {
	v := tagVocab()
	spec, err := FromRequest(json.RawMessage(`{"structural_tag":`+strconvQuote(weatherTag)+`}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCompiler(NewIndex(v)).Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 11))
	sections := 0
	mask := make([]uint64, c.ix.Words())
	for walk := 0; walk < 300; walk++ {
		m := c.NewMatcher()
		var out []byte
		for step := 0; ; step++ {
			if step > 400 {
				t.Fatalf("no end: %q", out)
			}
			m.Mask(mask)
			var allowed, long []int
			for w, word := range mask {
				for word != 0 {
					b := bits.TrailingZeros64(word)
					id := w*64 + b
					allowed = append(allowed, id)
					if len(v.Tokens[id]) > 2 {
						long = append(long, id)
					}
					word &^= 1 << b
				}
			}
			if len(allowed) == 0 {
				t.Fatalf("mask empty after %q", out)
			}
			pick := allowed[rng.IntN(len(allowed))]
			if len(long) > 0 && rng.IntN(2) == 0 {
				pick = long[rng.IntN(len(long))]
			}
			if step > 20 && rng.IntN(3) > 0 {
				for _, closer := range []string{"</function>", "</tool>", `"`, "}", "]"} {
					if id := tokenID(v, closer); id >= 0 && mask[id>>6]&(1<<(id&63)) != 0 {
						pick = id
						break
					}
				}
			}
			eos := v.EOS[0]
			if mask[eos>>6]&(1<<(eos&63)) != 0 && rng.Float64() < float64(step)/80 {
				pick = eos
			}
			if err := m.Accept(pick, v.Tokens[pick]); err != nil {
				t.Fatalf("after %q: %v", out, err)
			}
			if pick == eos {
				break
			}
			out = append(out, v.Tokens[pick]...)
		}
		sections += checkTagged(t, string(out))
	}
	if sections < 30 {
		t.Fatalf("only %d tagged sections in 300 walks", sections)
	}
	// Direct checks.
	p := c.pda
	for _, good := range []string{"", "plain text < = >", `hi <function=get_weather>{"city": "Oslo"}</function> bye`, `<tool>[[],[[]]]</tool><tool>[]</tool>`, "<func"} {
		if !p.MatchString(good) {
			t.Errorf("rejected %q", good)
		}
	}
	for _, bad := range []string{`<function=get_date>{}</function>`, `<function=get_time>{"tz":"PST"}</function>`, `<tool>[[],[],[]]</tool>`, `<function=get_weather>{"city":"Oslo"}`} {
		if p.MatchString(bad) {
			t.Errorf("accepted %q", bad)
		}
	}
}

func tokenID(v Vocab, s string) int {
	for id, tok := range v.Tokens {
		if bytes.Equal(tok, []byte(s)) {
			return id
		}
	}
	return -1
}

// TestStructuralTagMaskExact: the structural tag's masks equal the brute-force ones.
func TestStructuralTagMaskExact(t *testing.T) {
	v := tagVocab()
	ix := NewIndex(v)
	spec, err := FromRequest(nil, json.RawMessage(`{"type":"structural_tag",`+weatherTag[1:]))
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCompiler(ix).Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(12, 12))
	for walk := 0; walk < 40; walk++ {
		m := c.NewMatcher()
		for step := 0; step < 30; step++ {
			got := make([]uint64, ix.Words())
			m.Mask(got)
			var allowed []int
			for id, tok := range v.Tokens {
				ok := m.Accepting()
				if len(tok) > 0 {
					st := m.state
					for _, b := range tok {
						if st = c.pda.Step(st, b); st == dead {
							break
						}
					}
					ok = st != dead
					if ok {
						allowed = append(allowed, id)
					}
				}
				if has := got[id>>6]&(1<<(id&63)) != 0; has != ok {
					t.Fatalf("step %d token %q: mask %v, brute force %v", step, tok, has, ok)
				}
			}
			if len(allowed) == 0 {
				break
			}
			pick := allowed[rng.IntN(len(allowed))]
			if step%3 == 0 {
				if id := tokenID(v, "<function="); slicesContains(allowed, id) {
					pick = id
				}
			}
			if err := m.Accept(pick, v.Tokens[pick]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func slicesContains(s []int, x int) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// TestStructuralTagErrors: malformed tags are 400s naming the field.
func TestStructuralTagErrors(t *testing.T) {
	for _, c := range []struct{ so, rf, param, msg string }{
		{`{"structural_tag":"{\"structures\":[],\"triggers\":[\"<a\"]}"}`, ``, "structured_outputs.structural_tag.structures", "at least one structure"},
		{`{"structural_tag":{"structures":[{"begin":"<a>","end":"</a>"}],"triggers":[]}}`, ``, "structured_outputs.structural_tag.triggers", "at least one trigger"},
		{`{"structural_tag":{"structures":[{"begin":"<b>","end":"</b>"}],"triggers":["<a"]}}`, ``, "structured_outputs.structural_tag.triggers[0]", "begins none"},
		{`{"structural_tag":{"structures":[{"begin":"<a>","end":"</a>"},{"begin":"x","end":"y"}],"triggers":["<a"]}}`, ``, "structured_outputs.structural_tag.structures[1].begin", "starts with none"},
		{`{"structural_tag":{"structures":[{"begin":"<a>","end":"</a>"}],"triggers":[""]}}`, ``, "structured_outputs.structural_tag.triggers[0]", "cannot be empty"},
		{`{"structural_tag":{"format":{"type":"any_text"}}}`, ``, "structured_outputs.structural_tag.format", "not supported"},
		{`{"structural_tag":"not json"}`, ``, "structured_outputs.structural_tag", "JSON object"},
		{`{"structural_tag":{"structures":[{"begin":"<a>","schema":{"type":"number","multipleOf":2},"end":"</a>"}],"triggers":["<a"]}}`, ``, "structured_outputs.structural_tag", "structures[0].schema: multipleOf"},
		{``, `{"type":"structural_tag","structures":[{"begin":"<a>","end":"</a>"}],"triggers":["<b"]}`, "response_format.triggers[0]", "begins none"},
		{`{"structural_tag":{"structures":[{"begin":"<a>","end":"</a>"}],"triggers":["<a"]},"regex":"x"}`, ``, "structured_outputs", "only use one kind"},
	} {
		var so, rf json.RawMessage
		if c.so != "" {
			so = json.RawMessage(c.so)
		}
		if c.rf != "" {
			rf = json.RawMessage(c.rf)
		}
		_, err := FromRequest(so, rf)
		ae, ok := apierror.As(err) // a fault, as the HTTP edge maps it
		if !ok || ae.Param != c.param || !strings.Contains(ae.Message, c.msg) {
			t.Errorf("%s %s: %v", c.so, c.rf, err)
		}
	}
}

// FuzzStructuralTag: the structural tag parser never panics, and every tag it accepts
// compiles to a pushdown automaton whose start configuration is live.
func FuzzStructuralTag(f *testing.F) {
	f.Add([]byte(weatherTag))
	f.Add([]byte(`{"structures":[{"begin":"<a>","schema":{"type":"integer"},"end":"</a>"}],"triggers":["<a"]}`))
	f.Add([]byte(`{"structures":[{"begin":"x","end":"y"}],"triggers":["x","x"]}`))
	f.Add([]byte(`{"format":{"type":"triggered_tags"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 2000 {
			return
		}
		st, _, err := parseStructuralTag(data)
		if err != nil {
			return
		}
		rs, err := st.rules(SchemaOptions{})
		if err != nil {
			return
		}
		_, p, err := compileRules(rs)
		if err != nil {
			if bytes.Contains(data, []byte("pattern")) || strings.Contains(err.Error(), "can never end") || strings.Contains(err.Error(), "left-recursive") {
				return // a schema pattern that regexp/syntax refuses; a schema like {"$ref": "#"}
			}
			t.Fatalf("tag %s gave rules that do not compile: %v", data, err)
		}
		if p == nil {
			t.Fatalf("tag %s compiled without a pushdown automaton", data)
		}
	})
}

package structured

import (
	"bytes"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/honeai/hone/internal/apierror"
)

// testVocab: every single byte, common multi-byte pieces (so tokens span several JSON
// terminals, e.g. `":"` or `},{`), a few UTF-8 characters and an EOS token with no bytes.
func testVocab() Vocab {
	var toks [][]byte
	for b := 0; b < 256; b++ {
		toks = append(toks, []byte{byte(b)})
	}
	for _, s := range []string{`{"`, `":`, `": `, `", "`, `"}`, `},{`, `[{`, `}]`, `true`, `false`, `null`, `12`, `345`, `.5`, `e+`, `name`, `age`, `tags`, `"a`, `b"`, `ab`, `  `, "\n", `é`, `日本`, `"x":1,`, `0,`, `-1`, `]}`, `,"`, `": "`, `id`, `ok`} {
		toks = append(toks, []byte(s))
	}
	toks = append(toks, nil) // EOS
	return Vocab{Tokens: toks, EOS: []int{len(toks) - 1}}
}

// generate walks the constraint with random choices among allowed tokens, ending with EOS
// (more likely as the output grows). It fails the test if the mask is ever empty.
func generate(t *testing.T, c *Constraint, v Vocab, rng *rand.Rand) string {
	t.Helper()
	m := c.NewMatcher()
	mask := make([]uint64, c.ix.Words())
	var out []byte
	var finish []byte // the rest of a path to the end, once the walk heads there
	for step := 0; step < 600; step++ {
		m.Mask(mask)
		var allowed []int
		for w, word := range mask {
			for word != 0 {
				b := bits.TrailingZeros64(word)
				allowed = append(allowed, w*64+b)
				word &^= 1 << b
			}
		}
		if len(allowed) == 0 {
			t.Fatalf("mask empty after %q (accepting %v)", out, m.Accepting())
		}
		eos := v.EOS[0]
		pick := allowed[rng.IntN(len(allowed))]
		canEnd := false
		for _, a := range allowed {
			canEnd = canEnd || a == eos
		}
		// As the output grows, prefer tokens that close strings, arrays and objects, so
		// that walks end.
		if step > 30 && rng.Float64() < 0.7 {
			for _, closer := range []byte{'"', '}', ']'} {
				if id := int(closer); mask[id>>6]&(1<<(id&63)) != 0 {
					pick = id
					break
				}
			}
		}
		if canEnd && (rng.Float64() < float64(step)/60 || len(allowed) == 1) {
			pick = eos
		}
		// Past 200 tokens, head for the end: the first byte of a shortest byte path to an
		// accepting state (the mask must allow it, since every byte token is in the vocabulary).
		if step > 200 && pick != eos {
			if finish == nil {
				var ok bool
				if finish, ok = pathToEnd(c, m.state); !ok {
					t.Fatalf("after %q: no path to the end", out)
				}
			}
			if len(finish) == 0 {
				pick = eos
			} else {
				if mask[int(finish[0])>>6]&(1<<(finish[0]&63)) == 0 {
					t.Fatalf("after %q: byte %q leads to the end but is masked", out, finish[0])
				}
				pick, finish = int(finish[0]), finish[1:]
			}
		}
		if err := m.Accept(pick, v.Tokens[pick]); err != nil {
			t.Fatalf("accepting an allowed token: %v", err)
		}
		if pick == eos {
			return string(out)
		}
		out = append(out, v.Tokens[pick]...)
	}
	t.Fatalf("no end after 600 tokens: %q", out)
	return ""
}

// pathToEnd is a shortest byte string from state s to an accepting state, breadth first
// over at most 50000 states, stepping by ASCII bytes, continuation bytes and a few whole
// multi-byte characters (not every lead byte: states inside a character can be one per
// pending byte sequence).
func pathToEnd(c *Constraint, s int) ([]byte, bool) {
	type node struct {
		state, prev int
		unit        string
	}
	var units []string
	for b := 0; b < 0xC0; b++ { // ASCII, and continuation bytes to finish a pending character
		units = append(units, string([]byte{byte(b)}))
	}
	units = append(units, "é", "ë", "日", "本", "\U0001F600")
	nodes := []node{{state: s, prev: -1}}
	seen := map[int]bool{s: true}
	for i := 0; i < len(nodes) && i < 50000; i++ {
		if c.accepting(nodes[i].state) {
			var path []byte
			for j := i; nodes[j].prev >= 0; j = nodes[j].prev {
				path = append([]byte(nodes[j].unit), path...)
			}
			return path, true
		}
	next:
		for _, u := range units {
			n := nodes[i].state
			for _, b := range []byte(u) {
				if n = c.step(n, b); n == dead {
					continue next
				}
			}
			if !seen[n] {
				seen[n] = true
				nodes = append(nodes, node{state: n, prev: i, unit: u})
			}
		}
	}
	return nil, false
}

var schemas = []string{
	`{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"]}`,
	`{"type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array","items":{"type":"string","enum":["a","b","c"]},"minItems":1,"maxItems":3},"ok":{"type":"boolean"}},"required":["id"]}`,
	`{"type":"array","items":{"type":"number"},"maxItems":4}`,
	`{"anyOf":[{"type":"string","format":"date"},{"type":"null"},{"const":{"x":1}}]}`,
	`{"$defs":{"p":{"type":"object","properties":{"x":{"type":["integer","null"]}},"required":["x"],"additionalProperties":false}},"type":"object","properties":{"a":{"$ref":"#/$defs/p"},"b":{"$ref":"#/$defs/p"}},"required":["b"]}`,
	`{"type":"object","properties":{"k":{"type":"string","pattern":"^[a-z]{2,4}$"}},"required":["k"],"additionalProperties":{"type":"integer"}}`,
	`{"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}],"items":false}`,
	`{"type":"object"}`,
	`{"type":"string","minLength":2,"maxLength":5}`,
	`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":9},"next":{"$ref":"#/$defs/node"}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
	`{"$defs":{"t":{"anyOf":[{"type":"integer","minimum":0,"maximum":3},{"type":"array","items":{"$ref":"#/$defs/t"},"maxItems":2}]}},"$ref":"#/$defs/t"}`,
}

// TestSchemasGenerateValidJSON: for each schema, random walks through the masks always end in
// JSON that a JSON Schema validator accepts, and the mask never empties before the end.
func TestSchemasGenerateValidJSON(t *testing.T) {
	v := testVocab()
	ix := NewIndex(v)
	comp := NewCompiler(ix)
	for si, src := range schemas {
		for _, noWS := range []bool{false, true} {
			spec := &Spec{Kind: "json", Schema: json.RawMessage(src), Options: SchemaOptions{NoWhitespace: noWS}}
			c, err := comp.Compile(spec)
			if err != nil {
				t.Fatalf("schema %d: %v", si, err)
			}
			sch := compileSchema(t, src)
			rng := rand.New(rand.NewPCG(uint64(si), 7))
			for i := 0; i < 60; i++ {
				out := generate(t, c, v, rng)
				var doc any
				if err := json.Unmarshal([]byte(out), &doc); err != nil {
					t.Fatalf("schema %d: output %q is not JSON: %v", si, out, err)
				}
				inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(out))
				if err := sch.Validate(inst); err != nil {
					t.Fatalf("schema %d: output %q does not validate: %v", si, out, err)
				}
				if noWS && strings.ContainsAny(out, " \n\t") && !strings.Contains(out, `"`) {
					t.Fatalf("whitespace despite disable_any_whitespace: %q", out)
				}
			}
		}
	}
}

func compileSchema(t *testing.T, src string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRegexAndChoiceOutputs: random walks match the regex fully / are one of the choices.
func TestRegexAndChoiceOutputs(t *testing.T) {
	v := testVocab()
	comp := NewCompiler(NewIndex(v))
	rng := rand.New(rand.NewPCG(3, 3))
	for _, expr := range []string{`[a-c]{3,6}`, `\d+(\.\d{1,2})?`, `(yes|no|maybe)!`, `é+日本`, `"[^"]{0,5}"`} {
		c, err := comp.Compile(&Spec{Kind: "regex", Regex: expr})
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`^(?:` + expr + `)$`)
		for i := 0; i < 100; i++ {
			if out := generate(t, c, v, rng); !re.MatchString(out) {
				t.Fatalf("%s: %q", expr, out)
			}
		}
	}
	choices := []string{"red", "green", "blue ø", "a.b"}
	c, _ := comp.Compile(&Spec{Kind: "choice", Choices: choices})
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		out := generate(t, c, v, rng)
		ok := false
		for _, ch := range choices {
			ok = ok || out == ch
		}
		if !ok {
			t.Fatalf("choice output %q", out)
		}
		seen[out] = true
	}
	if len(seen) != len(choices) {
		t.Fatalf("choices seen %v", seen)
	}
}

func TestFromRequest(t *testing.T) {
	ok := []struct{ so, rf, kind string }{
		{`{"json":{"type":"object","properties":{"a":{"type":"integer"}}}}`, ``, "json"},
		{`{"regex":"\\d+"}`, ``, "regex"},
		{`{"choice":["a","b"],"_backend":"hone"}`, ``, "choice"},
		{`{"json_object":true,"disable_any_whitespace":true}`, ``, "json_object"},
		{``, `{"type":"json_object"}`, "json_object"},
		{``, `{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string"},"strict":true}}`, "json"},
		{`{"json":"{\"type\":\"integer\"}"}`, ``, "json"},
	}
	for _, c := range ok {
		s, err := FromRequest(json.RawMessage(c.so), json.RawMessage(c.rf))
		if err != nil || s == nil || s.Kind != c.kind {
			t.Errorf("%s %s: %+v %v", c.so, c.rf, s, err)
		}
	}
	if s, err := FromRequest(nil, json.RawMessage(`{"type":"text"}`)); s != nil || err != nil {
		t.Errorf("text: %v %v", s, err)
	}
	bad := []struct{ so, rf, param, msg string }{
		{`{"regex":"a","choice":["b"]}`, ``, "structured_outputs", "only use one kind"},
		{`{"disable_any_whitespace":true}`, ``, "structured_outputs", "must use one kind"},
		{`{"regex":5}`, ``, "structured_outputs.regex", "must be a string"},
		{`{"choice":[]}`, ``, "structured_outputs.choice", "Choice '[]' cannot be an empty list"},
		{`{"grammar":""}`, ``, "structured_outputs.grammar", "cannot be an empty string"},
		{`{"regex":"a","_backend":"xgrammar"}`, ``, "structured_outputs._backend", "Request-level structured output backend selection is not supported"},
		{``, `{"type":"json_schema"}`, "response_format.json_schema", "the 'json_schema' field must be provided"},
		{`{"json":{"type":"object","properties":{"a":{"type":"integer","multipleOf":3}},"allOf":[]}}`, ``, "structured_outputs.json", "multipleOf at /properties/a"},
		{`{"json":{"type":"object","properties":{"e":{"type":"string","format":"email","maxLength":12}}}}`, ``, "structured_outputs.json", "format with maxLength at /properties/e"},
		{``, `{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","format":"uuid","pattern":"a+"}}}`, "response_format.json_schema.schema", "format with pattern at (root)"},
		{`{"regex":"(a"}`, ``, "structured_outputs.regex", "Failed to transform regex"},
		{`{"regex":"a"}`, `{"type":"json_object"}`, "structured_outputs", "both give one"},
	}
	for _, c := range bad {
		_, err := FromRequest(json.RawMessage(c.so), json.RawMessage(c.rf))
		ae, ok := apierror.As(err) // a fault, as the HTTP edge maps it
		if !ok || ae.Status != 400 || ae.Param != c.param || !strings.Contains(ae.Message, c.msg) {
			t.Errorf("%s %s: %v (%+v)", c.so, c.rf, err, ae)
		}
	}
}

// FuzzSchemaRegex: any schema either compiles to a regex the DFA builder takes or gives an
// error; nothing panics.
func FuzzSchemaRules(f *testing.F) {
	for _, s := range schemas {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"type":["string","integer"],"enum":[1,"a"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) || len(data) > 2000 {
			return
		}
		rs, err := SchemaRules(data, SchemaOptions{})
		if err != nil {
			return
		}
		if _, _, err := compileRules(rs); err != nil && !bytes.Contains(data, []byte("pattern")) {
			t.Fatalf("schema %s gave rules that do not compile: %v", data, err)
		}
	})
}

// FuzzRegexDFA: the DFA agrees with Go's regexp on any compilable expression and UTF-8 input.
func FuzzRegexDFA(f *testing.F) {
	f.Add(`a+b?`, "aab")
	f.Add(`[^x]{2}`, "é")
	f.Fuzz(func(t *testing.T, expr, input string) {
		if len(expr) > 40 || len(input) > 40 || !utf8.ValidString(input) {
			return // outputs are UTF-8: the DFA refuses invalid bytes, which regexp reads as U+FFFD
		}
		d, err := CompileRegex(expr)
		if err != nil {
			return
		}
		re, err := regexp.Compile(`^(?:` + expr + `)$`)
		if err != nil {
			return
		}
		if got, want := d.MatchString(input), re.MatchString(input); got != want {
			t.Fatalf("%q on %q: dfa %v, regexp %v", expr, input, got, want)
		}
	})
}

// FuzzGrammar: the grammar compiler never panics, and whatever it accepts compiles to an
// automaton.
func FuzzGrammar(f *testing.F) {
	f.Add("root ::= \"a\" [b-c]* (\"d\" | e)\ne ::= \"e\"{1,3}")
	f.Add("start: x+\nx: /[0-9]/ | \"-\"")
	f.Add("root ::= root")
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 500 {
			return
		}
		rs, err := GrammarRules(src)
		if err != nil {
			return
		}
		d, p, err := compileRules(rs)
		if err != nil {
			t.Fatalf("grammar %q gave rules %q that do not compile: %v", src, rs.Rules, err)
		}
		// The start configuration is live: some byte continues it or it accepts.
		live := false
		for b := 0; b < 256 && !live; b++ {
			if p != nil {
				live = p.Step(0, byte(b)) != dead || p.Accepting(0)
			} else {
				live = d.Step(0, byte(b)) != dead || d.Accepting(0)
			}
		}
		if !live {
			t.Fatalf("grammar %q: start state is dead", src)
		}
	})
}

// TestRecursionWithWhitespace: a recursive grammar with whitespace around the recursion never
// leads into a dead end at the recursion limit.
func TestRecursionWithWhitespace(t *testing.T) {
	v := testVocab()
	spec, err := FromRequest(json.RawMessage(`{"grammar":`+strconvQuote("root ::= \"[\" ws (root (\",\" ws root)*)? ws \"]\" | \"1\"\nws ::= [ ]*\n")+`}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewCompiler(NewIndex(v)).Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 8))
	for i := 0; i < 200; i++ {
		out := generate(t, k, v, rng)
		var x any
		if err := json.Unmarshal([]byte(out), &x); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
	}
}

// TestGrammars: regular GBNF and Lark grammars become constraints whose outputs match the
// equivalent regex; recursive rules run on the pushdown automaton (balanced output at any
// depth); bad grammars are refused with a reason.
func TestGrammars(t *testing.T) {
	v := testVocab()
	comp := NewCompiler(NewIndex(v))
	rng := rand.New(rand.NewPCG(5, 5))
	cases := []struct{ src, equiv string }{
		{"root ::= answer \".\"\nanswer ::= \"yes\" | \"no\" # a comment\n", `(?:yes|no)\.`},
		{"root ::= num (\",\" ws num){0,3}\nnum ::= [1-9] [0-9]*\nws ::= [ ]?\n", `[1-9][0-9]*(?:, ?[1-9][0-9]*){0,3}`},
		{"root ::= \"é\" [a-c]+ \"\\n\"?", `é[a-c]+\n?`},
		{"start: greeting name\ngreeting: \"hi \" | \"hello \"\nname: /[A-Z][a-z]{1,5}/ // Lark\n", `(?:hi |hello )[A-Z][a-z]{1,5}`},
	}
	for _, c := range cases {
		spec, err := FromRequest(json.RawMessage(`{"grammar":`+strconvQuote(c.src)+`}`), nil)
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		k, err := comp.Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`^(?:` + c.equiv + `)$`)
		for i := 0; i < 80; i++ {
			if out := generate(t, k, v, rng); !re.MatchString(out) {
				t.Fatalf("%q produced %q", c.src, out)
			}
		}
	}
	spec, err := FromRequest(json.RawMessage(`{"grammar":`+strconvQuote("root ::= \"(\" root \")\" | \"x\"")+`}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := comp.Compile(spec)
	depths := map[int]bool{}
	for i := 0; i < 200; i++ {
		out := generate(t, k, v, rng)
		d := strings.Count(out, "(")
		if out != strings.Repeat("(", d)+"x"+strings.Repeat(")", d) {
			t.Fatalf("recursive grammar produced %q", out)
		}
		depths[d] = true
	}
	if len(depths) < 2 {
		t.Fatalf("only depths %v", depths)
	}
	for _, bad := range []struct{ src, msg string }{
		{"root ::= missing", "not defined"},
		{"other ::= \"x\"", `no "root" rule`},
		{"root ::= \"unclosed", "unclosed string"},
		{"start: a\n%import common.WS\na: \"x\"", "directives"},
		{"root ::= root \"x\" | \"y\"", "left-recursive"},
		{"root ::= a\na ::= b? \"x\"\nb ::= \"\" | a \"y\"", "left-recursive"},
		{"root ::= \"(\" root \")\"", "never end"},
	} {
		_, err := FromRequest(json.RawMessage(`{"grammar":`+strconvQuote(bad.src)+`}`), nil)
		ae, ok := apierror.As(err) // a fault, as the HTTP edge maps it
		if !ok || ae.Param != "structured_outputs.grammar" || !strings.Contains(ae.Message, bad.msg) {
			t.Errorf("%q: %v", bad.src, err)
		}
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

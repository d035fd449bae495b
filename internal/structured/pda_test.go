package structured

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// dyck reports whether s is a well-nested word over ()[] with letters a inside.
func dyck(s string) bool {
	var st []byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '(', '[':
			st = append(st, c)
		case ')', ']':
			open := byte('(')
			if c == ']' {
				open = '['
			}
			if len(st) == 0 || st[len(st)-1] != open {
				return false
			}
			st = st[:len(st)-1]
		case 'a':
		default:
			return false
		}
	}
	return len(st) == 0
}

// TestPDAMatchesDyck: the pushdown automaton of a recursive grammar accepts exactly the
// well-nested words, checked against a stack recognizer on random strings (deep ones too).
func TestPDAMatchesDyck(t *testing.T) {
	rs, err := GrammarRules("root ::= item*\nitem ::= \"a\" | \"(\" root \")\" | \"[\" root \"]\"")
	if err != nil {
		t.Fatal(err)
	}
	_, p, err := compileRules(rs)
	if err != nil || p == nil {
		t.Fatalf("%v %v", p, err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	yes := 0
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		if i%2 == 0 { // a random well-nested word, up to depth 40
			var gen func(d int)
			gen = func(d int) {
				for n := rng.IntN(3); n > 0; n-- {
					switch k := rng.IntN(3); {
					case k == 0 || d > 40:
						b.WriteByte('a')
					case k == 1:
						b.WriteByte('(')
						gen(d + 1)
						b.WriteByte(')')
					default:
						b.WriteByte('[')
						gen(d + 1)
						b.WriteByte(']')
					}
				}
			}
			gen(0)
			s := []byte(b.String())
			if i%4 == 0 && len(s) > 0 { // mutate one byte
				s[rng.IntN(len(s))] = "()[]ax"[rng.IntN(6)]
			}
			b.Reset()
			b.Write(s)
		} else {
			for n := rng.IntN(12); n > 0; n-- {
				b.WriteByte("()[]a"[rng.IntN(5)])
			}
		}
		s := b.String()
		want := dyck(s)
		if want {
			yes++
		}
		if got := p.MatchString(s); got != want {
			t.Fatalf("%q: pda %v, recognizer %v", s, got, want)
		}
	}
	if yes < 5000 {
		t.Fatalf("only %d accepted words", yes)
	}
}

// TestPDAJSONGrammar: a recursive JSON grammar generates JSON at depths a bounded unrolling
// could not reach, and its masks never empty.
func TestPDAJSONGrammar(t *testing.T) {
	g := `root ::= value
value ::= object | array | "\"" [a-z]* "\"" | "0" | [1-9] [0-9]* | "true" | "null"
object ::= "{" ws ( "\"" [a-z]+ "\"" ws ":" ws value ( ws "," ws "\"" [a-z]+ "\"" ws ":" ws value )* )? ws "}"
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
ws ::= [ \n]?`
	v := testVocab()
	spec, err := FromRequest(json.RawMessage(`{"grammar":`+strconvQuote(g)+`}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewCompiler(NewIndex(v)).Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if k.pda == nil {
		t.Fatal("a recursive grammar should run on the pushdown automaton")
	}
	rng := rand.New(rand.NewPCG(3, 3))
	maxDepth := 0
	for i := 0; i < 300; i++ {
		out := generate(t, k, v, rng)
		var x any
		if err := json.Unmarshal([]byte(out), &x); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		d, depth := 0, 0
		for _, c := range out {
			switch c {
			case '[', '{':
				d++
				depth = max(depth, d)
			case ']', '}':
				d--
			}
		}
		maxDepth = max(maxDepth, depth)
	}
	if maxDepth <= 4 {
		t.Fatalf("deepest output nests %d levels", maxDepth)
	}
}

// TestPDAMaskExact: along random walks, the mask assembled from local masks and pop walks
// equals the brute-force one (each token's bytes stepped from the configuration).
func TestPDAMaskExact(t *testing.T) {
	v := testVocab()
	ix := NewIndex(v)
	for _, g := range []string{
		"root ::= item*\nitem ::= \"a\" | \"(\" root \")\" | \"[\" root \"]\"",
		"root ::= value\nvalue ::= \"[\" ( value (\",\" \" \"? value)* )? \"]\" | [0-9]+ | \"\\\"\" [a-z]* \"\\\"\"",
		"root ::= x \"}\"\nx ::= \"{\" x? \"\\\"\" \"\" | \"n\"",
	} {
		rs, err := GrammarRules(g)
		if err != nil {
			t.Fatal(err)
		}
		_, p, err := compileRules(rs)
		if err != nil || p == nil {
			t.Fatalf("%q: %v", g, err)
		}
		c := NewPushdownConstraint(ix, p, g)
		rng := rand.New(rand.NewPCG(4, 4))
		for walk := 0; walk < 30; walk++ {
			m := c.NewMatcher()
			for step := 0; step < 40; step++ {
				got := make([]uint64, ix.Words())
				m.Mask(got)
				want := make([]uint64, ix.Words())
				var allowed []int
				for id, tok := range v.Tokens {
					ok := false
					if len(tok) == 0 {
						ok = m.Accepting()
					} else {
						st := m.state
						for _, b := range tok {
							if st = p.Step(st, b); st == dead {
								break
							}
						}
						ok = st != dead
					}
					if ok {
						want[id>>6] |= 1 << (id & 63)
						if len(tok) > 0 {
							allowed = append(allowed, id)
						}
					}
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%q step %d: mask word %d = %x, brute force %x", g, step, i, got[i], want[i])
					}
				}
				if len(allowed) == 0 {
					break
				}
				pick := allowed[rng.IntN(len(allowed))]
				if err := m.Accept(pick, v.Tokens[pick]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestRecursiveSchemaDepth: a recursive $ref and free-form values (json_object) generate
// valid JSON nested deeper than any fixed unrolling, validated by a JSON Schema validator.
func TestRecursiveSchemaDepth(t *testing.T) {
	v := testVocab()
	comp := NewCompiler(NewIndex(v))
	for _, tc := range []struct{ src, deep, bad string }{
		{`{"$defs":{"t":{"anyOf":[{"type":"integer","minimum":0,"maximum":3},{"type":"array","items":{"$ref":"#/$defs/t"},"maxItems":2}]}},"$ref":"#/$defs/t"}`,
			`[[[[[[[[[[1],2]]]]]]]]]`, `[[[[[[[[[[1],2]]]]]]]]]]`},
		{`{"type":"object"}`, `{"a":{"a":{"a":{"a":{"a":{"a":[[[[1,{}]]]]}}}}}}`, `{"a":{"a":{"a":{"a":{"a":{"a":[[[[1,{]]]]}}}}}}`},
		{`{"type":"array","items":{"type":"object","additionalProperties":true}}`, `[{"a":{"b":{"c":{"d":{"e":[[[]]]}}}}},{}]`, `[{"a":{"b":{"c":{"d":{"e":[[[]]]}}}}},[]]`},
	} {
		src := tc.src
		c, err := comp.Compile(&Spec{Kind: "json", Schema: json.RawMessage(src), Options: SchemaOptions{NoWhitespace: true}})
		if err != nil {
			t.Fatal(err)
		}
		if c.pda == nil {
			t.Fatalf("%s: expected a pushdown automaton", src)
		}
		sch := compileSchema(t, src)
		rng := rand.New(rand.NewPCG(9, 9))
		deepest := 0
		for i := 0; i < 300; i++ {
			out := generate(t, c, v, rng)
			inst, err := jsonschemaUnmarshal(out)
			if err != nil {
				t.Fatalf("%s: %q is not JSON: %v", src, out, err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Fatalf("%s: %q does not validate: %v", src, out, err)
			}
			d, depth := 0, 0
			for _, ch := range out {
				switch ch {
				case '[', '{':
					d++
					depth = max(depth, d)
				case ']', '}':
					d--
				}
			}
			deepest = max(deepest, depth)
		}
		if deepest < 3 {
			t.Errorf("%s: deepest output nests %d levels", src, deepest)
		}
		if !c.pda.MatchString(tc.deep) || c.pda.MatchString(tc.bad) {
			t.Errorf("%s: %s accepted %v, %s accepted %v", src, tc.deep, c.pda.MatchString(tc.deep), tc.bad, c.pda.MatchString(tc.bad))
		}
	}
}

func jsonschemaUnmarshal(s string) (any, error) {
	return jsonschema.UnmarshalJSON(strings.NewReader(s))
}

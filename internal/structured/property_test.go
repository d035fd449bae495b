package structured

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// randRegex builds a random regular expression over a small alphabet with multi-byte
// characters, classes, alternations and bounded repetitions.
func randRegex(rng *rand.Rand, depth int) string {
	atoms := []string{"a", "b", "é", "日", `\d`, `[a-c]`, `[^a"]`, `"`, `\.`, "x", `[é-ë]`, `\s`}
	if depth <= 0 || rng.IntN(3) == 0 {
		return atoms[rng.IntN(len(atoms))]
	}
	switch rng.IntN(5) {
	case 0: // sequence
		n := 1 + rng.IntN(3)
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(randRegex(rng, depth-1))
		}
		return b.String()
	case 1: // alternation
		return "(?:" + randRegex(rng, depth-1) + "|" + randRegex(rng, depth-1) + ")"
	case 2:
		return "(?:" + randRegex(rng, depth-1) + ")" + []string{"?", "*", "+"}[rng.IntN(3)]
	case 3:
		lo := rng.IntN(3)
		return fmt.Sprintf("(?:%s){%d,%d}", randRegex(rng, depth-1), lo, lo+rng.IntN(3))
	}
	return "(" + randRegex(rng, depth-1) + ")"
}

// TestRandomRegexOutputs: for random regexes, random walks through the masks (many seeds)
// always end in a full match of Go's regexp, and the mask never empties before the end.
func TestRandomRegexOutputs(t *testing.T) {
	v := testVocab()
	comp := NewCompiler(NewIndex(v))
	rng := rand.New(rand.NewPCG(propSeed, 21))
	for i := 0; i < 150*propRounds; i++ {
		expr := randRegex(rng, 4)
		c, err := comp.Compile(&Spec{Kind: "regex", Regex: expr})
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		re := regexp.MustCompile(`^(?:` + expr + `)$`)
		for seed := 0; seed < 20; seed++ {
			wr := rand.New(rand.NewPCG(uint64(i), uint64(seed)))
			if out := generate(t, c, v, wr); !re.MatchString(out) {
				t.Fatalf("%s: %q does not match", expr, out)
			}
		}
	}
}

// randSchema builds a random JSON schema from the supported features.
func randSchema(rng *rand.Rand, depth int) map[string]any {
	names := []string{"a", "name", "id", "tags", "x y", "é"}
	k := rng.IntN(12)
	if depth <= 0 && k >= 8 {
		k = rng.IntN(8)
	}
	switch k {
	case 0:
		return map[string]any{"type": "string", "maxLength": rng.IntN(6)}
	case 1:
		lo := rng.IntN(20) - 10
		return map[string]any{"type": "integer", "minimum": lo, "maximum": lo + rng.IntN(30)}
	case 2:
		return map[string]any{"type": []string{"number", "null"}[:1+rng.IntN(2)]}
	case 3:
		return map[string]any{"enum": []any{"a", 1, nil, true, map[string]any{"k": []int{1}}}[:1+rng.IntN(5)]}
	case 4:
		return map[string]any{"type": []any{"boolean", "null"}}
	case 5:
		return map[string]any{"type": "string", "format": []string{"date", "time", "uuid", "email", "ipv4", "date-time"}[rng.IntN(6)]}
	case 6:
		return map[string]any{"const": []any{"c", 2.5, false, []any{1, "x"}}[rng.IntN(4)]}
	case 7:
		return map[string]any{"type": "string", "pattern": []string{"^[a-z]{1,3}$", "[0-9]+-x", "(ab|c)*"}[rng.IntN(3)]}
	case 8: // object
		props := map[string]any{}
		var req []string
		for _, n := range names {
			if rng.IntN(3) == 0 {
				props[n] = randSchema(rng, depth-1)
				if rng.IntN(2) == 0 {
					req = append(req, n)
				}
			}
		}
		s := map[string]any{"type": "object", "properties": props}
		if len(req) > 0 {
			s["required"] = req
		}
		switch rng.IntN(4) {
		case 0:
			s["additionalProperties"] = false
		case 1:
			s["additionalProperties"] = randSchema(rng, depth-1)
		case 2:
			s["additionalProperties"] = true
		}
		return s
	case 9: // array
		s := map[string]any{"type": "array", "items": randSchema(rng, depth-1)}
		lo := rng.IntN(3)
		if rng.IntN(2) == 0 {
			s["minItems"] = lo
		}
		if rng.IntN(2) == 0 {
			s["maxItems"] = lo + rng.IntN(3)
		}
		if rng.IntN(4) == 0 {
			s["prefixItems"] = []any{randSchema(rng, depth-1), randSchema(rng, depth-1)}
			if rng.IntN(2) == 0 {
				s["items"] = false
			}
			delete(s, "minItems")
			delete(s, "maxItems")
		}
		return s
	case 10:
		return map[string]any{[]string{"anyOf", "oneOf"}[rng.IntN(2)]: []any{randSchema(rng, depth-1), randSchema(rng, depth-1)}}
	}
	// A recursive definition (kept at the root): a list of itself or a leaf.
	name := fmt.Sprintf("r%d", len(defs))
	defs[name] = map[string]any{"anyOf": []any{
		randSchema(rng, 0),
		map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/" + name}, "maxItems": 2},
	}}
	return map[string]any{"$ref": "#/$defs/" + name}
}

// defs collects the random schemas' definitions.
var defs map[string]any

// TestRandomSchemaOutputs: for random schemas, random walks through the masks (many seeds)
// always end in JSON that santhosh-tekuri/jsonschema validates, with and without
// whitespace, and the mask never empties before the end. oneOf branches that overlap are
// skipped by the validator check only when both branches accept the output (oneOf is
// enforced as anyOf, as xgrammar does).
func TestRandomSchemaOutputs(t *testing.T) {
	v := testVocab()
	comp := NewCompiler(NewIndex(v))
	rng := rand.New(rand.NewPCG(propSeed, 31))
	checked := 0
	for i := 0; i < 200*propRounds; i++ {
		defs = map[string]any{}
		sm := randSchema(rng, 3)
		if len(defs) > 0 {
			sm = map[string]any{"$defs": defs, "anyOf": []any{sm}}
		}
		src, _ := json.Marshal(sm)
		if strings.Contains(string(src), "oneOf") {
			// oneOf is enforced as anyOf; overlapping branches are not errors of the masks.
			src = []byte(strings.ReplaceAll(string(src), "oneOf", "anyOf"))
		}
		spec := &Spec{Kind: "json", Schema: src, Options: SchemaOptions{NoWhitespace: i%2 == 0}}
		c, err := comp.Compile(spec)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		sch := compileSchema(t, string(src))
		for seed := 0; seed < 15; seed++ {
			wr := rand.New(rand.NewPCG(uint64(i), uint64(seed)))
			out := generate(t, c, v, wr)
			inst, err := jsonschemaUnmarshal(out)
			if err != nil {
				t.Fatalf("%s: %q is not JSON: %v", src, out, err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Fatalf("%s: %q does not validate: %v", src, out, err)
			}
			checked++
		}
	}
	t.Logf("%d outputs validated", checked)
}

// propSeed varies the property tests' random constraints (HONE_STRUCTURED_SEED, default 1);
// HONE_STRUCTURED_ROUNDS multiplies how many are tried.
var propSeed, propRounds = func() (uint64, int) {
	seed, rounds := uint64(1), 1
	if s := os.Getenv("HONE_STRUCTURED_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	if s := os.Getenv("HONE_STRUCTURED_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	return seed, max(rounds, 1)
}()

// TestKeyNotIn: additional properties' keys never decode to a declared name, and every
// other simple key is allowed.
func TestKeyNotIn(t *testing.T) {
	names := []string{"a", "ab", "x-z", "é", "q\"\n", "]^"}
	re := regexp.MustCompile(`^` + keyNotIn(names) + `$`)
	for _, n := range names {
		b, _ := json.Marshal(n)
		if re.Match(b) {
			t.Errorf("declared name %s allowed", b)
		}
	}
	for _, k := range []string{"", "b", "abc", "x", "y", "x-", "x-zz", "-", "ée", "q\"", "q\"\n\n", "]", "^", "a\t", "日本"} {
		b, _ := json.Marshal(k)
		if !re.Match(b) {
			t.Errorf("key %s refused", b)
		}
	}
	if !regexp.MustCompile(`^` + keyNotIn(nil) + `$`).MatchString(`"any\u0001"`) {
		t.Error("no names: any key")
	}
}

package pyjson

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

type golden struct {
	In  string `json:"in"`
	Out string `json:"out"`
}

func loadGoldens(t testing.TB) []golden {
	f, err := os.Open("testdata/goldens.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []golden
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var g golden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

// Dumps matches Python's json.dumps(json.loads(text)) byte for byte (goldens from
// scripts/pyjson-goldens/gen.py).
func TestDumpsMatchesPython(t *testing.T) {
	gs := loadGoldens(t)
	if len(gs) < 1000 {
		t.Fatalf("only %d goldens", len(gs))
	}
	for _, g := range gs {
		v, err := Parse([]byte(g.In))
		if err != nil {
			t.Errorf("Parse(%q): %v", g.In, err)
			continue
		}
		if got := string(Dumps(v)); got != g.Out {
			t.Errorf("Dumps(%q)\n got %s\nwant %s", g.In, got, g.Out)
		}
		// Compact form re-parses to the same Python text.
		v2, err := Parse(Compact(v))
		if err != nil {
			t.Errorf("Compact(%q) does not re-parse: %v", g.In, err)
			continue
		}
		if got := string(Dumps(v2)); got != g.Out {
			t.Errorf("Dumps(Parse(Compact(%q))) = %s, want %s", g.In, got, g.Out)
		}
	}
}

func TestParseErrors(t *testing.T) {
	bad := []string{"", "{", `{"a"}`, `{"a":1,}`, "[1,]", "01", "1.", ".5", "1e", "-", "tru", "nul", `"abc`,
		`"\x01"`, `"\q"`, `"\u12"`, "NaN", "Infinity", `{"a":1} x`, "[" + strings.Repeat("[", MaxDepth+1) + "]", "\"\xff\""}
	for _, s := range bad {
		if _, err := Parse([]byte(s)); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
	if _, err := Parse([]byte(strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2))); err != ErrTooDeep {
		t.Errorf("deep value: %v", err)
	}
}

func TestDuplicateKeysKeepFirstPosition(t *testing.T) {
	v, err := Parse([]byte(`{"a":1,"b":2,"a":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(Dumps(v)); got != `{"a": 3, "b": 2}` {
		t.Fatal(got)
	}
	// Also beyond the indexed threshold.
	var sb strings.Builder
	sb.WriteString("{")
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&sb, `"k%d":1,`, i)
	}
	sb.WriteString(`"k0":2}`)
	v, _ = Parse([]byte(sb.String()))
	if len(v.Obj) != 40 || v.Obj[0].Val.Str != "2" {
		t.Fatalf("dup in big object: %d %v", len(v.Obj), v.Obj[0])
	}
}

func TestGetAndPath(t *testing.T) {
	v, _ := Parse([]byte(`{"a":{"b":"c"},"n":1}`))
	if got, ok := v.Path("a", "b"); !ok || got.String() != "c" {
		t.Fatal(got, ok)
	}
	if _, ok := v.Path("a", "x"); ok {
		t.Fatal("missing path found")
	}
	if _, ok := v.Path("n", "x"); ok {
		t.Fatal("path through a number")
	}
}

func FuzzParseDumps(f *testing.F) {
	for _, g := range loadGoldens(f)[:200] {
		f.Add([]byte(g.In))
	}
	f.Add([]byte(`{"a":"\ud800\udc00\ud800"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		keys, kerr := TopLevelKeys(data)
		if (err == nil && v.Kind == Object) != (kerr == nil) {
			t.Fatalf("Parse err %v (kind %v) but TopLevelKeys err %v", err, v.Kind, kerr)
		}
		if kerr == nil {
			seen := map[string]bool{}
			var uniq []string
			for _, k := range keys {
				if !seen[k] {
					seen[k] = true
					uniq = append(uniq, k)
				}
			}
			if len(uniq) != len(v.Obj) {
				t.Fatalf("keys %q vs %d members", keys, len(v.Obj))
			}
			for i, k := range uniq {
				if v.Obj[i].Key != k {
					t.Fatalf("key %d: %q vs %q", i, k, v.Obj[i].Key)
				}
			}
		}
		if err != nil {
			return
		}
		out := Dumps(v)
		// Python's output is ASCII.
		for _, c := range out {
			if c >= 0x80 {
				t.Fatalf("non-ASCII in Dumps: %q", out)
			}
		}
		// Compact is valid standard JSON that parses to the same Python text.
		c := Compact(v)
		if !json.Valid(c) {
			t.Fatalf("Compact not valid JSON: %q", c)
		}
		v2, err := Parse(c)
		if err != nil {
			t.Fatalf("Compact does not re-parse: %v", err)
		}
		if string(Dumps(v2)) != string(out) {
			t.Fatalf("round trip changed %q -> %q", out, Dumps(v2))
		}
		checkCompactText(t, data)
	})
}

// checkCompactText: CompactText of valid JSON is encoding/json.Compact's text.
func checkCompactText(t *testing.T, data []byte) {
	t.Helper()
	var want bytes.Buffer
	if err := json.Compact(&want, data); err != nil {
		return // encoding/json refuses what Python accepts (lone surrogates are fine; NaN is not)
	}
	if got := CompactText(data); string(got) != want.String() {
		t.Fatalf("CompactText(%q) = %q, want %q", data, got, want.String())
	}
	if got := AppendCompactText([]byte("x"), string(data)); string(got) != "x"+want.String() {
		t.Fatalf("AppendCompactText(%q) = %q, want x%q", data, got, want.String())
	}
}

func TestCompactText(t *testing.T) {
	for _, g := range loadGoldens(t) {
		checkCompactText(t, []byte(g.In))
	}
	for _, s := range []string{`{}`, ` { "a" : [ 1 , "x y\" z" , {"b\\":  "\t"} ] } `, "[\n\t1,\r\n2]", `"  "`, ` 1 `} {
		checkCompactText(t, []byte(s))
	}
}

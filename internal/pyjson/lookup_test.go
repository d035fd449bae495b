package pyjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// lookupRef walks the document with encoding/json's token reader, a member named twice found
// at its first occurrence as SQLite finds it; ok is false when encoding/json refuses the
// document (NaN, Infinity).
func lookupRef(doc string, path []string, index []bool) (raw []byte, found, ok bool) {
	dec := json.NewDecoder(strings.NewReader(doc))
	for k, seg := range path {
		tok, err := dec.Token()
		if err != nil {
			return nil, false, false
		}
		d, isDelim := tok.(json.Delim)
		if !isDelim || d != '[' && d != '{' || index[k] != (d == '[') {
			return nil, false, json.Valid([]byte(doc))
		}
		want := 0
		for _, c := range []byte(seg) {
			want = want*10 + int(c-'0')
		}
		for n := 0; ; n++ {
			if !dec.More() {
				return nil, false, json.Valid([]byte(doc))
			}
			match := index[k] && n == want
			if !index[k] {
				key, err := dec.Token()
				if err != nil {
					return nil, false, false
				}
				match = key.(string) == seg
			}
			if match {
				break
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, false, false
			}
		}
	}
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return nil, false, false
	}
	return v, true, json.Valid([]byte(doc))
}

func splitPath(p string) ([]string, []bool) {
	segs := strings.Split(p, ".")
	index := make([]bool, len(segs))
	for i, s := range segs {
		index[i] = s != "" && strings.Trim(s, "0123456789") == "" && len(s) <= 9
	}
	return segs, index
}

func checkLookup(t *testing.T, doc, path string) {
	if _, err := Parse([]byte(doc)); err != nil {
		return // Lookup is for valid documents
	}
	segs, index := splitPath(path)
	raw, found, err := Lookup([]byte(doc), segs, index)
	if errors.Is(err, ErrLookupEscaped) {
		return
	}
	if err != nil {
		t.Fatalf("%s at %s: %v", doc, path, err)
	}
	want, wantFound, ok := lookupRef(doc, segs, index)
	if !ok {
		return
	}
	if found != wantFound {
		t.Fatalf("%s at %s: found %v, want %v", doc, path, found, wantFound)
	}
	if found && !bytes.Equal(bytes.TrimSpace(raw), bytes.TrimSpace(want)) {
		t.Fatalf("%s at %s: %q, want %q", doc, path, raw, want)
	}
}

func TestLookup(t *testing.T) {
	doc := `{"input": {"score": 12, "q": "a\"b", "list": [1, {"x": [true]}, null]}, "input": {"score": 99},
		"n": -1.5e3, "e\u0301": 1, "": {"": 2}}`
	for _, c := range []struct {
		path, want string
		found      bool
	}{
		{"input.score", "12", true}, // the first of two members named alike
		{"input.q", `"a\"b"`, true},
		{"input.list.1.x.0", "true", true},
		{"input.list.2", "null", true},
		{"input.list.3", "", false},
		{"input.list.x", "", false},
		{"input.score.x", "", false},
		{"input.missing", "", false},
		{"n", "-1.5e3", true},
		{"input.0", "", false},
	} {
		segs, index := splitPath(c.path)
		raw, found, err := Lookup([]byte(doc), segs, index)
		if err != nil || found != c.found || string(raw) != c.want {
			t.Errorf("%s: %q %v %v, want %q %v", c.path, raw, found, err, c.want, c.found)
		}
	}
	// A key with an escape on the way is not compared by its text.
	if _, _, err := Lookup([]byte(`{"a\u0062": 1, "ab": 2}`), []string{"ab"}, []bool{false}); !errors.Is(err, ErrLookupEscaped) {
		t.Fatalf("escaped key: %v", err)
	}
	if _, found, err := Lookup([]byte(`[1, 2]`), []string{"a"}, []bool{false}); found || err != nil {
		t.Fatal("name step into an array")
	}
	for _, c := range []struct{ doc, path string }{{doc, "input.score"}, {doc, "input.list.1.x"}, {`[[], {}, [[1]]]`, "2.0.0"}} {
		checkLookup(t, c.doc, c.path)
	}
}

func FuzzLookup(f *testing.F) {
	for _, s := range []struct{ doc, path string }{
		{`{"input": {"score": 12}}`, "input.score"},
		{`{"a": [1, [2, 3], {"b": "x"}]}`, "a.1.0"},
		{`{"a": {"a": {"a": NaN}}}`, "a.a.a"},
		{`{"k": "\ud800", "k": 2}`, "k"},
		{`[{"x": Infinity}]`, "0.x"},
		{`{"a":1,"a":2}`, "a"},
		{`{"":{"":[]}}`, "."},
		{` { "a" : [ ] , "b" : { } } `, "b"},
	} {
		f.Add(s.doc, s.path)
	}
	f.Fuzz(func(t *testing.T, doc, path string) {
		checkLookup(t, doc, path)
	})
}

package chatapi

import (
	"encoding/json"
	"testing"
)

// FuzzParsePrompts: parsePrompts never panics, answers texts or token lists (never both, never
// an empty list), and a refusal names prompt.
func FuzzParsePrompts(f *testing.F) {
	for _, s := range []string{`"hi"`, `["a","b"]`, `[1,2,3]`, `[[1],[2,3]]`, `[]`, `[[]]`, `null`, `{"a":1}`, `[1,"a"]`, `""`, `[-1]`, `[1.5]`, `[[1,2],"x"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		texts, ids, err := parsePrompts(json.RawMessage(raw))
		if err != nil {
			if texts != nil || ids != nil {
				t.Fatalf("%q: an error with prompts", raw)
			}
			return
		}
		if (texts == nil) == (ids == nil) || len(texts)+len(ids) == 0 {
			t.Fatalf("%q: texts %q ids %v", raw, texts, ids)
		}
	})
}

func TestParsePrompts(t *testing.T) {
	for raw, want := range map[string]int{`"hi"`: 1, `["a","b"]`: 2, `[1,2,3]`: 1, `[[1],[2,3]]`: 2} {
		texts, ids, err := parsePrompts(json.RawMessage(raw))
		if err != nil || len(texts)+len(ids) != want {
			t.Errorf("%s: %q %v %v", raw, texts, ids, err)
		}
	}
	for _, raw := range []string{``, `null`, `[]`, `{"a":1}`, `[1,"a"]`, `3`} {
		if _, _, err := parsePrompts(json.RawMessage(raw)); err == nil {
			t.Errorf("%s accepted", raw)
		}
	}
}

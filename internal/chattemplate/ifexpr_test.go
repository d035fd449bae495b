package chattemplate

import (
	"strings"
	"testing"
)

// TestConditionalInBrackets: `A if B else C` inside parentheses, list items and call
// arguments renders as Python's jinja2 renders it (expected outputs from jinja2 3), evaluating
// only the branch taken; dictionary items, slices and strings holding "if" are left alone.
func TestConditionalInBrackets(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{{ 'x' + (a if t else 'no') }}`, "xA"},
		{`{{ 'x' + (a if f else 'no') }}`, "xno"},
		{`{{ (a if f else b if t else 'c') }}|{{ (a if f else b if f else 'c') }}`, "B|c"},
		{`{{ [a if t else 'n', 'z' if f else b] | join(',') }}`, "A,B"},
		{`{% set ns = namespace(v=a if f else b) %}{{ ns.v }}`, "B"},
		{`{{ (missing.attr if f else 'safe') }}`, "safe"},
		{`{{ ((a | upper) if t else 'n') ~ '!' }}`, "A!"},
		{`{% if (a if t else '') %}yes{% endif %}{{ {'k': 1}['k'] }}{{ 'abc'[1:] }}`, "yes1bc"},
		{`{{ 'x' + (a if (t and f) else 'no') + ("if" if t else 'else') }}`, "xnoif"},
		{`{{ 'x' | replace('x', a if t else b) if t else 'w' }}`, "A"},
		{`{# (a if t else b) #}{{ '(x if y else z)' }}`, "(x if y else z)"},
	} {
		tpl, err := Compile(c.src)
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		got, err := tpl.Render(Input{Messages: []byte(`[]`), Kwargs: []byte(`{"a":"A","b":"B","t":true,"f":false}`)})
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.src, got, c.want)
		}
	}
}

// FuzzRewriteConditionals: the pre-pass never panics, and leaves a template without a
// bracketed conditional as it is.
func FuzzRewriteConditionals(f *testing.F) {
	for _, s := range []string{`{{ 'x' + (a if t else 'no') }}`, `{% set x = [a if b else c, {'k': (d if e else f)}] %}`,
		`{{ "unterminated (a if b else c)`, `{% if x %}(a if b else c){% endif %}`, `{{ ((( }}`, `{# (a if b else c)`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := rewriteConditionals(s)
		if !strings.Contains(s, "else") && out != s {
			t.Fatalf("%q rewritten to %q", s, out)
		}
	})
}

// TestNegativeIndex: x[-n] of a list or string n long is its first item, as in Python
// (gonja alone needs it longer than n); past the start it is undefined, as before.
func TestNegativeIndex(t *testing.T) {
	tpl, err := Compile(`{{ xs[-1] }}|{{ xs[-2] }}|{{ 'a'[-1] }}|{{ xs[i] }}|{{ (xs|list)[-1] }}|{{ [1,2,3][-3] }}|{{ d[k] }}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render(Input{Messages: []byte(`[]`), Kwargs: []byte(`{"xs":[7],"i":-1,"d":{"a":"A"},"k":"a"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := "7||a|7|7|1|A"; got != want { // jinja2 3 renders the same
		t.Fatalf("got %q, want %q", got, want)
	}
}

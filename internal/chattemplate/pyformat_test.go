package chattemplate

import (
	"strings"
	"testing"
)

// TestPercentFormatting: outputs and error messages from Python Jinja2 3.1 (rendered with
// messages=[{"role": "user", "content": "Monday"}]).
func TestPercentFormatting(t *testing.T) {
	ok := [][2]string{
		{`'%s' % 'x'`, "x"},
		{`'%s and %s' % ('a', 'b')`, "a and b"},
		{`'%d items' % 3`, "3 items"},
		{`'%5d|%-5d|%05d' % (42, 42, 42)`, "   42|42   |00042"},
		{`'%.2f' % 3.14159`, "3.14"},
		{`'%+d % d' % (5, 5)`, "+5  5"},
		{`'%x %X %o %#x %#o' % (255, 255, 8, 255, 8)`, "ff FF 10 0xff 0o10"},
		{`'%e' % 12345.678`, "1.234568e+04"},
		{`'%g %g %g' % (0.0001, 1234567.0, 100000)`, "0.0001 1.23457e+06 100000"},
		{`'%10.3s|' % 'abcdef'`, "       abc|"},
		{`'%(name)s is %(age)d' % {'name': 'Ann', 'age': 30}`, "Ann is 30"},
		{`'%s' % none`, "None"},
		{`'%s %s' % (true, false)`, "True False"},
		{`'%s' % [1, 'a', none]`, "[1, 'a', None]"},
		{`'%s' % 1.5`, "1.5"},
		{`'%s' % 2.0`, "2.0"},
		{`'100%%' % ()`, "100%"},
		{`'%c%c' % (72, 'i')`, "Hi"},
		{`7 % 3`, "1"},
		{`-7 % 3`, "2"},
		{`7 % -3`, "-2"},
		{`7.5 % 2`, "1.5"},
		{`'%s' % 0.1`, "0.1"},
		{`'Today is %s.' % messages[0]['content'] + '!'`, "Today is Monday.!"},
		{`'%-6s|' % 'ab'`, "ab    |"},
		{`'%*d' % (5, 3)`, "    3"},
		{`'%s' % {'a': 1}`, "{'a': 1}"},
		{`'%.3e' % 0.000123`, "1.230e-04"},
		{`'%G' % 1e-10`, "1E-10"},
		{`'%s' % 1234567.5`, "1234567.5"},
		{`'%r' % "it's"`, `"it's"`},
	}
	for _, c := range ok {
		tpl, err := Compile("{% set x = " + c[0] + " %}{{ x }}|{{ " + c[0] + " }}")
		if err != nil {
			t.Fatalf("%s: %v", c[0], err)
		}
		got, err := tpl.Render(Input{Messages: []byte(`[{"role":"user","content":"Monday"}]`)})
		if err != nil {
			t.Errorf("%s: %v", c[0], err)
			continue
		}
		if want := c[1] + "|" + c[1]; got != want {
			t.Errorf("%s: got %q, want %q", c[0], got, want)
		}
	}
	bad := [][2]string{
		{`'%s %s' % 'a'`, "not enough arguments for format string"},
		{`'%s' % ('a', 'b')`, "not all arguments converted during string formatting"},
		{`'%d' % 'x'`, "%d format: a real number is required, not str"},
		{`'%(a)s' % 'x'`, "format requires a mapping"},
		{`5 % 0`, "integer modulo by zero"},
		{`'%z' % 1`, "unsupported format character 'z' (0x7a) at index 1"},
	}
	for _, c := range bad {
		tpl, err := Compile("{{ " + c[0] + " }}")
		if err != nil {
			t.Fatalf("%s: %v", c[0], err)
		}
		_, err = tpl.Render(Input{Messages: []byte(`[]`)})
		if err == nil || !strings.Contains(err.Error(), c[1]) {
			t.Errorf("%s: err = %v, want %q", c[0], err, c[1])
		}
	}
}

// TestPercentInControlStructures: `%` inside if conditions, for iterables, set blocks, macro
// bodies and call arguments is rewritten too.
func TestPercentInControlStructures(t *testing.T) {
	src := `{% macro m(a) %}<{{ '%s!' % a }}>{% endmacro %}` +
		`{% for i in range(6) if i % 2 == 0 %}{{ m('n%d' % i) }}{% endfor %}` +
		`{% if 10 % 4 == 2 %}{{ 'ok %s' % (messages|length) }}{% endif %}` +
		`{{ ['%s' % 1, '%s' % 2]|join(',') }}{{ {'k': '%d' % 5}['k'] }}`
	tpl, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render(Input{Messages: []byte(`[]`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := "<n0!><n2!><n4!>ok 01,25"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

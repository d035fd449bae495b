package traceapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
)

func TestGraphQLSelection(t *testing.T) {
	q := `query Q($inc: Boolean!, $n: String) {
		viewer { username ...F }
		a: project(name: $n) { name x: entityName bucket(name: "r") @include(if: $inc) { id } ... on Project { readOnly } }
	}
	fragment F on User { defaultEntity { name } }`
	doc, op, err := parseOperation(q, "")
	if err != nil {
		t.Fatal(err)
	}
	e := &gqlExec{doc: doc, vars: map[string]any{"inc": false, "n": "p"}}
	var roots []*ast.Field
	e.fields(op.SelectionSet, nil, &roots)
	if len(roots) != 2 || roots[1].Alias != "a" {
		t.Fatalf("roots %v", roots)
	}
	args, _ := e.args(roots[1])
	v := e.value(roots[1], obj{"__typename": "Project", "name": args["name"], "entityName": "e", "readOnly": false,
		"bucket": fieldFn(func(map[string]any) (any, error) { t.Fatal("skipped field computed"); return nil, nil })}, nil)
	got, _ := json.Marshal(v)
	if string(got) != `{"name":"p","readOnly":false,"x":"e"}` {
		t.Fatalf("got %s", got)
	}
	v = e.value(roots[0], obj{"__typename": "User", "username": "u", "defaultEntity": obj{"name": "d", "id": "x"}}, nil)
	got, _ = json.Marshal(v)
	if string(got) != `{"defaultEntity":{"name":"d"},"username":"u"}` {
		t.Fatalf("got %s", got)
	}
	for _, bad := range []string{"{", "query A { a } query B { b }", "fragment F on X { a }"} {
		if _, _, err := parseOperation(bad, ""); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzGraphQLExec parses any query and answers it from a fixed object graph (with a field
// function, a list and a self-referencing object): it must not panic or loop, whatever the
// fragments (a fragment spreading itself included) and directives.
func FuzzGraphQLExec(f *testing.F) {
	for _, q := range []string{
		"query { viewer { username } }",
		"query Q($i: Boolean = true) { a: viewer @include(if: $i) { ...F } } fragment F on User { username self { username } }",
		"{ viewer { ...F } } fragment F on User { self { ...F } }",
		"mutation { m(input: {a: [1, 2.5, \"x\", $v, {b: null}]}) { list { x } } }",
		"{ viewer { ... on Other { username } ... { username } } }",
		"{{{{",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		doc, op, err := parseOperation(q, "")
		if err != nil {
			return
		}
		user := obj{"__typename": "User", "username": "u"}
		user["self"] = user
		user["list"] = []obj{{"x": 1}, nil}
		user["fn"] = fieldFn(func(args map[string]any) (any, error) { return user, nil })
		root := obj{"viewer": user, "m": user, "fn": user["fn"]}
		e := &gqlExec{doc: doc, vars: withDefaults(op, map[string]any{"v": "x"})}
		out := e.object(op.SelectionSet, root, nil)
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("%q: %v", q, err)
		}
	})
}

// TestGraphQLBounds: a fragment that spreads itself, and one that branches, end with an error.
func TestGraphQLBounds(t *testing.T) {
	for q, says := range map[string]string{
		"{ viewer { ...F } } fragment F on User { self { ...F } }":             "deeper than",
		"{ viewer { ...F } } fragment F on User { self { ...F } fn { ...F } }": "more than",
	} {
		doc, op, err := parseOperation(q, "")
		if err != nil {
			t.Fatal(err)
		}
		user := obj{"__typename": "User"}
		user["self"] = user
		user["fn"] = fieldFn(func(map[string]any) (any, error) { return user, nil })
		e := &gqlExec{doc: doc, vars: map[string]any{}}
		e.object(op.SelectionSet, obj{"viewer": user}, nil)
		if !strings.Contains(fmt.Sprint(e.errs), says) {
			t.Errorf("%s: %v", q, e.errs)
		}
	}
}

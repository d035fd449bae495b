package traceapi

import (
	"encoding/json"
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

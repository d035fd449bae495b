package wandbapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
)

// testProject is a project with a field of any value and a field function.
type testProject struct {
	Name       any     `json:"name"`
	EntityName string  `json:"entityName"`
	ReadOnly   bool    `json:"readOnly"`
	Bucket     fieldFn `json:"bucket"`
}

func (testProject) typename() string { return "Project" }

// testUser is a user that can point at itself, list others and compute a field.
type testUser struct {
	Username string      `json:"username"`
	Self     *testUser   `json:"self"`
	List     []*testUser `json:"list"`
	Fn       fieldFn     `json:"fn"`
	X        int         `json:"x"`
}

func (testUser) typename() string { return "User" }

// testRoot holds the root fields of the fuzz and bounds tests.
type testRoot struct {
	Viewer *testUser `json:"viewer"`
	M      *testUser `json:"m"`
	Fn     fieldFn   `json:"fn"`
}

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
	e.fields(op.SelectionSet, object{}, &roots)
	if len(roots) != 2 || roots[1].Alias != "a" {
		t.Fatalf("roots %v", roots)
	}
	args, _ := e.args(roots[1])
	v := e.value(roots[1], testProject{Name: args["name"], EntityName: "e",
		Bucket: func(map[string]any) (any, error) { t.Fatal("skipped field computed"); return nil, nil }}, nil)
	got, _ := json.Marshal(v)
	if string(got) != `{"name":"p","readOnly":false,"x":"e"}` {
		t.Fatalf("got %s", got)
	}
	v = e.value(roots[0], gqlUser{Username: "u", DefaultEntity: gqlNodeRef{Name: "d", ID: "x"}}, nil)
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
		user := &testUser{Username: "u"}
		user.Self = user
		user.List = []*testUser{{X: 1}, nil}
		user.Fn = func(args map[string]any) (any, error) { return user, nil }
		root, _, _ := asObject(testRoot{Viewer: user, M: user, Fn: user.Fn})
		e := &gqlExec{doc: doc, vars: withDefaults(op, map[string]any{"v": "x"})}
		out := e.selectFrom(op.SelectionSet, root, nil)
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
		user := &testUser{}
		user.Self = user
		user.Fn = func(map[string]any) (any, error) { return user, nil }
		e := &gqlExec{doc: doc, vars: map[string]any{}}
		root, _, _ := asObject(testRoot{Viewer: user})
		e.selectFrom(op.SelectionSet, root, nil)
		if !strings.Contains(fmt.Sprint(e.errs), says) {
			t.Errorf("%s: %v", q, e.errs)
		}
	}
}

package wandbapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/wandb"
)

// A small executor for the W&B GraphQL subset: the query is parsed by gqlparser (no schema),
// each root field is answered by a Go function, and the object it returns is cut down to the
// selection set. An object is a struct of the answer types (schema.go), or a non-nil pointer
// to one, whose fields are named by their json tags; a field's value is a plain value, a
// nested object, a list, or a field function (a field with arguments, or one too costly to
// compute unless selected). A nil pointer to a struct, or a nil field function, is null; a
// list is answered element by element, a nil one as an empty list.

// fieldFn computes a field from its arguments (variables already substituted).
type fieldFn func(args map[string]any) (any, error)

// typed is an answer type with a GraphQL type name, answered as __typename and matched by
// fragments' type conditions; objects of other types match any condition.
type typed interface{ typename() string }

// gqlInterfaces names the interface a type answered here implements (besides Node), for
// fragments on the interface.
var gqlInterfaces = map[string]string{"ArtifactSequence": "ArtifactCollection", "ArtifactPortfolio": "ArtifactCollection"}

// maxQueryTokens bounds the parser's work on one query.
const maxQueryTokens = 20000

// parseOperation parses q and picks the operation named name (or the only one).
func parseOperation(q, name string) (*ast.QueryDocument, *ast.OperationDefinition, error) {
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: q}, maxQueryTokens)
	if err != nil {
		return nil, nil, fmt.Errorf("the query does not parse: %w", err)
	}
	switch {
	case len(doc.Operations) == 0:
		return nil, nil, fmt.Errorf("the query has no operation")
	case name != "":
		if op := doc.Operations.ForName(name); op != nil {
			return doc, op, nil
		}
		return nil, nil, fmt.Errorf("the query has no operation named %s", name)
	case len(doc.Operations) > 1:
		return nil, nil, fmt.Errorf("the query has several operations: name one with operationName")
	}
	return doc, doc.Operations[0], nil
}

// withDefaults adds the default values of op's variables that vars lacks.
func withDefaults(op *ast.OperationDefinition, vars map[string]any) map[string]any {
	for _, vd := range op.VariableDefinitions {
		if _, ok := vars[vd.Variable]; !ok && vd.DefaultValue != nil {
			if v, err := vd.DefaultValue.Value(nil); err == nil {
				vars[vd.Variable] = v
			}
		}
	}
	return vars
}

// gqlExec answers one operation.
type gqlExec struct {
	ctx     context.Context // for logging internal errors
	doc     *ast.QueryDocument
	vars    map[string]any
	errs    []gqlError
	depth   int  // objects and fragments entered: bounds a fragment that spreads itself
	tooDeep bool // reported once
	// answered counts the fields answered: bounds the work of fragments that branch.
	answered int
	tooBig   bool
}

// maxAnsweredFields bounds the fields in one answer.
const maxAnsweredFields = 100000

// maxSelectionDepth bounds the nesting of objects and fragments (a fragment spreading itself
// inside a field of its own type would never end).
const maxSelectionDepth = 64

// object is an answer object the executor selects from: a struct value (the zero object, at
// the root, has no fields).
type object struct{ v reflect.Value }

// asObject says whether v is an object (a struct or a non-nil pointer to one) and whether it
// is a null one (a nil pointer to a struct).
func asObject(v any) (o object, ok, null bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.Type().Elem().Kind() != reflect.Struct {
			return object{}, false, false
		}
		if rv.IsNil() {
			return object{}, false, true
		}
		return object{rv.Elem()}, true, false
	case reflect.Struct:
		return object{rv}, true, false
	}
	return object{}, false, false
}

// typename is o's GraphQL type name, or "" for an object of no named type.
func (o object) typename() string {
	if !o.v.IsValid() {
		return ""
	}
	if t, ok := o.v.Interface().(typed); ok {
		return t.typename()
	}
	return ""
}

// field is the value of o's field named name (nil when o has none).
func (o object) field(name string) any {
	if !o.v.IsValid() {
		return nil
	}
	if name == "__typename" {
		if t := o.typename(); t != "" {
			return t
		}
		return nil
	}
	idx, ok := fieldIndexes(o.v.Type())[name]
	if !ok {
		return nil
	}
	return o.v.FieldByIndex(idx).Interface()
}

var fieldIndexCache sync.Map // reflect.Type -> map[string][]int

// fieldIndexes maps the names of struct type t's exported fields (their json tags; those of
// embedded structs included) to their indexes.
func fieldIndexes(t reflect.Type) map[string][]int {
	if m, ok := fieldIndexCache.Load(t); ok {
		return m.(map[string][]int)
	}
	m := map[string][]int{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous && f.Type.Kind() == reflect.Struct {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		m[name] = f.Index
	}
	fieldIndexCache.Store(t, m)
	return m
}

func (e *gqlExec) fail(path []string, err error) {
	e.errs = append(e.errs, gqlError{Message: err.Error(), Path: path})
}

// public is what the client may see of a field's error: the message of a fault, of a
// not-found or of a client error; anything else is logged and answered "internal error".
func (e *gqlExec) public(err error) error {
	var f *fault.Error
	var c *clientError
	switch {
	case errors.As(err, &f):
		return errors.New(f.Msg)
	case errors.As(err, &c), errors.Is(err, wandb.ErrNotFound):
		return err
	}
	ctx := e.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	slog.Default().ErrorContext(ctx, "internal error", "path", "/graphql", "err", err)
	return errors.New("internal error")
}

func (e *gqlExec) nestedTooDeep(path []string) {
	if !e.tooDeep {
		e.tooDeep = true
		e.fail(path, fmt.Errorf("the query nests deeper than %d levels", maxSelectionDepth))
	}
}

// args evaluates a field's arguments.
func (e *gqlExec) args(f *ast.Field) (map[string]any, error) {
	out := make(map[string]any, len(f.Arguments))
	for _, a := range f.Arguments {
		v, err := a.Value.Value(e.vars)
		if err != nil {
			return nil, gqlErrorf("argument %s: %v", a.Name, err)
		}
		out[a.Name] = v
	}
	return out, nil
}

// skipped applies @include and @skip.
func (e *gqlExec) skipped(ds ast.DirectiveList) bool {
	for _, d := range ds {
		if d.Name != "include" && d.Name != "skip" {
			continue
		}
		arg := d.Arguments.ForName("if")
		if arg == nil {
			continue
		}
		v, _ := arg.Value.Value(e.vars)
		b, _ := v.(bool)
		if (d.Name == "include" && !b) || (d.Name == "skip" && b) {
			return true
		}
	}
	return false
}

// fields flattens a selection set over o (fragments whose type condition o meets).
func (e *gqlExec) fields(set ast.SelectionSet, o object, out *[]*ast.Field) {
	if e.depth++; e.depth > maxSelectionDepth {
		e.depth--
		e.nestedTooDeep(nil)
		return
	}
	defer func() { e.depth-- }()
	typeOK := func(cond string) bool {
		t := o.typename()
		return cond == "" || t == "" || t == cond || cond == "Node" || gqlInterfaces[t] == cond
	}
	for _, s := range set {
		switch s := s.(type) {
		case *ast.Field:
			if !e.skipped(s.Directives) {
				*out = append(*out, s)
			}
		case *ast.InlineFragment:
			if !e.skipped(s.Directives) && typeOK(s.TypeCondition) {
				e.fields(s.SelectionSet, o, out)
			}
		case *ast.FragmentSpread:
			def := e.doc.Fragments.ForName(s.Name)
			if def == nil {
				e.fail(nil, fmt.Errorf("fragment %s is not defined", s.Name))
				continue
			}
			if !e.skipped(s.Directives) && typeOK(def.TypeCondition) {
				e.fields(def.SelectionSet, o, out)
			}
		}
	}
}

// selectFrom selects set from o.
func (e *gqlExec) selectFrom(set ast.SelectionSet, o object, path []string) map[string]any {
	if e.depth++; e.depth > maxSelectionDepth {
		e.depth--
		e.nestedTooDeep(path)
		return nil
	}
	defer func() { e.depth-- }()
	var fs []*ast.Field
	e.fields(set, o, &fs)
	out := make(map[string]any, len(fs))
	for _, f := range fs {
		if e.answered++; e.answered > maxAnsweredFields {
			if !e.tooBig {
				e.tooBig = true
				e.fail(path, fmt.Errorf("the answer would hold more than %d fields", maxAnsweredFields))
			}
			return out
		}
		key := f.Alias
		if key == "" {
			key = f.Name
		}
		p := append(append([]string(nil), path...), key)
		v := o.field(f.Name)
		if fn, ok := v.(fieldFn); ok && fn == nil {
			v = nil
		} else if ok {
			args, err := e.args(f)
			if err == nil {
				if v, err = fn(args); err != nil {
					err = e.public(err)
				}
			}
			if err != nil {
				e.fail(p, err)
				out[key] = nil
				continue
			}
		}
		out[key] = e.value(f, v, p)
	}
	return out
}

// value shapes v, the value of field f, by f's selection set.
func (e *gqlExec) value(f *ast.Field, v any, path []string) any {
	if v == nil {
		return nil
	}
	if o, ok, null := asObject(v); null {
		return nil
	} else if ok {
		if len(f.SelectionSet) == 0 {
			e.fail(path, fmt.Errorf("field %s is an object: select its fields", f.Name))
			return nil
		}
		return e.selectFrom(f.SelectionSet, o, path)
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() != reflect.Uint8 {
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = e.value(f, rv.Index(i).Interface(), append(path, fmt.Sprint(i)))
		}
		return out
	}
	return v
}

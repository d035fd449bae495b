package trace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/jsonfields"
	"github.com/honeai/hone/internal/pyjson"
)

// Drift between the Weave SDKs and Hone: the SDKs gain request fields faster than any server
// learns them, and they only log a warning when a write is refused, so a refused write is
// silently lost data. Hone's rule:
//
//   - A write (a create, an upsert, an update) keeps every field Hone does not know yet: the
//     known fields are applied, the unknown ones are stored as sent in trace_extra_fields
//     beside what they came with, and the server logs each unknown field name once.
//   - A read (and a delete or purge, whose answer is which rows go) refuses any field Hone
//     does not know, at any depth, with a 400 naming it: an ignored filter would change the
//     answer silently.
//
// UnknownFields finds the unknown fields of a request body by walking the JSON along the Go
// type the body decodes into; free-form values (json.RawMessage, maps of scalars) are not
// walked.

// UnknownField is a request field Hone does not know: its path in the body
// (`batch[2].req.end.is_new`) and its value as sent (compact JSON).
type UnknownField struct {
	Path  string
	Value json.RawMessage
}

// typeDepth caches how deep the containers of a request type go.
var typeDepth sync.Map // reflect.Type -> int

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

// containerDepth is how many levels of JSON containers a value of t has whose keys matter.
func containerDepth(t reflect.Type, seen map[reflect.Type]bool) int {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		return 0
	}
	switch t.Kind() {
	case reflect.Struct:
		if seen[t] {
			return 1
		}
		seen[t] = true
		defer delete(seen, t)
		d := 0
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.IsExported() || f.Anonymous {
				sub := containerDepth(f.Type, seen)
				if f.Anonymous {
					sub-- // an embedded struct's fields are at the same level
				}
				d = max(d, sub)
			}
		}
		return 1 + d
	case reflect.Slice, reflect.Array, reflect.Map:
		return 1 + containerDepth(t.Elem(), seen)
	}
	return 0
}

func depthOf(t reflect.Type) int {
	if d, ok := typeDepth.Load(t); ok {
		return d.(int)
	}
	d := containerDepth(t, map[reflect.Type]bool{})
	typeDepth.Store(t, d)
	return d
}

// UnknownFields lists the fields of body that v's type (a pointer to a struct, or a struct)
// does not have, in body order. It fails when body is not JSON it can read (malformed, nested
// deeper than pyjson.MaxDepth, or not UTF-8): then it cannot tell which fields are unknown.
func UnknownFields(body []byte, v any) ([]UnknownField, error) {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil, nil
	}
	shallow := max(depthOf(t)-1, 1)
	val, err := pyjson.ParseShallow(body, shallow)
	if err != nil {
		return nil, err
	}
	var out []UnknownField
	walkUnknown(val, t, "", &out)
	return out, nil
}

func joinPath(prefix, key string) string {
	if key == "" {
		key = `""` // an empty key is still named
	}
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func rawValue(v pyjson.Value) json.RawMessage {
	if v.Kind == pyjson.Raw {
		return json.RawMessage(v.Str)
	}
	return json.RawMessage(pyjson.Compact(v))
}

func walkUnknown(v pyjson.Value, t reflect.Type, path string, out *[]UnknownField) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if v.Kind != pyjson.Object {
			return
		}
		fields := jsonfields.Of(t)
		for _, m := range v.Obj {
			ft, ok := fields[m.Key]
			if !ok {
				*out = append(*out, UnknownField{Path: joinPath(path, m.Key), Value: rawValue(m.Val)})
				continue
			}
			walkUnknown(m.Val, ft, joinPath(path, m.Key), out)
		}
	case reflect.Slice, reflect.Array:
		if v.Kind != pyjson.Array {
			return
		}
		for i, el := range v.Arr {
			walkUnknown(el, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Map:
		if v.Kind != pyjson.Object {
			return
		}
		for _, m := range v.Obj {
			walkUnknown(m.Val, t.Elem(), joinPath(path, m.Key), out)
		}
	}
}

// UnknownFieldsError is the 400 of a read (or delete) naming the fields Hone does not know.
func UnknownFieldsError(fields []UnknownField) error {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = "`" + f.Path + "`"
	}
	return fault.Invalid(fields[0].Path, "Unknown field(s) in request body: %s (Hone refuses fields it does not know on reads, since ignoring one could change the answer)", strings.Join(names, ", "))
}

type unknownKey struct{}

type unknownReq struct {
	route  string
	fields []UnknownField
}

// WithUnknownFields returns ctx carrying the unknown fields of a write to route; the
// service's write methods keep them beside what they store.
func WithUnknownFields(ctx context.Context, route string, fields []UnknownField) context.Context {
	if len(fields) == 0 {
		return ctx
	}
	return context.WithValue(ctx, unknownKey{}, unknownReq{route: route, fields: fields})
}

func unknownFrom(ctx context.Context) (unknownReq, bool) {
	u, ok := ctx.Value(unknownKey{}).(unknownReq)
	return u, ok && len(u.fields) > 0
}

// extras collects a write's unknown fields by target.
type extras struct {
	route   string
	project string
	fields  []UnknownField
	claimed []bool
	rows    []ExtraFieldsRow
}

func (s *Service) extrasFor(ctx context.Context, project string) *extras {
	u, ok := unknownFrom(ctx)
	if !ok {
		return nil
	}
	return &extras{route: u.route, project: project, fields: u.fields, claimed: make([]bool, len(u.fields))}
}

// claim assigns the unknown fields under prefix (e.g. "batch[2]." or "" for all left) to
// target, with paths relative to prefix.
func (e *extras) claim(prefix, target string) {
	if e == nil {
		return
	}
	obj := pyjson.Value{Kind: pyjson.Object}
	for i, f := range e.fields {
		if e.claimed[i] || !strings.HasPrefix(f.Path, prefix) {
			continue
		}
		e.claimed[i] = true
		val, err := pyjson.Parse(f.Value)
		if err != nil {
			val = pyjson.Value{Kind: pyjson.String, Str: string(f.Value)}
		}
		obj.Obj = append(obj.Obj, pyjson.Member{Key: strings.TrimPrefix(f.Path, prefix), Val: val})
	}
	if len(obj.Obj) > 0 {
		e.rows = append(e.rows, ExtraFieldsRow{ProjectID: e.project, Route: e.route, Target: target, Fields: pyjson.Compact(obj)})
	}
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

// keepExtras stores the claimed unknown fields (the rest go to target "", the request as a
// whole) and logs each unknown field name of a route once per process.
func (s *Service) keepExtras(ctx context.Context, e *extras) error {
	if e == nil {
		return nil
	}
	e.claim("", "")
	now := s.nowString()
	for i := range e.rows {
		e.rows[i].CreatedAt = now
	}
	var names []string
	for _, f := range e.fields {
		names = append(names, indexRE.ReplaceAllString(f.Path, "[]"))
	}
	sort.Strings(names)
	for i, n := range names {
		if i > 0 && names[i-1] == n {
			continue
		}
		if _, seen := s.loggedUnknown.LoadOrStore(e.route+" "+n, true); !seen {
			s.logger().Warn("trace: a write carried a field Hone does not know; kept it as sent in trace_extra_fields",
				"route", e.route, "field", n)
		}
	}
	return s.store.InsertExtraFields(ctx, e.rows)
}

// SetLogger sets where the service logs (the once-per-field warnings about unknown request
// fields); nil is slog.Default().
func (s *Service) SetLogger(l *slog.Logger) { s.log = l }

func (s *Service) logger() *slog.Logger {
	if s.log != nil {
		return s.log
	}
	return slog.Default()
}

// ExtraFields returns the unknown fields kept for target (e.g. "call:<id>", "feedback:<id>").
func (s *Service) ExtraFields(ctx context.Context, project, target string) ([]ExtraFieldsRow, error) {
	return s.store.ExtraFields(ctx, project, target)
}

// conflictErr maps ErrConflict to a 409 naming param.
func conflictErr(err error, param string) error {
	if errors.Is(err, ErrConflict) {
		return fault.Conflict(param, "%s", strings.TrimPrefix(err.Error(), "trace: "))
	}
	return err
}

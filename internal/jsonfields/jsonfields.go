// Package jsonfields tells which JSON object fields a Go struct type decodes, as
// encoding/json sees them: tag names ("-" skipped), field names without a tag, the fields of
// embedded structs, exported fields only. Results are cached per type.
//
//	known := jsonfields.Of(reflect.TypeOf(req)) // {"model": string, "messages": ...}
package jsonfields

import (
	"reflect"
	"strings"
	"sync"
)

var cache sync.Map // reflect.Type -> map[string]reflect.Type

// Of maps the JSON names of t's fields (t or what it points to) to their types; nil when t
// is not a struct.
func Of(t reflect.Type) map[string]reflect.Type {
	if t == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	if m, ok := cache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	walk(t, m)
	cache.Store(t, m)
	return m
}

func walk(t reflect.Type, out map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			walk(ft, out)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
}

// Has tells whether t decodes a JSON field called name.
func Has(t reflect.Type, name string) bool {
	_, ok := Of(t)[name]
	return ok
}

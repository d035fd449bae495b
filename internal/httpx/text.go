package httpx

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/honeai/hone/internal/apierror"
)

// BadText says why s cannot be an identifier, name or key: it holds a NUL character (which
// PostgreSQL's text cannot store) or is not valid UTF-8 (for example a lone UTF-16 surrogate
// arriving percent-encoded or as WTF-8). "" when s is fine.
func BadText(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		return "holds a NUL character (\\u0000)"
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8 (a lone surrogate or a broken byte sequence)"
	}
	return ""
}

// CheckText refuses, with a 400 naming the field by its JSON path, a decoded request whose
// string fields (ids, digests, names, keys: every Go string in v, in structs, slices, arrays,
// maps and pointers) hold a NUL character or invalid UTF-8. Raw JSON values
// (json.RawMessage, []byte) are not strings and are stored as sent.
func CheckText(v any) error { return CheckTextAt(v, nil) }

// CheckTextAt is CheckText for a part of a request whose JSON path path returns (for example
// "batch[3]"), named in the error's field; path is called only when v is refused.
func CheckTextAt(v any, path func() string) error {
	rv := reflect.ValueOf(v)
	if !anyBadText(rv) {
		return nil // the common case: one walk that builds no field paths
	}
	prefix := ""
	if path != nil {
		prefix = "." + path()
	}
	return checkText(rv, prefix)
}

// textPlan is what anyBadText visits of a type: whether any text can be inside it and, for a
// struct, the indexes of the fields that can hold text.
type textPlan struct {
	has    bool
	fields []int
}

var textPlans sync.Map // reflect.Type -> *textPlan

func planOf(t reflect.Type) *textPlan {
	if p, ok := textPlans.Load(t); ok {
		return p.(*textPlan)
	}
	p := buildPlan(t, map[reflect.Type]bool{})
	textPlans.Store(t, p)
	return p
}

// buildPlan computes t's plan; a type met again while it is being planned (a recursive type)
// is assumed to hold text.
func buildPlan(t reflect.Type, visiting map[reflect.Type]bool) *textPlan {
	if p, ok := textPlans.Load(t); ok {
		return p.(*textPlan)
	}
	if visiting[t] {
		return &textPlan{has: true}
	}
	visiting[t] = true
	defer delete(visiting, t)
	p := &textPlan{}
	switch t.Kind() {
	case reflect.String, reflect.Interface:
		p.has = true
	case reflect.Pointer:
		p.has = buildPlan(t.Elem(), visiting).has
	case reflect.Slice, reflect.Array:
		p.has = t.Elem().Kind() != reflect.Uint8 && buildPlan(t.Elem(), visiting).has
	case reflect.Map:
		p.has = t.Key().Kind() == reflect.String || buildPlan(t.Key(), visiting).has || buildPlan(t.Elem(), visiting).has
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == "-" {
				continue
			}
			if buildPlan(f.Type, visiting).has {
				p.fields = append(p.fields, i)
			}
		}
		p.has = len(p.fields) > 0
	}
	return p
}

// anyBadText reports whether checkText would refuse v, without building paths.
func anyBadText(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && anyBadText(v.Elem())
	case reflect.String:
		return BadText(v.String()) != ""
	case reflect.Struct:
		for _, i := range planOf(v.Type()).fields {
			if anyBadText(v.Field(i)) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		if !planOf(v.Type()).has {
			return false
		}
		for i := 0; i < v.Len(); i++ {
			if anyBadText(v.Index(i)) {
				return true
			}
		}
	case reflect.Map:
		if !planOf(v.Type()).has {
			return false
		}
		it := v.MapRange()
		for it.Next() {
			if k := it.Key(); k.Kind() == reflect.String && BadText(k.String()) != "" {
				return true
			}
			if anyBadText(it.Value()) {
				return true
			}
		}
	}
	return false
}

func checkText(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return checkText(v.Elem(), path)
	case reflect.String:
		if why := BadText(v.String()); why != "" {
			name := strings.TrimPrefix(path, ".")
			return apierror.BadRequest(name, "`%s` %s", name, why)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := f.Name
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == "-" {
				continue
			} else if tag != "" {
				name = tag
			}
			sub := path + "." + name
			if f.Anonymous && f.Tag.Get("json") == "" {
				sub = path
			}
			if err := checkText(v.Field(i), sub); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil
		}
		for i := 0; i < v.Len(); i++ {
			if err := checkText(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			k := it.Key()
			if k.Kind() == reflect.String {
				if why := BadText(k.String()); why != "" {
					name := strings.TrimPrefix(path, ".")
					return apierror.BadRequest(name, "a key of `%s` %s", name, why)
				}
			}
			if err := checkText(it.Value(), fmt.Sprintf("%s.%v", path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckParams refuses a request whose path wildcards or query parameters hold a NUL
// character or invalid UTF-8, with a 400 naming the parameter.
func CheckParams() Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := checkParams(r); err != nil {
				apierror.Write(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func checkParams(r *http.Request) error {
	pattern := r.Pattern
	for {
		i := strings.IndexByte(pattern, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(pattern[i:], '}')
		if j < 0 {
			break
		}
		name := strings.TrimSuffix(pattern[i+1:i+j], "...")
		pattern = pattern[i+j+1:]
		if why := BadText(r.PathValue(name)); why != "" {
			return apierror.BadRequest(name, "`%s` %s", name, why)
		}
	}
	for k, vs := range r.URL.Query() {
		if why := BadText(k); why != "" {
			return apierror.BadRequest("", "a query parameter name %s", why)
		}
		for _, v := range vs {
			if why := BadText(v); why != "" {
				return apierror.BadRequest(k, "`%s` %s", k, why)
			}
		}
	}
	return nil
}

package httpx

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
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
func CheckText(v any) error {
	return checkText(reflect.ValueOf(v), "")
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

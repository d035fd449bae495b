package jobs

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// encodeEvent is an event's data as JSON. JSON has no NaN or infinities, so a float that is
// not finite (the loss of a diverged step) is written as the string "NaN", "Infinity" or
// "-Infinity" (as Python's json module spells them) instead of losing the event.
func encodeEvent(data any) ([]byte, error) {
	js, err := json.Marshal(data)
	var uv *json.UnsupportedValueError
	if err == nil || !errors.As(err, &uv) {
		return js, err
	}
	return json.Marshal(finiteTree(reflect.ValueOf(data)))
}

// nonFinite spells a float that JSON cannot hold.
func nonFinite(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return f
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// finiteTree turns v into maps, slices and plain values as encoding/json would write them
// (exported struct fields by their json names, "-" and omitempty honoured), with
// non-finite floats as strings.
func finiteTree(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	if v.Type().Implements(marshalerType) && (v.Kind() != reflect.Pointer || !v.IsNil()) {
		return v.Interface()
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		return nonFinite(v.Float())
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return finiteTree(v.Elem())
	case reflect.Map:
		if v.IsNil() || v.Type().Key().Kind() != reflect.String {
			return v.Interface()
		}
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			out[it.Key().String()] = finiteTree(it.Value())
		}
		return out
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && (v.IsNil() || v.Type().Elem().Kind() == reflect.Uint8) {
			return v.Interface()
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = finiteTree(v.Index(i))
		}
		return out
	case reflect.Struct:
		out := map[string]any{}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" && opts == "" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fv := v.Field(i)
			if strings.Contains(opts, "omitempty") && fv.IsZero() {
				continue
			}
			out[name] = finiteTree(fv)
		}
		return out
	}
	return v.Interface()
}

// withAttempt adds "attempt": n to an event's data object, unless n is 0 (the job never
// ran) or the data is not an object or names an attempt of its own.
func withAttempt(js []byte, n int) []byte {
	if n <= 0 || len(js) < 2 || js[0] != '{' {
		return js
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(js, &keys) != nil {
		return js
	}
	if _, ok := keys["attempt"]; ok {
		return js
	}
	field := `"attempt":` + strconv.Itoa(n)
	if len(keys) == 0 {
		return []byte("{" + field + "}")
	}
	out := make([]byte, 0, len(js)+len(field)+1)
	out = append(out, '{')
	out = append(out, field...)
	out = append(out, ',')
	return append(out, js[1:]...)
}

package gguf

import (
	"errors"
	"fmt"
	"math"
)

// ErrNoKey is wrapped by the errors of Metadata's accessors for a key the file does not have.
var ErrNoKey = errors.New("absent")

// Metadata is a file's key/value metadata, in file order.
//
// Values are Go values of the matching type: uint8, int8, uint16, int16, uint32, int32, float32,
// bool, string, uint64, int64, float64; an array is a slice of its element type ([]string,
// []int32, ...), and an array of arrays is a []any whose elements are such slices (or []any).
type Metadata struct {
	source string
	keys   []string
	values map[string]any
}

// Keys lists the keys in file order.
func (m *Metadata) Keys() []string { return append([]string(nil), m.keys...) }

// Len is the number of keys.
func (m *Metadata) Len() int { return len(m.keys) }

// Has reports whether key is present.
func (m *Metadata) Has(key string) bool { _, ok := m.values[key]; return ok }

// Get returns the raw value of key (see Metadata for the Go types).
func (m *Metadata) Get(key string) (any, bool) {
	v, ok := m.values[key]
	return v, ok
}

func (m *Metadata) get(key string) (any, error) {
	v, ok := m.values[key]
	if !ok {
		return nil, fmt.Errorf("gguf: %s: metadata key %q: %w", m.source, key, ErrNoKey)
	}
	return v, nil
}

func (m *Metadata) wrongType(key string, v any, want string) error {
	return fmt.Errorf("gguf: %s: metadata key %q is %s, not %s", m.source, key, typeName(v), want)
}

// typed returns key's value as a T, or an error saying what it is instead of want.
func typed[T any](m *Metadata, key, want string) (T, error) {
	var zero T
	v, err := m.get(key)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, m.wrongType(key, v, want)
	}
	return t, nil
}

// String returns a string value.
func (m *Metadata) String(key string) (string, error) { return typed[string](m, key, "a string") }

// Bool returns a bool value.
func (m *Metadata) Bool(key string) (bool, error) { return typed[bool](m, key, "a bool") }

// Uint returns an integer value of any integer type that is not negative.
func (m *Metadata) Uint(key string) (uint64, error) {
	v, err := m.get(key)
	if err != nil {
		return 0, err
	}
	u, neg, ok := asInt(v)
	if !ok {
		return 0, m.wrongType(key, v, "an integer")
	}
	if neg {
		return 0, fmt.Errorf("gguf: %s: metadata key %q is negative (%d)", m.source, key, int64(u))
	}
	return u, nil
}

// Int returns an integer value of any integer type that fits an int64.
func (m *Metadata) Int(key string) (int64, error) {
	v, err := m.get(key)
	if err != nil {
		return 0, err
	}
	u, neg, ok := asInt(v)
	if !ok {
		return 0, m.wrongType(key, v, "an integer")
	}
	if !neg && u > math.MaxInt64 {
		return 0, fmt.Errorf("gguf: %s: metadata key %q: %d overflows int64", m.source, key, u)
	}
	return int64(u), nil
}

// Float returns a float32 or float64 value.
func (m *Metadata) Float(key string) (float64, error) {
	v, err := m.get(key)
	if err != nil {
		return 0, err
	}
	switch f := v.(type) {
	case float32:
		return float64(f), nil
	case float64:
		return f, nil
	}
	return 0, m.wrongType(key, v, "a float")
}

// Strings returns an array of strings.
func (m *Metadata) Strings(key string) ([]string, error) {
	return typed[[]string](m, key, "an array of string")
}

// Ints returns an array of any integer type as int64s (a uint64 above MaxInt64 is an error).
func (m *Metadata) Ints(key string) ([]int64, error) {
	v, err := m.get(key)
	if err != nil {
		return nil, err
	}
	var out []int64
	switch a := v.(type) {
	case []uint8:
		out = conv(a)
	case []int8:
		out = conv(a)
	case []uint16:
		out = conv(a)
	case []int16:
		out = conv(a)
	case []uint32:
		out = conv(a)
	case []int32:
		out = conv(a)
	case []int64:
		out = append([]int64(nil), a...)
	case []uint64:
		out = make([]int64, len(a))
		for i, x := range a {
			if x > math.MaxInt64 {
				return nil, fmt.Errorf("gguf: %s: metadata key %q: element %d (%d) overflows int64", m.source, key, i, x)
			}
			out[i] = int64(x)
		}
	default:
		return nil, m.wrongType(key, v, "an array of integers")
	}
	return out, nil
}

// Floats returns an array of float32 or float64 as float64s.
func (m *Metadata) Floats(key string) ([]float64, error) {
	v, err := m.get(key)
	if err != nil {
		return nil, err
	}
	switch a := v.(type) {
	case []float32:
		out := make([]float64, len(a))
		for i, x := range a {
			out[i] = float64(x)
		}
		return out, nil
	case []float64:
		return append([]float64(nil), a...), nil
	}
	return nil, m.wrongType(key, v, "an array of floats")
}

func conv[T uint8 | int8 | uint16 | int16 | uint32 | int32](a []T) []int64 {
	out := make([]int64, len(a))
	for i, x := range a {
		out[i] = int64(x)
	}
	return out
}

// asInt returns an integer value as its bit pattern in a uint64 and whether it is negative.
func asInt(v any) (u uint64, neg, ok bool) {
	switch x := v.(type) {
	case uint8:
		return uint64(x), false, true
	case uint16:
		return uint64(x), false, true
	case uint32:
		return uint64(x), false, true
	case uint64:
		return x, false, true
	case int8:
		return uint64(int64(x)), x < 0, true
	case int16:
		return uint64(int64(x)), x < 0, true
	case int32:
		return uint64(int64(x)), x < 0, true
	case int64:
		return uint64(x), x < 0, true
	}
	return 0, false, false
}

// valueType is the GGUF type of a Go value (and, for an array, its element type); ok is false
// for a Go type that has no GGUF encoding.
func valueType(v any) (t, elem ValueType, ok bool) {
	switch v.(type) {
	case uint8:
		return TypeUint8, 0, true
	case int8:
		return TypeInt8, 0, true
	case uint16:
		return TypeUint16, 0, true
	case int16:
		return TypeInt16, 0, true
	case uint32:
		return TypeUint32, 0, true
	case int32:
		return TypeInt32, 0, true
	case float32:
		return TypeFloat32, 0, true
	case bool:
		return TypeBool, 0, true
	case string:
		return TypeString, 0, true
	case uint64:
		return TypeUint64, 0, true
	case int64:
		return TypeInt64, 0, true
	case float64:
		return TypeFloat64, 0, true
	case []uint8:
		return TypeArray, TypeUint8, true
	case []int8:
		return TypeArray, TypeInt8, true
	case []uint16:
		return TypeArray, TypeUint16, true
	case []int16:
		return TypeArray, TypeInt16, true
	case []uint32:
		return TypeArray, TypeUint32, true
	case []int32:
		return TypeArray, TypeInt32, true
	case []float32:
		return TypeArray, TypeFloat32, true
	case []bool:
		return TypeArray, TypeBool, true
	case []string:
		return TypeArray, TypeString, true
	case []uint64:
		return TypeArray, TypeUint64, true
	case []int64:
		return TypeArray, TypeInt64, true
	case []float64:
		return TypeArray, TypeFloat64, true
	case []any:
		return TypeArray, TypeArray, true
	}
	return 0, 0, false
}

// typeName names a value's GGUF type for error messages ("uint32", "array of string").
func typeName(v any) string {
	t, elem, ok := valueType(v)
	switch {
	case !ok:
		return fmt.Sprintf("Go type %T", v)
	case t == TypeArray:
		return "array of " + elem.String()
	}
	return t.String()
}

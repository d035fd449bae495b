package fault

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
)

// JSON turns an encoding/json decoding error into an Invalid fault naming the field at fault.
// within names the request field that held the JSON ("" for a whole request body); a
// type error's field is named under it (within.field).
func JSON(err error, within string) *Error {
	where := "body"
	if within != "" {
		where = "`" + within + "`"
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return Invalid(within, "Malformed JSON %s: %s (at byte %d)", where, se.Error(), se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return Invalid(within, "Malformed JSON %s: unexpected end of input", where)
	case errors.As(err, &te):
		if te.Field == "" {
			if within == "" {
				return Invalid("", "Request body must be a JSON %s, got %s", JSONKind(te.Type), te.Value)
			}
			return Invalid(within, "%s must be a JSON %s, got %s", where, JSONKind(te.Type), te.Value)
		}
		field := te.Field
		if within != "" {
			field = within + "." + field
		}
		return Invalid(field, "Invalid type for `%s`: expected %s, got %s", field, JSONKind(te.Type), te.Value)
	}
	// Errors from custom UnmarshalJSON methods (already worded for clients) and others.
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if within == "" {
		return Invalid("", "Invalid request body: %s", msg)
	}
	return Invalid(within, "%s is not valid: %s", where, msg)
}

// JSONKind names the JSON type that a Go type decodes: boolean, integer, number, string,
// array, object.
func JSONKind(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return t.String()
}

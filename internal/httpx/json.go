package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"reflect"
	"sort"
	"strings"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/jsonfields"
	"github.com/honeai/hone/internal/pyjson"
)

// DecodeOptions tunes DecodeJSON.
type DecodeOptions struct {
	// Strict rejects unknown top-level fields with a 400 naming them (Weave's strict request
	// models). Nested objects stay lenient. OpenAI-compatible routes leave it false and
	// ignore unknown fields, as vLLM does.
	Strict bool
	// AllowEmpty accepts an empty body as `{}`.
	AllowEmpty bool
	// Text refuses NUL characters and invalid UTF-8 in the decoded strings (CheckText): for
	// requests whose strings are stored as ids, names or keys.
	Text bool
}

// ReadBody reads the whole request body, turning an over-limit body into a 413.
func ReadBody(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n < 1<<30 {
		buf.Grow(int(n) + 1) // one read past the end finds EOF without growing
	}
	_, err := buf.ReadFrom(r.Body)
	body := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(mbe.Limit)
		}
		if f, ok := fault.As(err); ok { // the memory budget for requests (Heavy) is full
			return nil, f
		}
		return nil, apierror.BadRequest("", "Could not read the request body: %v", err)
	}
	return body, nil
}

// CheckJSONContentType accepts application/json, application/*+json and a missing Content-Type;
// anything else is vLLM's 400.
func CheckJSONContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))) {
		return nil
	}
	return apierror.BadRequest("", "Unsupported Media Type: Only 'application/json' is allowed")
}

// DecodeJSON reads r's body into v. Malformed JSON, a wrong type (the message and param name
// the field by its dotted path), unknown top-level fields under Strict and an empty body are
// 400s; a body over the limit is a 413.
func DecodeJSON(r *http.Request, v any, opts DecodeOptions) error {
	if err := CheckJSONContentType(r); err != nil {
		return err
	}
	body, err := ReadBody(r)
	if err != nil {
		return err
	}
	return Unmarshal(body, v, opts)
}

// Unmarshal is DecodeJSON on bytes already read.
func Unmarshal(body []byte, v any, opts DecodeOptions) error {
	if len(bytes.TrimSpace(body)) == 0 {
		if !opts.AllowEmpty {
			return apierror.BadRequest("", "Request body is required: send a JSON object")
		}
		body = []byte("{}")
	}
	if opts.Strict {
		if err := checkKnownFields(body, v); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			te.Field = jsonPath(reflect.TypeOf(v), te.Field)
		}
		return JSONError(err)
	}
	if dec.More() {
		return apierror.BadRequest("", "Malformed JSON body: unexpected data after the top-level value")
	}
	if opts.Text {
		return CheckText(v)
	}
	return nil
}

// jsonPath is a decoding error's field path as the body names it: encoding/json puts the Go
// name of an embedded struct in the path ("Common.temperature"), which is no key of the body.
func jsonPath(t reflect.Type, field string) string {
	var out []string
	for _, part := range strings.Split(field, ".") {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct {
			t = nil
			out = append(out, part)
			continue
		}
		if f, ok := t.FieldByName(part); ok && f.Anonymous && f.Tag.Get("json") == "" {
			t = f.Type
			continue
		}
		var next reflect.Type
		for i := 0; i < t.NumField(); i++ {
			if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name == part {
				next = t.Field(i).Type
			}
		}
		t = next
		out = append(out, part)
	}
	return strings.Join(out, ".")
}

// JSONError turns an encoding/json error into a 400 naming the field (an API error from a
// custom UnmarshalJSON passes through).
func JSONError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var ae *apierror.Error
	if !errors.As(err, &se) && !errors.As(err, &te) && errors.As(err, &ae) {
		return ae
	}
	return apierror.FromFault(fault.JSON(err, ""))
}

func checkKnownFields(body []byte, v any) error {
	known := jsonfields.Of(reflect.TypeOf(v))
	if known == nil {
		return nil
	}
	keys, err := pyjson.TopLevelKeys(body)
	if err != nil {
		// Let the decoder report malformed JSON in its usual words.
		var probe any
		if jerr := json.Unmarshal(body, &probe); jerr != nil {
			return JSONError(jerr)
		}
		if errors.Is(err, pyjson.ErrTooDeep) {
			return apierror.BadRequest("", "Request body nested deeper than %d levels", pyjson.MaxDepth)
		}
		return apierror.BadRequest("", "Request body must be a JSON object")
	}
	var unknown []string
	for _, k := range keys {
		if _, ok := known[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return apierror.BadRequest(unknown[0], "Unknown field(s) in request body: %s", strings.Join(quoteAll(unknown), ", "))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("`%s`", s)
	}
	return out
}

// Reply ends a handler with a service's answer: err in the error envelope
// (apierror.Write), else v as JSON with 200.
func Reply(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, v)
}

// WriteJSON writes v as JSON with status. HTML characters are not escaped. A value that
// marshals itself (json.Marshaler) is written as it produced it, without re-validation.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	if m, ok := v.(json.Marshaler); ok {
		b, err := m.MarshalJSON()
		if err != nil {
			apierror.WriteError(w, apierror.Internal())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(append(b, '\n'))
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		apierror.WriteError(w, apierror.Internal())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// Package otlp takes OpenTelemetry traces (OTLP/HTTP, protobuf or JSON) into the trace store:
// each span becomes a call (its ids, parent, trace, times, status and exception, attributes
// kept), with the attributes of the common LLM instrumentations — OpenInference, the
// OpenTelemetry GenAI semantic conventions (gen_ai.*, the message attributes and events
// included) and OpenLLMetry (Traceloop) — mapped as Weave maps them onto the call's op name,
// inputs and output (chat messages in the shape of an OpenAI request and response, so Hone
// Studio shows them as a conversation), model, token usage (summary.usage, which
// /trace/usage and costs count), thread and turn.
//
// The package knows nothing of HTTP: internal/traceapi serves POST /otel/v1/traces, undoes a
// gzip body and hands the bytes to Ingester.Export. The decoding uses the OTLP protobuf
// definitions of the official go.opentelemetry.io/proto/otlp module.
//
// Usage:
//
//	ing := &otlp.Ingester{Trace: traceSvc}
//	req, err := otlp.Decode(body, otlp.Protobuf) // or otlp.JSON
//	res, err := ing.Export(ctx, req, otlp.Request{Entity: "local", ProjectHeader: "local/app", Authorize: authz})
package otlp

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/pyjson"
)

// Encoding is the encoding of an OTLP/HTTP body.
type Encoding int

const (
	// Protobuf is application/x-protobuf: the binary ExportTraceServiceRequest.
	Protobuf Encoding = iota + 1
	// JSON is application/json: OTLP's JSON mapping (ids as hex strings).
	JSON
)

// maxNesting bounds how deeply the messages of a request may nest (an attribute's value of
// arrays and key-value lists inside each other takes two levels a step): deeper is a
// malformed request, not a stack to grow.
const maxNesting = 48

// Decode reads the body of an export, an ExportTraceServiceRequest, as the TracesData it is
// on the wire (the same message: resource_spans, field 1; TracesData keeps this package clear
// of the collector package's gRPC gateway). A body that is not one is a fault.Invalid (400)
// saying why.
func Decode(body []byte, enc Encoding) (*tracepb.TracesData, error) {
	req := &tracepb.TracesData{}
	switch enc {
	case JSON:
		fixed, err := hexIDsToBase64(body)
		if err != nil {
			return nil, err
		}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true, RecursionLimit: maxNesting}).Unmarshal(fixed, req); err != nil {
			return nil, fault.Invalid("", "Malformed OTLP JSON body: %v", err)
		}
	default:
		if err := (proto.UnmarshalOptions{RecursionLimit: maxNesting}).Unmarshal(body, req); err != nil {
			return nil, fault.Invalid("", "Malformed OTLP protobuf body (an ExportTraceServiceRequest was expected): %v", err)
		}
	}
	return req, nil
}

// hexIDsToBase64 rewrites the ids of an OTLP JSON body, which OTLP writes as hex strings, as
// the base64 protojson reads for bytes fields (a 32-character hex id is also valid base64, so
// it must be rewritten, not guessed).
func hexIDsToBase64(body []byte) ([]byte, error) {
	if err := pyjson.Check(body); err != nil {
		if errors.Is(err, pyjson.ErrTooDeep) {
			return nil, fault.Invalid("", "Malformed OTLP JSON body: nested deeper than %d levels", pyjson.MaxDepth)
		}
		return nil, fault.Invalid("", "Malformed OTLP JSON body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fault.Invalid("", "Malformed OTLP JSON body: %v", err)
	}
	top, ok := root.(map[string]any)
	if !ok {
		return nil, fault.Invalid("", "Malformed OTLP JSON body: an object was expected")
	}
	for ri, rs := range list(top, "resourceSpans", "resource_spans") {
		for si, ss := range list(rs, "scopeSpans", "scope_spans") {
			for i, sp := range list(ss, "spans") {
				at := fmt.Sprintf("resourceSpans[%d].scopeSpans[%d].spans[%d]", ri, si, i)
				for _, k := range [][2]string{{"traceId", "trace_id"}, {"spanId", "span_id"}, {"parentSpanId", "parent_span_id"}} {
					if err := rewriteID(sp, at, k[0], k[1]); err != nil {
						return nil, err
					}
				}
				for li, l := range list(sp, "links") {
					for _, k := range [][2]string{{"traceId", "trace_id"}, {"spanId", "span_id"}} {
						if err := rewriteID(l, fmt.Sprintf("%s.links[%d]", at, li), k[0], k[1]); err != nil {
							return nil, err
						}
					}
				}
			}
		}
	}
	return json.Marshal(top)
}

// list is the array of objects at m[name] (or m[alt]); other values are left for protojson
// to refuse.
func list(m any, names ...string) []map[string]any {
	obj, ok := m.(map[string]any)
	if !ok {
		return nil
	}
	for _, n := range names {
		arr, ok := obj[n].([]any)
		if !ok {
			continue
		}
		out := make([]map[string]any, 0, len(arr))
		for _, el := range arr {
			if o, ok := el.(map[string]any); ok {
				out = append(out, o)
			} else {
				out = append(out, nil)
			}
		}
		return out
	}
	return nil
}

func rewriteID(m map[string]any, at string, names ...string) error {
	for _, n := range names {
		v, ok := m[n]
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return fault.Invalid(at+"."+n, "%s.%s must be a hex string", at, n)
		}
		b, err := hex.DecodeString(s)
		if err != nil {
			return fault.Invalid(at+"."+n, "%s.%s is not a hex id: %q", at, n, clip(s, 64))
		}
		m[n] = base64.StdEncoding.EncodeToString(b)
	}
	return nil
}

// clip shortens s for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

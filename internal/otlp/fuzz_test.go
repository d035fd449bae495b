package otlp

import (
	"context"
	"testing"

	common "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/fault"
)

// FuzzExport decodes bodies as an export (protobuf or OTLP JSON) and writes what decodes: a
// body is a fault (a 4xx) or calls and rejections, never another error or a panic. The seeds
// run in every `go test`.
func FuzzExport(f *testing.F) {
	seeds := []*tracepb.TracesData{
		traces(kvs("wandb.project", "fz"), openInferenceChat(1, 2, 1), span(1, 1, 0, "root")),
		traces(kvs("wandb.entity", "other", "wandb.project", "x"), span(2, 1, 0, "forbidden")),
		traces(nil, span(3, 1, 0, "header"), &tracepb.Span{SpanId: id8(1)}),
		traces(kvs("wandb.project", "fz"), span(4, 1, 0, "genai", "gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"x"}]}]`,
			"gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"tool_call","name":"f","arguments":{"a":[1,{"b":null}]}}]}]`,
			"gen_ai.prompt.0.content", "y", "gen_ai.prompt.99999999999.role", "z", "input.value", `{"messages":[1,2]}`, "output.value", "[[[[]]]]")),
	}
	ev := span(5, 1, 0, "events")
	ev.Events = []*tracepb.Span_Event{{Name: "gen_ai.choice", Attributes: []*common.KeyValue{kv("message", map[string]any{"tool_calls": []any{map[string]any{"function": "x"}}})}},
		{Name: "exception", Attributes: kvs("exception.type", "E")}}
	ev.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR}
	seeds = append(seeds, traces(kvs("wandb.project", "fz"), ev))
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	f.Add([]byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"wandb.project","value":{"stringValue":"fz"}}]},"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"j","startTimeUnixNano":"1"}]}]}]}`), true)
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"x"}]}]}]}`), true)
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00}, false)
	g := newIngester(f, dbtest.SQLite(f))
	f.Fuzz(func(t *testing.T, body []byte, js bool) {
		enc := Protobuf
		if js {
			enc = JSON
		}
		data, err := Decode(body, enc)
		if err != nil {
			if !fault.Is(err, fault.KindInvalid) {
				t.Fatalf("decode: %v", err)
			}
			return
		}
		res, err := g.Export(context.Background(), data, request("ent/fz"))
		if err != nil {
			if _, ok := fault.As(err); !ok {
				t.Fatalf("export: %v", err)
			}
			return
		}
		if res.Rejected < 0 || res.Accepted < 0 {
			t.Fatalf("%+v", res)
		}
	})
}

package otlp

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	common "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/trace"
)

func newIngester(t testing.TB, d *db.DB) *Ingester {
	t.Helper()
	st := trace.NewSQLStore(d)
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &Ingester{Trace: trace.NewService(st)}
}

// request is an export by entity "ent" (its projects only), with project_id header hdr.
func request(hdr string) Request {
	ctx := auth.WithPrincipal(context.Background(), auth.Principal{KeyID: "k", Entity: "ent"})
	return Request{Entity: "ent", ProjectHeader: hdr, Authorize: func(pid, param string) error {
		_, _, err := auth.Project(ctx, pid, param)
		return err
	}}
}

func kv(k string, v any) *common.KeyValue {
	return &common.KeyValue{Key: k, Value: anyValue(v)}
}

func anyValue(v any) *common.AnyValue {
	switch x := v.(type) {
	case string:
		return &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: x}}
	case int:
		return &common.AnyValue{Value: &common.AnyValue_IntValue{IntValue: int64(x)}}
	case float64:
		return &common.AnyValue{Value: &common.AnyValue_DoubleValue{DoubleValue: x}}
	case bool:
		return &common.AnyValue{Value: &common.AnyValue_BoolValue{BoolValue: x}}
	case []any:
		arr := &common.ArrayValue{}
		for _, el := range x {
			arr.Values = append(arr.Values, anyValue(el))
		}
		return &common.AnyValue{Value: &common.AnyValue_ArrayValue{ArrayValue: arr}}
	case map[string]any:
		kvs := &common.KeyValueList{}
		for k, el := range x {
			kvs.Values = append(kvs.Values, kv(k, el))
		}
		return &common.AnyValue{Value: &common.AnyValue_KvlistValue{KvlistValue: kvs}}
	}
	return &common.AnyValue{}
}

func kvs(pairs ...any) []*common.KeyValue {
	var out []*common.KeyValue
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, kv(pairs[i].(string), pairs[i+1]))
	}
	return out
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func id8(n byte) []byte  { return []byte{0, 0, 0, 0, 0, 0, 0, n} }
func id16(n byte) []byte { return append(make([]byte, 15), n) }

func span(traceN, idN, parentN byte, name string, attrs ...any) *tracepb.Span {
	sp := &tracepb.Span{TraceId: id16(traceN), SpanId: id8(idN), Name: name, Kind: tracepb.Span_SPAN_KIND_CLIENT,
		StartTimeUnixNano: uint64(t0.Add(time.Duration(idN) * time.Second).UnixNano()),
		EndTimeUnixNano:   uint64(t0.Add(time.Duration(idN)*time.Second + 500*time.Millisecond).UnixNano()),
		Attributes:        kvs(attrs...)}
	if parentN != 0 {
		sp.ParentSpanId = id8(parentN)
	}
	return sp
}

func traces(resource []*common.KeyValue, spans ...*tracepb.Span) *tracepb.TracesData {
	return &tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{Resource: &resourcepb.Resource{Attributes: resource},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &common.InstrumentationScope{Name: "test", Version: "1"}, Spans: spans}}}}}
}

func calls(t *testing.T, g *Ingester, project string) map[string]trace.CallSchema {
	t.Helper()
	out := map[string]trace.CallSchema{}
	err := g.Trace.CallsQuery(context.Background(), trace.CallsQueryReq{ProjectID: project}, func(c trace.CallSchema) error {
		out[c.ID] = c
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func decodeJSON(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}

func hexID(b []byte) string { return hex.EncodeToString(b) }

// openInferenceChat is what openinference-instrumentation-openai 0.1.66 sends for a chat
// completion (taken from a run against Hone).
func openInferenceChat(traceN, idN, parentN byte) *tracepb.Span {
	return span(traceN, idN, parentN, "ChatCompletion",
		"llm.system", "openai",
		"input.value", `{"model": "demo", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}], "max_tokens": 8}`,
		"input.mime_type", "application/json",
		"output.value", `{"id":"chatcmpl-1","choices":[{"finish_reason":"length","index":0,"message":{"content":"Hi there","role":"assistant"}}],"model":"demo","object":"chat.completion","usage":{"completion_tokens":8,"prompt_tokens":32,"total_tokens":40}}`,
		"output.mime_type", "application/json",
		"llm.invocation_parameters", `{"model": "demo", "max_tokens": 8}`,
		"llm.input_messages.0.message.role", "system",
		"llm.input_messages.0.message.content", "Be brief.",
		"llm.input_messages.1.message.role", "user",
		"llm.input_messages.1.message.content", "Say hi",
		"llm.model_name", "demo",
		"llm.token_count.total", 40,
		"llm.token_count.prompt", 32,
		"llm.token_count.completion", 8,
		"llm.output_messages.0.message.role", "assistant",
		"llm.output_messages.0.message.content", "Hi there",
		"llm.finish_reason", "length",
		"openinference.span.kind", "LLM",
		"session.id", "thread-1")
}

func TestExportOpenInference(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		g := newIngester(t, d)
		ctx := context.Background()
		root := span(1, 1, 0, "agent-turn", "openinference.span.kind", "CHAIN", "input.value", "Say hi", "output.value", "Hi there", "session.id", "thread-1")
		res, err := g.Export(ctx, traces(kvs("wandb.entity", "ent", "wandb.project", "oi", "service.name", "app"),
			openInferenceChat(1, 2, 1), openInferenceChat(1, 3, 1), root), request(""))
		if err != nil || res.Rejected != 0 || res.Accepted != 3 {
			t.Fatalf("%+v %v", res, err)
		}
		cs := calls(t, g, "ent/oi")
		if len(cs) != 3 {
			t.Fatalf("%d calls", len(cs))
		}
		rc, ok := cs[hexID(id8(1))]
		if !ok {
			t.Fatalf("no root call: %v", cs)
		}
		if rc.ParentID != nil || rc.TraceID != hexID(id16(1)) || rc.OpName != "agent-turn" {
			t.Fatalf("root %+v", rc)
		}
		if rc.ThreadID == nil || *rc.ThreadID != "thread-1" || rc.TurnID == nil || *rc.TurnID != rc.ID {
			t.Fatalf("root thread %v turn %v", rc.ThreadID, rc.TurnID)
		}
		if got := decodeJSON(t, rc.Inputs); got["input.value"] != "Say hi" {
			t.Fatalf("root inputs %s", rc.Inputs)
		}
		if string(rc.Output) != `"Hi there"` {
			t.Fatalf("root output %s", rc.Output)
		}
		c := cs[hexID(id8(2))]
		if c.ParentID == nil || *c.ParentID != rc.ID || c.TraceID != rc.TraceID {
			t.Fatalf("child %+v", c)
		}
		if c.TurnID != nil || c.ThreadID == nil {
			t.Fatalf("a child is in the thread, not a turn: %v %v", c.ThreadID, c.TurnID)
		}
		in := decodeJSON(t, c.Inputs)
		msgs, _ := in["messages"].([]any)
		if len(msgs) != 2 || msgs[1].(map[string]any)["role"] != "user" || in["max_tokens"] != 8.0 {
			t.Fatalf("inputs %s", c.Inputs)
		}
		out := decodeJSON(t, c.Output)
		ch := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
		if ch["role"] != "assistant" || ch["content"] != "Hi there" {
			t.Fatalf("output %s", c.Output)
		}
		sum := decodeJSON(t, c.Summary)
		u := sum["usage"].(map[string]any)["demo"].(map[string]any)
		if u["prompt_tokens"] != 32.0 || u["completion_tokens"] != 8.0 || u["total_tokens"] != 40.0 || u["requests"] != 1.0 {
			t.Fatalf("usage %s", c.Summary)
		}
		at := decodeJSON(t, c.Attributes)
		if at["model"] != "demo" || at["kind"] != "LLM" || at["system"] != "openai" {
			t.Fatalf("attributes %s", c.Attributes)
		}
		if mp, _ := at["model_parameters"].(map[string]any); mp["max_tokens"] != 8.0 {
			t.Fatalf("model_parameters %s", c.Attributes)
		}
		ot := at["otel"].(map[string]any)
		kept := ot["attributes"].(map[string]any)
		if kept["llm.token_count.prompt"] != 32.0 || kept["session.id"] != "thread-1" {
			t.Fatalf("attributes not kept: %s", c.Attributes)
		}
		for k := range kept {
			if strings.HasPrefix(k, "llm.input_messages") || k == "input.value" || k == "output.value" {
				t.Fatalf("%s kept twice (in inputs or output and in attributes)", k)
			}
		}
		if ot["span_kind"] != "CLIENT" || ot["resource"].(map[string]any)["service.name"] != "app" || ot["scope"].(map[string]any)["name"] != "test" {
			t.Fatalf("otel %v", ot)
		}
		if c.StartedAt == nil || !strings.HasPrefix(*c.StartedAt, "2026-03-01T12:00:02") || c.EndedAt == nil || !strings.HasPrefix(*c.EndedAt, "2026-03-01T12:00:02.5") {
			t.Fatalf("times %v %v", *c.StartedAt, *c.EndedAt)
		}
		if c.WBUserID == nil || *c.WBUserID != "ent" {
			t.Fatalf("wb_user_id %v", c.WBUserID)
		}
		// The root's usage rolls up both chat calls.
		usage, err := g.Trace.TraceUsage(ctx, trace.TraceUsageReq{ProjectID: "ent/oi"})
		if err != nil {
			t.Fatal(err)
		}
		ru := usage.CallUsage[rc.ID]["demo"]
		if ru == nil || ru.PromptTokens != 64 || ru.CompletionTokens != 16 || ru.Requests != 2 {
			t.Fatalf("rolled-up usage %+v", ru)
		}
		// A retry of the same export is the same calls.
		if _, err := g.Export(ctx, traces(kvs("wandb.entity", "ent", "wandb.project", "oi"), openInferenceChat(1, 2, 1)), request("")); err != nil {
			t.Fatal(err)
		}
		if n := len(calls(t, g, "ent/oi")); n != 3 {
			t.Fatalf("%d calls after a retry", n)
		}
	})
}

func TestExportGenAIConventions(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		g := newIngester(t, d)
		ctx := context.Background()
		// OpenLLMetry 0.62 and the GenAI conventions' message attributes.
		latest := span(2, 1, 0, "openai.chat", "gen_ai.operation.name", "chat", "gen_ai.provider.name", "openai",
			"gen_ai.request.model", "demo", "gen_ai.request.max_tokens", 8, "gen_ai.response.model", "demo-1",
			"gen_ai.system_instructions", `[{"type":"text","content":"Be brief."}]`,
			"gen_ai.input.messages", `[{"role": "user", "parts": [{"content": "Weather?", "type": "text"}]}, {"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"weather","arguments":{"city":"Oslo"}}]}, {"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"sunny"}]}]`,
			"gen_ai.output.messages", `[{"role": "assistant", "parts": [{"content": "Sunny.", "type": "text"}], "finish_reason": "stop"}]`,
			"gen_ai.usage.input_tokens", 32, "gen_ai.usage.output_tokens", 8, "gen_ai.usage.cache_read.input_tokens", 16,
			"gen_ai.conversation.id", "conv-9")
		// The conventions before the message attributes (gen_ai.prompt.<i>, OpenLLMetry's older releases).
		legacy := span(2, 2, 1, "openai.chat", "llm.request.type", "chat", "gen_ai.system", "openai", "gen_ai.request.model", "demo",
			"gen_ai.prompt.0.role", "user", "gen_ai.prompt.0.content", "Hello",
			"gen_ai.completion.0.role", "assistant", "gen_ai.completion.0.finish_reason", "tool_calls",
			"gen_ai.completion.0.tool_calls.0.id", "t1", "gen_ai.completion.0.tool_calls.0.name", "lookup",
			"gen_ai.completion.0.tool_calls.0.arguments", `{"q":"x"}`,
			"gen_ai.usage.prompt_tokens", 5, "gen_ai.usage.completion_tokens", 7, "llm.usage.total_tokens", 12,
			"llm.request.functions.0.name", "lookup", "llm.request.functions.0.parameters", `{"type":"object"}`,
			"traceloop.span.kind", "task")
		// Message events on the span (gen_ai.*.message, gen_ai.choice).
		events := span(2, 3, 1, "chat demo", "gen_ai.operation.name", "chat", "gen_ai.request.model", "demo")
		events.Events = []*tracepb.Span_Event{
			{Name: "gen_ai.system.message", Attributes: kvs("content", "Be kind.")},
			{Name: "gen_ai.user.message", Attributes: kvs("content", "Hi")},
			{Name: "gen_ai.choice", Attributes: kvs("index", 0, "finish_reason", "stop", "message", map[string]any{"role": "assistant", "content": "Hello!"})},
			{Name: "custom.event", Attributes: kvs("x", 1)},
		}
		res, err := g.Export(ctx, traces(kvs("wandb.project", "genai"), latest, legacy, events), request(""))
		if err != nil || res.Rejected != 0 {
			t.Fatalf("%+v %v", res, err)
		}
		cs := calls(t, g, "ent/genai") // wandb.project alone: the key's entity
		c := cs[hexID(id8(1))]
		in := decodeJSON(t, c.Inputs)
		msgs := in["messages"].([]any)
		if len(msgs) != 4 || msgs[0].(map[string]any)["role"] != "system" || msgs[0].(map[string]any)["content"] != "Be brief." ||
			msgs[1].(map[string]any)["content"] != "Weather?" || in["model"] != "demo-1" {
			t.Fatalf("inputs %s", c.Inputs)
		}
		tc := msgs[2].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
		if tc["id"] != "c1" || tc["function"].(map[string]any)["arguments"] != `{"city":"Oslo"}` {
			t.Fatalf("tool call %v", tc)
		}
		if m := msgs[3].(map[string]any); m["tool_call_id"] != "c1" || m["content"] != "sunny" {
			t.Fatalf("tool message %v", m)
		}
		out := decodeJSON(t, c.Output)
		ch := out["choices"].([]any)[0].(map[string]any)
		if ch["finish_reason"] != "stop" || ch["message"].(map[string]any)["content"] != "Sunny." {
			t.Fatalf("output %s", c.Output)
		}
		u := decodeJSON(t, c.Summary)["usage"].(map[string]any)["demo-1"].(map[string]any)
		if u["input_tokens"] != 32.0 || u["output_tokens"] != 8.0 || u["total_tokens"] != 40.0 || u["cache_read_input_tokens"] != 16.0 || u["prompt_tokens"] != nil {
			t.Fatalf("usage %s", c.Summary)
		}
		if c.ThreadID == nil || *c.ThreadID != "conv-9" || c.TurnID == nil {
			t.Fatalf("thread %v turn %v", c.ThreadID, c.TurnID)
		}
		at := decodeJSON(t, c.Attributes)
		if at["operation"] != "chat" || at["provider"] != "openai" || at["model_parameters"].(map[string]any)["max_tokens"] != 8.0 {
			t.Fatalf("attributes %s", c.Attributes)
		}

		l := cs[hexID(id8(2))]
		in = decodeJSON(t, l.Inputs)
		if m := in["messages"].([]any)[0].(map[string]any); m["content"] != "Hello" {
			t.Fatalf("legacy inputs %s", l.Inputs)
		}
		if tools := in["tools"].([]any); tools[0].(map[string]any)["function"].(map[string]any)["name"] != "lookup" {
			t.Fatalf("legacy tools %s", l.Inputs)
		}
		out = decodeJSON(t, l.Output)
		ch = out["choices"].([]any)[0].(map[string]any)
		tcs := ch["message"].(map[string]any)["tool_calls"].([]any)
		if ch["finish_reason"] != "tool_calls" || tcs[0].(map[string]any)["function"].(map[string]any)["name"] != "lookup" {
			t.Fatalf("legacy output %s", l.Output)
		}
		u = decodeJSON(t, l.Summary)["usage"].(map[string]any)["demo"].(map[string]any)
		if u["prompt_tokens"] != 5.0 || u["completion_tokens"] != 7.0 || u["total_tokens"] != 12.0 {
			t.Fatalf("legacy usage %s", l.Summary)
		}

		e := cs[hexID(id8(3))]
		in = decodeJSON(t, e.Inputs)
		if msgs := in["messages"].([]any); len(msgs) != 2 || msgs[0].(map[string]any)["role"] != "system" {
			t.Fatalf("event inputs %s", e.Inputs)
		}
		out = decodeJSON(t, e.Output)
		if out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"] != "Hello!" {
			t.Fatalf("event output %s", e.Output)
		}
		evs := decodeJSON(t, e.Attributes)["otel"].(map[string]any)["events"].([]any)
		if len(evs) != 1 || evs[0].(map[string]any)["name"] != "custom.event" {
			t.Fatalf("events kept: %v", evs)
		}
	})
}

func TestExportStatusAndException(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		g := newIngester(t, d)
		failed := span(3, 1, 0, "tool", "input", `{"a":1}`)
		failed.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "ValueError: bad"}
		failed.Events = []*tracepb.Span_Event{{Name: "exception", TimeUnixNano: failed.StartTimeUnixNano,
			Attributes: kvs("exception.type", "ValueError", "exception.message", "bad", "exception.stacktrace", "Traceback...")}}
		plain := span(3, 2, 0, "errored")
		plain.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "it broke"}
		ok := span(3, 3, 0, "fine", "custom.n", 1.5, "custom.b", true, "custom.nan", "x")
		ok.EndTimeUnixNano = 0 // not ended: ends when it started
		if _, err := g.Export(context.Background(), traces(kvs("wandb.entity", "ent", "wandb.project", "st"), failed, plain, ok), request("")); err != nil {
			t.Fatal(err)
		}
		cs := calls(t, g, "ent/st")
		ex := cs[hexID(id8(1))].Exception
		var x map[string]any
		if ex == nil || json.Unmarshal([]byte(*ex), &x) != nil || x["type"] != "ValueError" || x["message"] != "bad" {
			t.Fatalf("exception %v", ex)
		}
		if in := decodeJSON(t, cs[hexID(id8(1))].Inputs); in["a"] != 1.0 {
			t.Fatalf("inputs %s", cs[hexID(id8(1))].Inputs)
		}
		if ex := cs[hexID(id8(2))].Exception; ex == nil || *ex != "it broke" {
			t.Fatalf("exception %v", ex)
		}
		f := cs[hexID(id8(3))]
		if f.Exception != nil || f.EndedAt == nil || *f.EndedAt != *f.StartedAt {
			t.Fatalf("fine: %v %v %v", f.Exception, f.StartedAt, f.EndedAt)
		}
		if st := decodeJSON(t, f.Summary)["weave"].(map[string]any)["status"]; st != "success" {
			t.Fatalf("status %v", st)
		}
		if st := decodeJSON(t, cs[hexID(id8(1))].Summary)["weave"].(map[string]any)["status"]; st != "error" {
			t.Fatalf("status %v", st)
		}
	})
}

func TestExportRouting(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		g := newIngester(t, d)
		ctx := context.Background()
		// The header routes spans whose resource names no project; a resource's project wins.
		res, err := g.Export(ctx, &tracepb.TracesData{ResourceSpans: append(
			traces(nil, span(4, 1, 0, "a")).ResourceSpans,
			traces(kvs("wandb.entity", "ent", "wandb.project", "res"), span(4, 2, 0, "b")).ResourceSpans...)}, request("ent/hdr"))
		if err != nil || res.Accepted != 2 {
			t.Fatalf("%+v %v", res, err)
		}
		if len(calls(t, g, "ent/hdr")) != 1 || len(calls(t, g, "ent/res")) != 1 {
			t.Fatal("routing")
		}
		// No project anywhere: a 400 naming project_id.
		_, err = g.Export(ctx, traces(nil, span(4, 3, 0, "c")), request(""))
		if f, ok := fault.As(err); !ok || f.Kind != fault.KindInvalid || f.Field != "project_id" {
			t.Fatalf("no project: %v", err)
		}
		// Another entity's project: a 403, nothing written.
		_, err = g.Export(ctx, traces(kvs("wandb.entity", "other", "wandb.project", "p"), span(4, 4, 0, "d")), request(""))
		if f, ok := fault.As(err); !ok || f.Kind != fault.KindForbidden {
			t.Fatalf("other entity: %v", err)
		}
		_, err = g.Export(ctx, traces(nil, span(4, 4, 0, "d")), request("other/p"))
		if f, ok := fault.As(err); !ok || f.Kind != fault.KindForbidden || f.Field != "project_id" {
			t.Fatalf("other entity's header: %v", err)
		}
		_, err = g.Export(ctx, traces(nil, span(4, 4, 0, "d")), request("not-a-project"))
		if f, ok := fault.As(err); !ok || f.Kind != fault.KindInvalid {
			t.Fatalf("malformed header: %v", err)
		}
		// Mixed: the other entity's resource is rejected, the rest written (partial success).
		res, err = g.Export(ctx, &tracepb.TracesData{ResourceSpans: append(
			traces(kvs("wandb.entity", "other", "wandb.project", "p"), span(4, 5, 0, "e"), span(4, 6, 0, "f")).ResourceSpans,
			traces(kvs("wandb.project", "res"), span(4, 7, 0, "g")).ResourceSpans...)}, request(""))
		if err != nil || res.Accepted != 1 || res.Rejected != 2 || !strings.Contains(res.Message, "entity") {
			t.Fatalf("%+v %v", res, err)
		}
		// Spans whose parents never arrived are calls all the same (OTel exports children first).
		res, err = g.Export(ctx, traces(kvs("wandb.project", "orphans"), span(5, 2, 9, "child")), request(""))
		if err != nil || res.Accepted != 1 {
			t.Fatalf("%+v %v", res, err)
		}
		if c := calls(t, g, "ent/orphans")[hexID(id8(2))]; c.ParentID == nil || *c.ParentID != hexID(id8(9)) {
			t.Fatalf("orphan %+v", c)
		}
		// The same span id in two projects is two calls.
		if _, err := g.Export(ctx, traces(kvs("wandb.project", "twin"), span(5, 2, 9, "child")), request("")); err != nil {
			t.Fatal(err)
		}
		if len(calls(t, g, "ent/twin")) != 1 || len(calls(t, g, "ent/orphans")) != 1 {
			t.Fatal("span ids are per project")
		}
	})
}

func TestExportRejectsBadSpans(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		g := newIngester(t, d)
		g.Limits = Limits{MaxAttributes: 8, MaxEvents: 2, MaxCallBytes: 4096}
		bad := []*tracepb.Span{
			{TraceId: id16(6), SpanId: make([]byte, 8), Name: "zero id", StartTimeUnixNano: 1},
			{TraceId: id16(6), SpanId: []byte{1, 2}, Name: "short id", StartTimeUnixNano: 1},
			{TraceId: make([]byte, 16), SpanId: id8(3), Name: "zero trace", StartTimeUnixNano: 1},
			{TraceId: id16(6), SpanId: id8(4), Name: "", StartTimeUnixNano: 1},
			{TraceId: id16(6), SpanId: id8(5), Name: "nul\x00name", StartTimeUnixNano: 1},
			{TraceId: id16(6), SpanId: id8(6), Name: "no start"},
			{TraceId: id16(6), SpanId: id8(7), Name: "self parent", ParentSpanId: id8(7), StartTimeUnixNano: 1},
			{TraceId: id16(6), SpanId: id8(8), Name: "bad parent", ParentSpanId: []byte{1}, StartTimeUnixNano: 1},
			span(6, 9, 0, "attribute bomb", "a0", 0, "a1", 1, "a2", 2, "a3", 3, "a4", 4, "a5", 5, "a6", 6, "a7", 7, "a8", 8),
			{TraceId: id16(6), SpanId: id8(10), Name: "events", StartTimeUnixNano: 1, Events: make([]*tracepb.Span_Event, 3)},
			span(6, 11, 0, "big", "input.value", strings.Repeat("x", 5000)),
		}
		good := span(6, 12, 0, "good", "wandb.display_name", "Nice", "wandb.thread_id", "nul\x00thread")
		long := span(6, 13, 0, strings.Repeat("é", 100))
		res, err := g.Export(context.Background(), traces(kvs("wandb.project", "bad"), append(bad, good, long)...), request(""))
		if err != nil {
			t.Fatal(err)
		}
		if res.Accepted != 2 || res.Rejected != int64(len(bad)) {
			t.Fatalf("%+v", res)
		}
		for _, want := range []string{"span_id must be 8 bytes", "trace_id", "name is empty", "NUL", "start_time_unix_nano", "own parent",
			"parent_span_id", "9 attributes, more than the 8", "3 events", "bytes, more than"} {
			if !strings.Contains(res.Message, want) {
				t.Errorf("message lacks %q: %s", want, res.Message)
			}
		}
		cs := calls(t, g, "ent/bad")
		c := cs[hexID(id8(12))]
		if c.DisplayName == nil || *c.DisplayName != "Nice" || c.ThreadID != nil {
			t.Fatalf("display %v thread %v", c.DisplayName, c.ThreadID)
		}
		op := cs[hexID(id8(13))].OpName
		if len(op) > maxOpName || !strings.HasPrefix(op, "éé") || !strings.Contains(op, ":") {
			t.Fatalf("long name: %q", op)
		}
		// More spans than allowed: the request is refused whole.
		g.Limits.MaxSpans = 2
		_, err = g.Export(context.Background(), traces(kvs("wandb.project", "bad"), span(6, 20, 0, "a"), span(6, 21, 0, "b"), span(6, 22, 0, "c")), request(""))
		if f, ok := fault.As(err); !ok || f.Kind != fault.KindTooLarge || f.Field != "resource_spans" {
			t.Fatalf("too many spans: %v", err)
		}
	})
}

func TestDecode(t *testing.T) {
	data := traces(kvs("wandb.project", "p"), openInferenceChat(7, 1, 0))
	bin, err := proto.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(bin, Protobuf)
	if err != nil || !proto.Equal(got, data) {
		t.Fatalf("protobuf: %v", err)
	}
	// OTLP JSON: ids are hex.
	js := fmt.Sprintf(`{"resourceSpans":[{"resource":{"attributes":[{"key":"wandb.project","value":{"stringValue":"p"}}]},
		"scopeSpans":[{"scope":{"name":"s"},"spans":[{"traceId":"%s","spanId":"%s","parentSpanId":"","name":"n","kind":3,
		"startTimeUnixNano":"1740830400000000000","endTimeUnixNano":1740830401000000000,
		"attributes":[{"key":"llm.token_count.prompt","value":{"intValue":"5"}}],"unknownField":1,
		"links":[{"traceId":"%s","spanId":"%s"}]}]}]}]}`,
		"0102030405060708090a0b0c0d0e0f10", "0102030405060708", "0102030405060708090a0b0c0d0e0f10", "1112131415161718")
	got, err = Decode([]byte(js), JSON)
	if err != nil {
		t.Fatal(err)
	}
	sp := got.ResourceSpans[0].ScopeSpans[0].Spans[0]
	if hex.EncodeToString(sp.TraceId) != "0102030405060708090a0b0c0d0e0f10" || hex.EncodeToString(sp.SpanId) != "0102030405060708" ||
		sp.Kind != tracepb.Span_SPAN_KIND_CLIENT || sp.Attributes[0].Value.GetIntValue() != 5 || hex.EncodeToString(sp.Links[0].SpanId) != "1112131415161718" {
		t.Fatalf("%v", protojson.Format(sp))
	}
	for _, bad := range []string{`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}`, `[]`, `{`, `{"resourceSpans":1}`,
		strings.Repeat("[", 300) + strings.Repeat("]", 300), `{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":7}]}]}]}`} {
		if _, err := Decode([]byte(bad), JSON); !fault.Is(err, fault.KindInvalid) {
			t.Errorf("%.40s: %v", bad, err)
		}
	}
	for _, bad := range [][]byte{{0xff, 0xff, 0xff}, []byte("not protobuf at all"), {0x0a, 0x05, 0x01}} {
		if _, err := Decode(bad, Protobuf); !fault.Is(err, fault.KindInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// Nesting past the bound is malformed, not a deep stack.
	v := anyValue("leaf")
	for range 60 {
		v = &common.AnyValue{Value: &common.AnyValue_ArrayValue{ArrayValue: &common.ArrayValue{Values: []*common.AnyValue{v}}}}
	}
	deep := traces(nil, span(7, 2, 0, "deep"))
	deep.ResourceSpans[0].ScopeSpans[0].Spans[0].Attributes = []*common.KeyValue{{Key: "deep", Value: v}}
	bin, _ = proto.Marshal(deep)
	if _, err := Decode(bin, Protobuf); !fault.Is(err, fault.KindInvalid) {
		t.Fatalf("deep: %v", err)
	}
}

// TestExportCosts: an OTel call's usage is priced like any call's (include_costs).
func TestExportCosts(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		g := newIngester(t, d)
		ctx := context.Background()
		sp := span(8, 1, 0, "chat gpt-4o", "gen_ai.operation.name", "chat", "gen_ai.request.model", "gpt-4o",
			"gen_ai.usage.input_tokens", 1000, "gen_ai.usage.output_tokens", 100)
		if _, err := g.Export(ctx, traces(kvs("wandb.project", "costs"), sp), request("")); err != nil {
			t.Fatal(err)
		}
		var got trace.CallSchema
		if err := g.Trace.CallsQuery(ctx, trace.CallsQueryReq{ProjectID: "ent/costs", IncludeCosts: true}, func(c trace.CallSchema) error {
			got = c
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		cost := decodeJSON(t, got.Summary)["weave"].(map[string]any)["costs"].(map[string]any)["gpt-4o"].(map[string]any)
		if p, c := cost["prompt_tokens_total_cost"].(float64), cost["completion_tokens_total_cost"].(float64); p < 0.0024 || p > 0.0026 || c < 0.00099 || c > 0.00101 {
			t.Fatalf("costs %v", cost)
		}
	})
}

package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestFuzzOTLP (the fuzz and fault suite, -run Fuzz): hostile exports to /otel/v1/traces on
// both stores — byte flips and cuts of valid protobuf and OTLP JSON bodies, spans whose
// parents never arrive, another entity's projects, attribute bombs (many attributes, deep
// values, huge keys, dotted keys nested thousands deep, indexes past any list), a gzip bomb,
// bodies over the limit, NUL and control characters — are 200 (with partial success where
// spans are rejected) or a 4xx in the envelope, never a 5xx; the node answers afterwards.
func TestFuzzOTLP(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		data := t.TempDir()
		const limit = 1 << 20
		s := startServer(t, data, append([]string{"--max-body-bytes", fmt.Sprint(limit), "--train-workers", "0"}, st.args...)...)
		key := initialKey(t, data)
		rng := rand.New(rand.NewPCG(37, 1))
		res := func(kvs ...*common.KeyValue) []*common.KeyValue { return kvs }
		mine := res(otelStr("wandb.entity", "local"), otelStr("wandb.project", "fuzz"))

		var bodies []struct {
			name string
			body []byte
			hdrs []string
		}
		add := func(name string, b []byte, hdrs ...string) {
			if len(hdrs) == 0 {
				hdrs = []string{"Content-Type", "application/x-protobuf"}
			}
			bodies = append(bodies, struct {
				name string
				body []byte
				hdrs []string
			}{name, b, hdrs})
		}
		pb := func(req *coltrace.ExportTraceServiceRequest) []byte {
			b, err := proto.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		chat := otelSpan(1, 2, 1, "openai.chat", otelStr("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]`),
			otelStr("llm.input_messages.0.message.role", "user"), otelStr("input.value", `{"messages":[{"role":"user","content":"x"}]}`),
			otelInt("gen_ai.usage.input_tokens", 5))
		valid := pb(otelExport(mine, chat, otelSpan(1, 1, 0, "root")))
		add("valid", valid)

		// Unknown parents, another entity, no project, mixed.
		add("unknown parents", pb(otelExport(mine, otelSpan(2, 1, 77, "orphan"), otelSpan(2, 2, 78, "orphan"))))
		add("other entity", pb(otelExport(res(otelStr("wandb.entity", "mallory"), otelStr("wandb.project", "x")), otelSpan(3, 1, 0, "x"))))
		add("other entity's header", pb(otelExport(nil, otelSpan(3, 2, 0, "x"))), "Content-Type", "application/x-protobuf", "project_id", "mallory/x")
		add("no project", pb(otelExport(nil, otelSpan(3, 3, 0, "x"))))
		mixed := otelExport(mine, otelSpan(3, 4, 0, "ok"))
		mixed.ResourceSpans = append(mixed.ResourceSpans, otelExport(res(otelStr("wandb.entity", "mallory"), otelStr("wandb.project", "x")), otelSpan(3, 5, 0, "x")).ResourceSpans...)
		add("mixed entities", pb(mixed))

		// Attribute bombs.
		many := otelSpan(4, 1, 0, "many")
		for i := range 5000 {
			many.Attributes = append(many.Attributes, otelInt(fmt.Sprintf("a%d", i), int64(i)))
		}
		add("5000 attributes", pb(otelExport(mine, many)))
		deep := &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: "leaf"}}
		for range 200 {
			deep = &common.AnyValue{Value: &common.AnyValue_KvlistValue{KvlistValue: &common.KeyValueList{Values: []*common.KeyValue{{Key: "k", Value: deep}}}}}
		}
		ds := otelSpan(4, 2, 0, "deep")
		ds.Attributes = append(ds.Attributes, &common.KeyValue{Key: "deep", Value: deep})
		add("deep value", pb(otelExport(mine, ds)))
		add("dotted key", pb(otelExport(mine, otelSpan(4, 3, 0, "dots", otelStr(strings.Repeat("a.", 20000)+"b", "x"),
			otelStr("llm.input_messages."+strings.Repeat("0.", 5000)+"message.role", "user")))))
		add("huge index", pb(otelExport(mine, otelSpan(4, 4, 0, "idx", otelStr("gen_ai.prompt.99999999999999999999.content", "x"),
			otelStr("gen_ai.prompt.-1.role", "user"), otelStr("llm.output_messages.1048576.message.content", "y")))))
		add("JSON bombs in strings", pb(otelExport(mine, otelSpan(4, 5, 0, "jb", otelStr("input.value", strings.Repeat("[", 100000)),
			otelStr("output.value", strings.Repeat(`{"a":`, 300)+"1"+strings.Repeat("}", 300)),
			otelStr("gen_ai.input.messages", `[{"role":"user","parts":`+strings.Repeat("[", 250)+strings.Repeat("]", 250)+`}]`)))))
		add("NUL and controls", pb(otelExport(res(otelStr("wandb.entity", "local"), otelStr("wandb.project", "fu\x00zz")), otelSpan(4, 6, 0, "n\x00ul"))))
		add("NUL thread", pb(otelExport(mine, otelSpan(4, 7, 0, "t", otelStr("wandb.thread_id", "a\x00b"), otelStr("wandb.display_name", "\x00"),
			otelStr("gen_ai.input.messages", "[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"\\u0000\"}]}]")))))
		events := otelSpan(4, 8, 0, "events")
		for range 3000 {
			events.Events = append(events.Events, &tracepb.Span_Event{Name: "gen_ai.user.message", Attributes: []*common.KeyValue{otelStr("content", "x")}})
		}
		add("3000 events", pb(otelExport(mine, events)))
		spans := otelExport(mine)
		for i := range 12000 {
			spans.ResourceSpans[0].ScopeSpans[0].Spans = append(spans.ResourceSpans[0].ScopeSpans[0].Spans,
				&tracepb.Span{TraceId: append(make([]byte, 15), 9), SpanId: []byte{0, 0, 0, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)}, Name: "s", StartTimeUnixNano: 1})
		}
		add("12000 spans", pb(spans))
		big := otelSpan(4, 9, 0, "big", otelStr("input.value", strings.Repeat("x", limit)))
		add("over the limit", pb(otelExport(mine, big)))
		var gzb bytes.Buffer
		zw := gzip.NewWriter(&gzb)
		zw.Write(bytes.Repeat([]byte{0x0a}, 8*limit))
		zw.Close()
		add("gzip bomb", gzb.Bytes(), "Content-Type", "application/x-protobuf", "Content-Encoding", "gzip")
		add("truncated gzip", gzb.Bytes()[:gzb.Len()/2], "Content-Type", "application/x-protobuf", "Content-Encoding", "gzip")

		// Byte flips and cuts of the valid bodies, protobuf and JSON.
		js := []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"wandb.project","value":{"stringValue":"fuzz"}}]},"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","parentSpanId":"1112131415161718","name":"j","startTimeUnixNano":"1740830400000000000","endTimeUnixNano":"1740830400000000001","attributes":[{"key":"llm.token_count.prompt","value":{"intValue":"5"}},{"key":"gen_ai.output.messages","value":{"stringValue":"[{\"role\":\"assistant\",\"parts\":[]}]"}}],"status":{"code":2,"message":"x"},"events":[{"name":"exception","attributes":[{"key":"exception.type","value":{"stringValue":"E"}}]}]}]}]}]}`)
		add("valid JSON", js, "Content-Type", "application/json")
		for i := range 300 {
			src, ct := valid, "application/x-protobuf"
			if i%3 == 0 {
				src, ct = js, "application/json"
			}
			b := append([]byte(nil), src...)
			switch i % 4 {
			case 0:
				for range 1 + rng.IntN(4) {
					b[rng.IntN(len(b))] = byte(rng.IntN(256))
				}
			case 1:
				b = b[:rng.IntN(len(b))]
			case 2:
				j := rng.IntN(len(b))
				b = append(b[:j], append([]byte{byte(rng.IntN(256)), byte(rng.IntN(256))}, b[j:]...)...)
			case 3:
				b[rng.IntN(len(b))] ^= 0x80
			}
			add(fmt.Sprintf("mutation %d", i), b, "Content-Type", ct)
		}

		counts := map[int]int{}
		for _, c := range bodies {
			req, _ := http.NewRequest("POST", s.url+"/otel/v1/traces", bytes.NewReader(c.body))
			req.Header.Set("wandb-api-key", key)
			for i := 0; i+1 < len(c.hdrs); i += 2 {
				req.Header.Set(c.hdrs[i], c.hdrs[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			counts[resp.StatusCode]++
			if !strings.HasPrefix(c.name, "mutation") {
				t.Logf("%s: %d %.200s", c.name, resp.StatusCode, body)
			}
			switch {
			case resp.StatusCode >= 500:
				t.Errorf("%s: %d %s", c.name, resp.StatusCode, body)
			case resp.StatusCode >= 400:
				if bad := checkEnvelope(resp, body); bad != "" {
					t.Errorf("%s: %d not in the envelope (%s): %s", c.name, resp.StatusCode, bad, body)
				}
			case resp.StatusCode != 200:
				t.Errorf("%s: %d", c.name, resp.StatusCode)
			}
		}
		t.Logf("%d hostile exports: %v", len(bodies), counts)
		// Still answering, and none of another entity's spans were written anywhere of ours.
		if code, _, out := postOTel(t, s.url, valid, "Content-Type", "application/x-protobuf", "wandb-api-key", key); code != 200 {
			t.Fatalf("after the fuzz: %d %s", code, out)
		}
		if code, _, _ := do(t, "POST", s.url+"/calls/stream_query", basic("api", key), `{"project_id":"mallory/x"}`); code != 403 {
			t.Fatalf("another entity's project: %d", code)
		}
	})
}

package main

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

func otelStr(k, v string) *common.KeyValue {
	return &common.KeyValue{Key: k, Value: &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: v}}}
}

func otelInt(k string, v int64) *common.KeyValue {
	return &common.KeyValue{Key: k, Value: &common.AnyValue{Value: &common.AnyValue_IntValue{IntValue: v}}}
}

// otelExport is an export of spans under a resource of attrs.
func otelExport(resource []*common.KeyValue, spans ...*tracepb.Span) *coltrace.ExportTraceServiceRequest {
	return &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{Resource: &resourcepb.Resource{Attributes: resource},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &common.InstrumentationScope{Name: "hone-test"}, Spans: spans}}}}}
}

func otelSpan(traceN, idN, parentN byte, name string, attrs ...*common.KeyValue) *tracepb.Span {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(idN) * time.Second)
	sp := &tracepb.Span{TraceId: append(make([]byte, 15), traceN), SpanId: []byte{0, 0, 0, 0, 0, 0, 1, idN}, Name: name,
		StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.Add(time.Second).UnixNano()), Attributes: attrs}
	if parentN != 0 {
		sp.ParentSpanId = []byte{0, 0, 0, 0, 0, 0, 1, parentN}
	}
	return sp
}

// postOTel posts body to /otel/v1/traces with headers (name, value pairs).
func postOTel(t *testing.T, url string, body []byte, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/otel/v1/traces", bytes.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// TestOTLPRoute: POST /otel/v1/traces as Weave serves it, on both stores: protobuf and OTLP
// JSON, gzip and deflate, the key in wandb-api-key, Basic or Bearer, the project from the
// resource or the project_id header, partial success, and the 4xx of bad requests.
func TestOTLPRoute(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		data := t.TempDir()
		s := startServer(t, data, append([]string{"--max-body-bytes", "200000", "--train-workers", "0"}, st.args...)...)
		key := initialKey(t, data)
		pb := "application/x-protobuf"
		chat := otelSpan(1, 2, 1, "openai.chat", otelStr("gen_ai.operation.name", "chat"), otelStr("gen_ai.request.model", "demo"),
			otelStr("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]`),
			otelStr("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"text","content":"Hello"}],"finish_reason":"stop"}]`),
			otelInt("gen_ai.usage.input_tokens", 11), otelInt("gen_ai.usage.output_tokens", 3))
		root := otelSpan(1, 1, 0, "turn", otelStr("gen_ai.conversation.id", "c-1"))
		body, _ := proto.Marshal(otelExport([]*common.KeyValue{otelStr("wandb.entity", "local"), otelStr("wandb.project", "otel")}, chat, root))

		// Protobuf with the key in wandb-api-key; the answer is an empty ExportTraceServiceResponse.
		code, hdr, out := postOTel(t, s.url, body, "Content-Type", pb, "wandb-api-key", key)
		if code != 200 || hdr.Get("Content-Type") != pb {
			t.Fatalf("%d %s %s", code, hdr.Get("Content-Type"), out)
		}
		var res coltrace.ExportTraceServiceResponse
		if err := proto.Unmarshal(out, &res); err != nil || res.PartialSuccess != nil {
			t.Fatalf("%v %v", err, res.PartialSuccess)
		}
		code, _, lines := do(t, "POST", s.url+"/calls/stream_query", basic("api", key), `{"project_id":"local/otel"}`)
		if code != 200 || strings.Count(strings.TrimSpace(string(lines)), "\n") != 1 {
			t.Fatalf("%d %s", code, lines)
		}
		code, _, u := do(t, "POST", s.url+"/trace/usage", basic("api", key), `{"project_id":"local/otel"}`)
		var usage struct {
			CallUsage map[string]map[string]struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"call_usage"`
		}
		if code != 200 || json.Unmarshal(u, &usage) != nil || usage.CallUsage["0000000000000101"]["demo"].PromptTokens != 11 ||
			usage.CallUsage["0000000000000101"]["demo"].CompletionTokens != 3 {
			t.Fatalf("%d %s", code, u)
		}

		// gzip and deflate, Basic and Bearer, the project_id header.
		body2, _ := proto.Marshal(otelExport(nil, otelSpan(2, 1, 0, "hdr")))
		var zb bytes.Buffer
		zw := zlib.NewWriter(&zb)
		zw.Write(body2)
		zw.Close()
		for _, h := range [][]string{
			{"Content-Type", pb, "Content-Encoding", "gzip", "Authorization", basic("api", key), "project_id", "local/hdr"},
			{"Content-Type", pb + "; charset=binary", "Content-Encoding", "deflate", "Authorization", "Bearer " + key, "project_id", "local/hdr"},
		} {
			b := gz(t, body2)
			if h[3] == "deflate" {
				b = zb.Bytes()
			}
			if code, _, out := postOTel(t, s.url, b, h...); code != 200 {
				t.Fatalf("%v: %d %s", h[3], code, out)
			}
		}

		// OTLP JSON, answered in JSON, with a partial success for the span without a name.
		js := `{"resourceSpans":[{"resource":{"attributes":[{"key":"wandb.project","value":{"stringValue":"json"}}]},"scopeSpans":[{"spans":[
			{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"ok","startTimeUnixNano":"1740830400000000000","endTimeUnixNano":"1740830401000000000"},
			{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060709","name":"","startTimeUnixNano":"1740830400000000000"}]}]}]}`
		code, hdr, out = postOTel(t, s.url, []byte(js), "Content-Type", "application/json", "wandb-api-key", key)
		if code != 200 || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("%d %s", code, out)
		}
		res.Reset()
		if err := protojson.Unmarshal(out, &res); err != nil || res.PartialSuccess.GetRejectedSpans() != 1 || !strings.Contains(res.PartialSuccess.GetErrorMessage(), "name is empty") {
			t.Fatalf("%v %s", err, out)
		}

		// The 4xx: every one in the envelope, never a 5xx.
		bomb := gz(t, bytes.Repeat([]byte{0}, 400000))
		otherEntity, _ := proto.Marshal(otelExport([]*common.KeyValue{otelStr("wandb.entity", "someone"), otelStr("wandb.project", "p")}, otelSpan(3, 1, 0, "x")))
		noProject, _ := proto.Marshal(otelExport(nil, otelSpan(3, 1, 0, "x")))
		for _, c := range []struct {
			name  string
			body  []byte
			hdrs  []string
			code  int
			param string
		}{
			{"no key", body, []string{"Content-Type", pb}, 401, ""},
			{"bad key", body, []string{"Content-Type", pb, "wandb-api-key", "hone_nope"}, 401, ""},
			{"malformed protobuf", []byte("\xff\xff\xff\xff"), []string{"Content-Type", pb, "wandb-api-key", key}, 400, ""},
			{"malformed JSON", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}`), []string{"Content-Type", "application/json", "wandb-api-key", key}, 400, "resourceSpans[0].scopeSpans[0].spans[0].traceId"},
			{"media type", body, []string{"Content-Type", "text/plain", "wandb-api-key", key}, 415, "Content-Type"},
			{"encoding", body, []string{"Content-Type", pb, "Content-Encoding", "br", "wandb-api-key", key}, 415, "Content-Encoding"},
			{"not gzip", body, []string{"Content-Type", pb, "Content-Encoding", "gzip", "wandb-api-key", key}, 400, "Content-Encoding"},
			{"gzip bomb", bomb, []string{"Content-Type", pb, "Content-Encoding", "gzip", "wandb-api-key", key}, 413, ""},
			{"oversized", bytes.Repeat([]byte{0}, 200001), []string{"Content-Type", pb, "wandb-api-key", key}, 413, ""},
			{"other entity", otherEntity, []string{"Content-Type", pb, "wandb-api-key", key}, 403, "resource.attributes.wandb.project"},
			{"no project", noProject, []string{"Content-Type", pb, "wandb-api-key", key}, 400, "project_id"},
			{"other entity's header", noProject, []string{"Content-Type", pb, "wandb-api-key", key, "project_id", "someone/p"}, 403, "project_id"},
		} {
			code, hdr, out := postOTel(t, s.url, c.body, c.hdrs...)
			if code != c.code {
				t.Errorf("%s: %d, want %d: %s", c.name, code, c.code, out)
				continue
			}
			e := envelope(t, out)
			if c.param != "" && (e.Param == nil || *e.Param != c.param) {
				t.Errorf("%s: param %v, want %q", c.name, e.Param, c.param)
			}
			if code == 401 && hdr.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: no challenge", c.name)
			}
		}
		// Nothing of the refused requests was written.
		if _, _, l := do(t, "POST", s.url+"/calls/stream_query", basic("api", key), `{"project_id":"local/p"}`); len(bytes.TrimSpace(l)) != 0 {
			t.Fatalf("written: %s", l)
		}
	})
}

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestOwnSpans: a node started with OTEL_EXPORTER_OTLP_ENDPOINT exports its own spans through
// the official OpenTelemetry Go SDK; here the collector is another Hone, whose
// /otel/v1/traces takes them (the key in OTEL_EXPORTER_OTLP_HEADERS, the project in
// OTEL_RESOURCE_ATTRIBUTES). A chat completion sent with a traceparent comes back as its
// request's server span in the caller's trace, the engine.generate span inside it, and
// engine.step spans. The receiving node on both stores.
func TestOwnSpans(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		collectorData := t.TempDir()
		collector := startServer(t, collectorData, append([]string{"--train-workers", "0"}, st.args...)...)
		ckey := initialKey(t, collectorData)

		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url+"/otel")
		t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "wandb-api-key="+ckey)
		t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "wandb.entity=local,wandb.project=hone-spans")
		t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
		data := t.TempDir()
		node := startServer(t, data, "--train-workers", "0")
		key := initialKey(t, data)
		const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		req := `{"model":"demo","messages":[{"role":"user","content":"Hello"}],"max_tokens":4,"ignore_eos":true}`
		code, _, body := doWith(t, "POST", node.url+"/v1/chat/completions", req,
			"Authorization", "Bearer "+key, "Content-Type", "application/json", "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		if code := node.stop(t); code != 0 { // its shutdown sends the spans not yet sent
			t.Fatalf("exit %d", code)
		}

		code, _, lines := do(t, "POST", collector.url+"/calls/stream_query", basic("api", ckey), `{"project_id":"local/hone-spans"}`)
		if code != 200 {
			t.Fatalf("%d %s", code, lines)
		}
		type call struct {
			ID         string          `json:"id"`
			TraceID    string          `json:"trace_id"`
			ParentID   *string         `json:"parent_id"`
			OpName     string          `json:"op_name"`
			Attributes json.RawMessage `json:"attributes"`
		}
		var chat, gen *call
		steps := 0
		for _, l := range strings.Split(strings.TrimSpace(string(lines)), "\n") {
			var c call
			if err := json.Unmarshal([]byte(l), &c); err != nil {
				t.Fatalf("%v: %s", err, l)
			}
			switch c.OpName {
			case "POST /v1/chat/completions":
				chat = &c
			case "engine.generate":
				gen = &c
			case "engine.step":
				steps++
			}
		}
		if chat == nil || gen == nil || steps == 0 {
			t.Fatalf("chat %v generate %v steps %d in\n%s", chat, gen, steps, lines)
		}
		if chat.TraceID != traceID || chat.ParentID == nil || *chat.ParentID != "00f067aa0ba902b7" {
			t.Fatalf("the request's span is not in the caller's trace: %+v", chat)
		}
		if gen.TraceID != traceID || gen.ParentID == nil || *gen.ParentID != chat.ID {
			t.Fatalf("engine.generate is not inside the request's span: %+v", gen)
		}
		var at struct {
			Otel struct {
				Attributes map[string]any `json:"attributes"`
				Resource   map[string]any `json:"resource"`
			} `json:"otel"`
		}
		if err := json.Unmarshal(chat.Attributes, &at); err != nil || at.Otel.Attributes["http.route"] != "/v1/chat/completions" ||
			at.Otel.Attributes["http.response.status_code"] != 200.0 || at.Otel.Resource["service.name"] != "hone" {
			t.Fatalf("attributes %s", chat.Attributes)
		}
		if strings.Contains(string(lines), key) {
			t.Fatal("a key in the spans")
		}
	})
}

// doWith sends body with headers (name, value pairs).
func doWith(t *testing.T, method, url, body string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
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

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// TestConformanceOTelPython: the real OpenTelemetry SDK with its OTLP/HTTP protobuf exporter
// and three instrumentations of the OpenAI client (openinference-instrumentation-openai,
// opentelemetry-instrumentation-openai-v2, OpenLLMetry's opentelemetry-instrumentation-openai),
// pinned in conformance/otel-py, trace an application whose client calls Hone's chat
// completions; the spans arrive through /otel/v1/traces (wandb-api-key, Basic with the
// project_id header and gzip, Bearer) and are read back through /calls/stream_query,
// /trace/usage and the Weave SDK (conformance/otel-py/scenario.py), on both stores.
func TestConformanceOTelPython(t *testing.T) {
	py := venvPython(t, "HONE_OTEL_PYTHON", "otel-py",
		"import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http, openinference.instrumentation.openai, opentelemetry.instrumentation.openai_v2, opentelemetry.instrumentation.openai, weave")
	if py == "" {
		skipOrFail(t, "no Python with the OpenTelemetry SDK and instrumentations (set HONE_OTEL_PYTHON or run scripts/test-setup.sh)")
	}
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		data := t.TempDir()
		s := startServer(t, data, st.args...)
		key := initialKey(t, data)
		line := runScenario(t, 5*time.Minute, []string{"HONE_URL=" + s.url, "HONE_KEY=" + key,
			"WF_TRACE_SERVER_URL=" + s.url, "WANDB_BASE_URL=" + s.url, "WANDB_API_KEY=" + key,
			"WEAVE_PRINT_CALL_LINK=false", "WANDB_SILENT=true", "WEAVE_DISABLED=false", "WEAVE_USE_SERVER_CACHE=false",
			"OTEL_SDK_DISABLED=false", "OTEL_TRACES_EXPORTER=otlp"},
			py, filepath.Join(repoRoot(t), "conformance", "otel-py", "scenario.py"))
		var res map[string]json.RawMessage
		if err := json.Unmarshal(line, &res); err != nil {
			t.Fatalf("no result: %v\n%s", err, line)
		}
		for _, kind := range []string{"openinference", "openai-v2", "openllmetry"} {
			var r struct {
				Usage struct {
					Requests         int `json:"requests"`
					PromptTokens     int `json:"prompt_tokens"`
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
				StudioChat []bool `json:"studio_chat"`
				WeaveCalls int    `json:"weave_calls"`
				Exported   int    `json:"exported"`
			}
			if err := json.Unmarshal(res[kind], &r); err != nil {
				t.Fatalf("%s: %v in %s", kind, err, line)
			}
			if r.Exported != 3 || r.WeaveCalls != 3 || r.Usage.Requests != 2 || r.Usage.PromptTokens == 0 || r.Usage.CompletionTokens == 0 ||
				len(r.StudioChat) != 2 || !r.StudioChat[0] || !r.StudioChat[1] {
				t.Errorf("%s: %s", kind, res[kind])
			}
		}
		var ps struct {
			RejectedSpans int64 `json:"rejected_spans"`
		}
		if json.Unmarshal(res["partial_success"], &ps); ps.RejectedSpans != 1 {
			t.Errorf("partial success: %s", res["partial_success"])
		}
	})
}

// TestStudioOTelCalls: Hone Studio, in headless chromium (conformance/studio/otel.mjs), opens
// an agent turn that came in as OTLP spans with OpenInference's attributes, shows the turn and
// its chat call in the tree with the rolled-up tokens, and the chat call's messages as a
// conversation.
func TestStudioOTelCalls(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "conformance", "studio")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "puppeteer-core")); err != nil {
		skipOrFail(t, "npm puppeteer-core is not installed in %s (run scripts/test-setup.sh)", dir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not installed")
	}
	browser := os.Getenv("HONE_CHROMIUM")
	if browser == "" {
		if browser, err = exec.LookPath("chromium"); err != nil {
			skipOrFail(t, "chromium is not installed (scripts/test-setup.sh installs Debian's)")
		}
	}
	data := t.TempDir()
	s := startServer(t, data)
	key := initialKey(t, data)
	const question = "Which colour is the sky?"
	chat := otelSpan(7, 2, 1, "ChatCompletion", otelStr("openinference.span.kind", "LLM"), otelStr("llm.model_name", "demo"),
		otelStr("input.value", `{"model":"demo","messages":[{"role":"user","content":"`+question+`"}]}`), otelStr("input.mime_type", "application/json"),
		otelStr("output.value", `{"choices":[{"index":0,"message":{"role":"assistant","content":"Blue."},"finish_reason":"stop"}],"model":"demo"}`),
		otelInt("llm.token_count.prompt", 12), otelInt("llm.token_count.completion", 2))
	root := otelSpan(7, 1, 0, "agent-turn", otelStr("openinference.span.kind", "CHAIN"), otelStr("input.value", question))
	body, _ := proto.Marshal(otelExport([]*common.KeyValue{otelStr("wandb.entity", "local"), otelStr("wandb.project", "otel-studio")}, chat, root))
	if code, _, out := postOTel(t, s.url, body, "Content-Type", "application/x-protobuf", "wandb-api-key", key); code != 200 {
		t.Fatalf("%d %s", code, out)
	}
	shots := filepath.Join(os.TempDir(), "hone-studio-screenshots")
	_ = os.MkdirAll(shots, 0o755)
	line := runScenario(t, 3*time.Minute, []string{"HONE_URL=" + s.url, "HONE_KEY=" + key, "HONE_OUT=" + shots, "HONE_CHROMIUM=" + browser,
		"HONE_PROJECT=local/otel-studio", "HONE_ROOT_CALL=0000000000000101", "HONE_CHAT_CALL=0000000000000102", "HONE_QUESTION=" + question},
		node, filepath.Join(dir, "otel.mjs"))
	var res struct {
		OK     bool `json:"ok"`
		Checks int  `json:"checks"`
	}
	if err := json.Unmarshal(line, &res); err != nil || !res.OK || res.Checks < 5 {
		t.Fatalf("%v %s", err, line)
	}
}

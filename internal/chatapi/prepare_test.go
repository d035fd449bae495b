package chatapi

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/synth"
)

// tinyAPI is an API over one tiny random model ("tiny", a qwen3 with its chat template, a
// 512-token context), without an engine: enough to prepare requests.
func tinyAPI(t *testing.T) *API {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(dir, synth.Tiny("qwen3")); err != nil {
		t.Fatal(err)
	}
	s, err := serving.Load("tiny", dir, serving.LoadOptions{NoEngine: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ms := serving.NewModels()
	ms.Add(s)
	return &API{Models: ms, MaxLogprobs: 20}
}

type nopTracer struct{}

func (nopTracer) TraceChat(context.Context, TracedCall) error { return nil }

func chatRequest(t *testing.T, body string) *Request {
	t.Helper()
	var req Request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	return &req
}

// TestPrepareChat: a request is prepared from its body, who asks and the trace project, with
// no HTTP request: rendered with the model's template, tokenised, max_tokens set to what is
// left of the context, and who and the project kept for the engine's fairness key and the
// trace.
func TestPrepareChat(t *testing.T) {
	a := tinyAPI(t)
	a.Tracer = nopTracer{}
	who := auth.Principal{KeyID: "k1", Entity: "local"}
	body := `{"model":"tiny","messages":[{"role":"user","content":"Hello there"}]}`
	pr, err := a.prepareChat(context.Background(), who, "local/p", chatRequest(t, body), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pr.prompt, "Hello there") || len(pr.ids) == 0 || pr.name != "tiny" {
		t.Fatalf("prompt %q ids %v name %q", pr.prompt, pr.ids, pr.name)
	}
	if max := pr.served.MaxModelLen(); pr.plan.maxTokens != max-len(pr.ids) {
		t.Errorf("max_tokens %d, want the rest of the %d-token context: %d", pr.plan.maxTokens, max, max-len(pr.ids))
	}
	if pr.who != who || pr.traceProject != "local/p" || string(pr.body) != body {
		t.Errorf("who %+v project %q body %s", pr.who, pr.traceProject, pr.body)
	}
	if len(pr.plan.params.EOS) == 0 {
		t.Error("no end-of-sequence ids")
	}

	// truncate_prompt_tokens keeps the prompt's last tokens.
	body = `{"model":"tiny","messages":[{"role":"user","content":"Hello there"}],"truncate_prompt_tokens":3,"max_tokens":5}`
	pr, err = a.prepareChat(context.Background(), who, "", chatRequest(t, body), nil)
	if err != nil || len(pr.ids) != 3 || pr.plan.maxTokens != 5 || pr.traceProject != "" {
		t.Fatalf("truncated: %v %v", pr, err)
	}
}

// TestPrepareChatRefusals: each step's refusal, with its status, param and message.
func TestPrepareChatRefusals(t *testing.T) {
	a := tinyAPI(t)
	who := auth.Principal{KeyID: "k1", Entity: "local"}
	const msgs = `"messages":[{"role":"user","content":"Hi"}]`
	cases := []struct {
		name        string
		tracer      bool
		who         auth.Principal
		project     string
		body        string
		status      int
		param, want string
	}{
		{"tracing off", false, who, "local/p", `{"model":"tiny",` + msgs + `}`, 400, TraceHeader, "Tracing of chat completions is not enabled on this server."},
		{"malformed project", true, who, "local", `{"model":"tiny",` + msgs + `}`, 400, TraceHeader, `X-Hone-Trace-Project must have the form <entity>/<project>, got "local"`},
		{"another entity's project", true, who, "other/p", `{"model":"tiny",` + msgs + `}`, 403, TraceHeader, `this API key may only access projects of entity "local"`},
		{"no principal", true, auth.Principal{}, "local/p", `{"model":"tiny",` + msgs + `}`, 401, "", "authentication required"},
		{"unknown model", false, who, "", `{"model":"nope",` + msgs + `}`, 404, "model", "The model `nope` does not exist."},
		{"no messages", false, who, "", `{"model":"tiny"}`, 400, "messages", "Field required: `messages`"},
		{"validation", false, who, "", `{"model":"tiny",` + msgs + `,"n":0}`, 400, "n", "n must be at least 1, got 0."},
		{"bad template", false, who, "", `{"model":"tiny",` + msgs + `,"chat_template":"{% if %}"}`, 400, "chat_template", ""},
		{"max_tokens over the context", false, who, "", `{"model":"tiny",` + msgs + `,"max_tokens":100000}`, 400, "max_tokens",
			"max_tokens=100000 cannot be greater than max_model_len=max_total_tokens=512. Please request fewer output tokens."},
		{"max_completion_tokens over the context", false, who, "", `{"model":"tiny",` + msgs + `,"max_completion_tokens":100000}`, 400, "max_completion_tokens",
			"max_completion_tokens=100000 cannot be greater than max_model_len=max_total_tokens=512. Please request fewer output tokens."},
		{"truncation over the room", false, who, "", `{"model":"tiny",` + msgs + `,"max_tokens":500,"truncate_prompt_tokens":100}`, 400, "truncate_prompt_tokens",
			"truncate_prompt_tokens=100 cannot be greater than max_model_len - max_tokens = 12. Please request a smaller truncation size."},
	}
	for _, c := range cases {
		a.Tracer = nil
		if c.tracer {
			a.Tracer = nopTracer{}
		}
		_, err := a.prepareChat(context.Background(), c.who, c.project, chatRequest(t, c.body), nil)
		if err == nil {
			t.Errorf("%s: prepared", c.name)
			continue
		}
		ae, _ := apierror.As(err)
		if ae.Status != c.status || ae.Param != c.param || c.want != "" && ae.Message != c.want {
			t.Errorf("%s: %d %s %q, want %d %s %q", c.name, ae.Status, ae.Param, ae.Message, c.status, c.param, c.want)
		}
	}
}

// TestPrepareCompletion: a text completion request is prepared from its body and who asks.
func TestPrepareCompletion(t *testing.T) {
	a := tinyAPI(t)
	who := auth.Principal{KeyID: "k2", Entity: "local"}
	var cr CompletionRequest
	json.Unmarshal([]byte(`{"model":"tiny","prompt":["a b","c"],"max_tokens":4}`), &cr)
	pc, err := a.prepareCompletion(context.Background(), who, &cr)
	if err != nil {
		t.Fatal(err)
	}
	if len(pc.prompts) != 2 || pc.plan.maxTokens != 4 || pc.who != who {
		t.Fatalf("prompts %d max_tokens %d who %+v", len(pc.prompts), pc.plan.maxTokens, pc.who)
	}
	json.Unmarshal([]byte(`{"model":"tiny","prompt":"x","suffix":"y"}`), &cr)
	if _, err := a.prepareCompletion(context.Background(), who, &cr); err == nil {
		t.Fatal("suffix accepted")
	} else if ae, _ := apierror.As(err); ae.Param != "suffix" {
		t.Fatalf("suffix: %s %q", ae.Param, ae.Message)
	}
}

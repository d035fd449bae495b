package telemetry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/jobs"
)

func recorded(t *testing.T) (*Telemetry, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return New(tp), rec
}

func TestNilIsOff(t *testing.T) {
	var tel *Telemetry
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if tel.Engine("m") != nil || tel.Shutdown(context.Background()) != nil {
		t.Fatal("a nil Telemetry does nothing")
	}
	tel.Middleware(h).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if inference.Tee(nil, tel.Engine("m")) != nil {
		t.Fatal("no observer")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if tel, err := FromEnv(context.Background(), "serve", "v"); tel != nil || err != nil {
		t.Fatal("off without an endpoint")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if Enabled() {
		t.Fatal("OTEL_SDK_DISABLED")
	}
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	if Enabled() {
		t.Fatal("OTEL_TRACES_EXPORTER=none")
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	tel, err := FromEnv(context.Background(), "worker", "v")
	if err != nil || tel == nil || tel.Endpoint != "http://127.0.0.1:1/v1/traces" {
		t.Fatalf("%v %v", tel, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	tel.Shutdown(ctx)
	if got := redact("https://user:secret@collector:4318/v1/traces?token=x"); got != "https://collector:4318/v1/traces" {
		t.Fatalf("redact: %s", got)
	}
}

func TestSpans(t *testing.T) {
	tel, rec := recorded(t)
	// A request continues its caller's trace and is named by its route.
	mux := http.NewServeMux()
	var inner trace.SpanContext
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		inner = trace.SpanContextFromContext(r.Context())
		o := tel.Engine("demo").(inference.RequestObserver)
		now := time.Now()
		o.Request(r.Context(), inference.RequestTimes{Queued: now.Add(-time.Second), Admitted: now.Add(-900 * time.Millisecond),
			FirstToken: now.Add(-500 * time.Millisecond), Finished: now, PromptTokens: 7, GeneratedTokens: 3, Choices: 1})
		w.WriteHeader(500)
	})
	req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	tel.Middleware(mux).ServeHTTP(httptest.NewRecorder(), req)
	tel.Engine("demo").(inference.StepObserver).Step(time.Now(), time.Millisecond, 2, 9, 1)
	ended := rec.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d spans", len(ended))
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		byName[s.Name()] = s
	}
	srv := byName["POST /v1/chat/completions"]
	if srv == nil || srv.SpanContext().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || srv.Parent().SpanID().String() != "b7ad6b7169203331" ||
		srv.SpanKind() != trace.SpanKindServer || srv.Status().Code.String() != "Error" || inner.SpanID() != srv.SpanContext().SpanID() {
		t.Fatalf("server span %+v", srv)
	}
	gen := byName["engine.generate"]
	if gen == nil || gen.Parent().SpanID() != srv.SpanContext().SpanID() || len(gen.Events()) != 2 || gen.EndTime().Sub(gen.StartTime()) != time.Second {
		t.Fatalf("engine.generate %+v", gen)
	}
	step := byName["engine.step"]
	if step == nil || step.Parent().IsValid() || step.EndTime().Sub(step.StartTime()) != time.Millisecond {
		t.Fatalf("engine.step %+v", step)
	}

	// A job's run is a span with its events; a failed run is an error.
	run := tel.Jobs(func(ctx context.Context, j jobs.Job, progress func(string, any)) (*int, error) {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			t.Error("the runner's context has no span")
		}
		progress(jobs.EventStep, struct {
			Loss float64 `json:"loss"`
		}{0.5})
		progress("x", map[string]any{"n": 1, "s": "a"})
		return nil, errors.New("boom")
	})
	var events []string
	if _, err := run(context.Background(), jobs.Job{ID: "j1", Kind: "sft", Attempt: 2}, func(typ string, _ any) { events = append(events, typ) }); err == nil {
		t.Fatal("the error is passed on")
	}
	js := rec.Ended()[3]
	if js.Name() != "job sft" || js.Status().Code.String() != "Error" || len(events) != 2 {
		t.Fatalf("job span %s %v %v", js.Name(), js.Status(), events)
	}
	if ev := js.Events(); len(ev) < 2 || ev[0].Name != jobs.EventStep || len(ev[0].Attributes) != 1 || ev[1].Name != "x" || len(ev[1].Attributes) != 2 {
		t.Fatalf("job events %+v", js.Events())
	}
}

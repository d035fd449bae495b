// Package telemetry exports Hone's own spans over OTLP (the official OpenTelemetry Go SDK),
// so that an operator's collector sees Hone beside the rest of a system: a server span for
// every API request (W3C trace context taken from the request, so a caller's trace goes on
// into Hone), an engine.generate span for each request the engine ran (inside the request's
// span), an engine.step span for each forward pass, and a span for each training job's run
// with its events.
//
// It is off unless OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set, and OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none turn it off again; the exporter,
// resource, sampler and batching read the SDK's own variables (OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_BSP_*, ...). A nil
// *Telemetry does nothing, so callers need not check.
//
// Usage:
//
//	tel, err := telemetry.FromEnv(ctx, "serve", version)
//	defer tel.Shutdown(ctx)
//	handler = tel.Middleware(handler)
//	opts.Observer = inference.Tee(metricsObserver, tel.Engine("demo"))
//	run = tel.Jobs(run)
package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/jobs"
)

const scope = "github.com/honeai/hone"

// Telemetry is the span exporter of a process.
type Telemetry struct {
	tp       *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	Endpoint string // where spans go (for the log; never the headers)
}

// Enabled reports whether the environment asks for spans.
func Enabled() bool {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv starts the exporter the environment asks for, or returns nil when it asks for
// none. role is the process's ("serve", "worker"), kept as the resource's hone.role.
func FromEnv(ctx context.Context, role, version string) (*Telemetry, error) {
	if !Enabled() {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry exporter: %w", err)
	}
	// Hone's own attributes first, so that OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID(),
		resource.WithAttributes(attribute.String("service.name", "hone"), attribute.String("service.version", version), attribute.String("hone.role", role)),
		resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	endpoint := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = strings.TrimRight(os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "/") + "/v1/traces"
	}
	return &Telemetry{tp: tp, tracer: tp.Tracer(scope, trace.WithInstrumentationVersion(version)),
		prop: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}), Endpoint: redact(endpoint)}, nil
}

// redact drops what could be a secret from an endpoint for the log: its user information and
// query.
func redact(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "(an endpoint that is not a URL)"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// New is a Telemetry on a tracer provider of the caller's (tests, or an embedding program).
func New(tp *sdktrace.TracerProvider) *Telemetry {
	return &Telemetry{tp: tp, tracer: tp.Tracer(scope), prop: propagation.TraceContext{}}
}

// Shutdown sends the spans not yet sent and stops the exporter.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Middleware makes a server span of each request, named by its method and route pattern,
// continuing the caller's trace (traceparent). It reads the route the router matched, so it
// wraps the router (directly, or through middleware that passes the request on as it is).
func (t *Telemetry) Middleware(next http.Handler) http.Handler {
	if t == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := t.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path),
			attribute.String("url.scheme", scheme(r)), attribute.String("network.protocol.version", fmt.Sprintf("%d.%d", r.ProtoMajor, r.ProtoMinor))))
		defer span.End()
		sw := httpx.NewStatusWriter(w)
		r2 := r.WithContext(ctx)
		next.ServeHTTP(sw, r2)
		if _, route, ok := strings.Cut(r2.Pattern, " "); ok {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
		}
		code := sw.Status()
		span.SetAttributes(attribute.Int("http.response.status_code", code))
		if code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(code))
		}
	})
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// Engine is the engine observer of served model name: engine.step and engine.generate
// spans (nil when t is).
func (t *Telemetry) Engine(name string) inference.Observer {
	if t == nil {
		return nil
	}
	return engineSpans{t: t, model: name}
}

type engineSpans struct {
	t     *Telemetry
	model string
}

func (engineSpans) FirstToken(time.Duration)         {}
func (engineSpans) InterToken(time.Duration)         {}
func (engineSpans) Finished(time.Duration, int, int) {}

// Step is a root span per forward pass (a step serves many requests at once).
func (e engineSpans) Step(start time.Time, d time.Duration, seqs, tokens, prefills int) {
	_, span := e.t.tracer.Start(context.Background(), "engine.step", trace.WithTimestamp(start), trace.WithAttributes(
		attribute.String("gen_ai.request.model", e.model), attribute.Int("hone.step.sequences", seqs),
		attribute.Int("hone.step.tokens", tokens), attribute.Int("hone.step.prefills", prefills)))
	span.End(trace.WithTimestamp(start.Add(d)))
}

// Request is a span for a request the engine ran, in the request's trace, from its
// submission to its end, with its admission and first token as events.
func (e engineSpans) Request(ctx context.Context, rt inference.RequestTimes) {
	_, span := e.t.tracer.Start(ctx, "engine.generate", trace.WithTimestamp(rt.Queued), trace.WithAttributes(
		attribute.String("gen_ai.request.model", e.model), attribute.Int("gen_ai.usage.input_tokens", rt.PromptTokens),
		attribute.Int("gen_ai.usage.output_tokens", rt.GeneratedTokens), attribute.Int("hone.choices", rt.Choices)))
	if !rt.Admitted.IsZero() {
		span.AddEvent("admitted", trace.WithTimestamp(rt.Admitted))
	}
	if !rt.FirstToken.IsZero() {
		span.AddEvent("first_token", trace.WithTimestamp(rt.FirstToken))
	}
	span.End(trace.WithTimestamp(rt.Finished))
}

// Jobs wraps run so that each run of a job is a span ("job <kind>") with its events.
func (t *Telemetry) Jobs(run jobs.Runner) jobs.Runner {
	if t == nil {
		return run
	}
	return func(ctx context.Context, j jobs.Job, progress func(typ string, data any)) (*int, error) {
		ctx, span := t.tracer.Start(ctx, "job "+j.Kind, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			attribute.String("hone.job.id", j.ID), attribute.String("hone.job.kind", j.Kind),
			attribute.String("hone.job.model_id", j.ModelID), attribute.Int("hone.job.attempt", j.Attempt)))
		defer span.End()
		step, err := run(ctx, j, func(typ string, data any) {
			span.AddEvent(typ, trace.WithAttributes(eventAttributes(data)...))
			progress(typ, data)
		})
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		case step != nil:
			span.SetAttributes(attribute.Int("hone.job.checkpoint_step", *step))
		}
		return step, err
	}
}

// eventAttributes keeps a job event's numbers (a step's loss, tokens, ...), whatever its type.
func eventAttributes(data any) []attribute.KeyValue {
	m, ok := data.(map[string]any)
	if !ok { // a struct (train.StepMetrics): its JSON's fields
		b, err := json.Marshal(data)
		if err != nil || json.Unmarshal(b, &m) != nil {
			return nil
		}
	}
	var out []attribute.KeyValue
	for k, v := range m {
		switch x := v.(type) {
		case int:
			out = append(out, attribute.Int(k, x))
		case int64:
			out = append(out, attribute.Int64(k, x))
		case float64:
			out = append(out, attribute.Float64(k, x))
		case string:
			if len(x) <= 256 {
				out = append(out, attribute.String(k, x))
			}
		case bool:
			out = append(out, attribute.Bool(k, x))
		}
	}
	return out
}

package main

import (
	"net/http"
	"sync"
	"time"

	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/chatapi"
	"github.com/honeai/hone/internal/health"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/membudget"
	"github.com/honeai/hone/internal/openapi"
	"github.com/honeai/hone/internal/otlp"
	"github.com/honeai/hone/internal/studio"
	"github.com/honeai/hone/internal/trace"
	"github.com/honeai/hone/internal/traceapi"
	"github.com/honeai/hone/internal/trainapi"
	"github.com/honeai/hone/internal/version"
	"github.com/honeai/hone/internal/wandbapi"
)

// extraRoutes lets tests add routes (with the system's authentication) to the handler.
var extraRoutes []func(r *httpx.Router, bearer, basic httpx.Middleware)

// handler registers the APIs of the system on one router — training (Bearer), tracing (HTTP
// Basic), the W&B API (HTTP Basic or Bearer) and chat completions (Bearer), with the per-key
// limit — with the service routes
// and the web UI (internal/studio, no auth: it calls the APIs with the user's key), and wraps
// it in the shared middleware.
func (s *system) handler() (http.Handler, *httpx.Router, error) {
	limiter := httpx.NewKeyLimiter(s.cfg.MaxConcurrentKey)
	bearer := httpx.Authenticate(s.keys, auth.Bearer, limiter)
	basic := httpx.Authenticate(s.keys, auth.Basic, limiter)
	r := httpx.NewRouter()
	health.Register(r, s.checks, bearer, version.Version)

	// The routes that read stored data a small request can name a lot of share one memory
	// budget and a per-key limit (httpx.Heavy, issue 33).
	heavy := httpx.Heavy(membudget.New(int64(s.cfg.RequestMemory), trace.MaxRefsBatchBytes, 2*time.Second),
		httpx.NewKeyLimiter(s.cfg.MaxReadsPerKey))
	traces := traceapi.New(s.trace)
	traces.SetHeavy(heavy)
	traces.Register(r, basic)
	wandbapi.New(s.wandb).Register(r, basic, bearer)
	traceapi.RegisterOTel(r, httpx.AuthenticateAny(s.keys, traceapi.OTelKeyHeader, limiter), &otlp.Ingester{Trace: s.trace}, s.cfg.MaxBodyBytes)

	chat := &chatapi.API{Models: s.models, Adapters: s.training, MaxLogprobs: s.cfg.Chat.MaxLogprobs,
		PriorityEnabled: s.cfg.Chat.Policy == inference.PolicyPriority, Logger: s.log, Tracer: chatTracer{svc: s.trace}, Responses: s.responses, Heavy: heavy}
	chat.Register(r, bearer)

	train := &trainapi.API{Svc: s.training, Evals: s.evals, Loop: s.loop}
	train.Register(r, bearer)

	if err := studio.Register(r); err != nil {
		return nil, nil, err
	}

	if s.cfg.MetricsOnAPI { // GET /metrics on the API port, behind a key (--metrics-on-api)
		r.Group(httpx.AuthenticateAny(s.keys, "", limiter)).Secured(openapi.BearerAuth).Handle("GET /metrics", s.metrics.Handler(),
			&openapi.Operation{Summary: "Prometheus metrics of this node (--metrics-on-api; docs/deploy.md)", Tags: []string{"service"},
				Security: openapi.BearerAuth, ResponseContentType: "text/plain"})
	}
	for _, add := range extraRoutes {
		add(r, bearer, basic)
	}
	var (
		docOnce sync.Once
		doc     []byte
		docErr  error
	)
	r.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, req *http.Request) {
		docOnce.Do(func() {
			doc, docErr = openapi.Build(openapi.Info{
				Title:       "Hone",
				Version:     version.Version,
				Description: "Chat completions (OpenAI/vLLM-compatible), training (W&B Training / ART payloads) and tracing (Weave-compatible).",
			}, r.Routes())
		})
		if docErr != nil {
			httpx.WriteJSON(w, http.StatusInternalServerError, nil)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}, &openapi.Operation{Summary: "OpenAPI 3.1 document of every route", Tags: []string{"service"}})

	// Innermost, as they read the pattern the router matched: metrics, and request spans.
	h := httpx.Chain(s.tel.Middleware(s.metrics.HTTP.Middleware(r)),
		httpx.WithRequestID(),
		httpx.AccessLog(s.log),
		httpx.Recover(s.log),
		httpx.LimitBodyExcept(s.cfg.MaxBodyBytes, func(r *http.Request) bool {
			return r.Method == http.MethodPut && r.URL.Path == wandbapi.UploadPath
		}),
	)
	return h, r, nil
}

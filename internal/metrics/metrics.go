// Package metrics is Hone's Prometheus metrics (the official client_golang): the served
// models' engines under vLLM's metric names and labels where the meaning is the same
// (vllm:num_requests_running, vllm:kv_cache_usage_perc, vllm:time_to_first_token_seconds,
// ...), the job queue, the trace store, the store's connection pool and errors, HTTP routes,
// and the Go runtime and process. GET /metrics serves Registry.Handler in Prometheus's text
// format (docs/deploy.md).
//
// Most values are read when Prometheus scrapes (the engines' counters, the queue's counts,
// the pool's stats); what only an event can tell (a request's latencies, a job's duration, a
// call written) is observed as it happens, through the hooks each part offers:
// inference.Observer, a wrapped jobs.Runner, a wrapped trace.Store, an HTTP middleware.
//
// Usage:
//
//	reg := metrics.New()
//	opts.Engine.Observer = reg.Serving.Model("demo")
//	reg.Serving.SetModels(models.List)
//	reg.Jobs.SetQueue(queue); run = reg.Jobs.Wrap(run)
//	store = reg.Trace.Store(store)
//	reg.Store.SetDB(d)
//	mux.Handle("GET /metrics", reg.Handler())
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry holds the process's metrics.
type Registry struct {
	reg     *prometheus.Registry
	Serving *Serving
	Jobs    *Jobs
	Trace   *Trace
	Store   *Store
	HTTP    *HTTP
}

// New is a registry with the Go runtime and process collectors and Hone's.
func New() *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r := &Registry{reg: reg, Serving: newServing(reg), Jobs: newJobs(reg), Trace: newTrace(reg), Store: newStore(reg), HTTP: newHTTP(reg)}
	r.HTTP.trace = r.Trace
	return r
}

// Gatherer is the registry, for tests and other exporters.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the metrics in Prometheus's text format (or OpenMetrics when asked). A
// collector that fails leaves its metrics out and the rest are served.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true})
}

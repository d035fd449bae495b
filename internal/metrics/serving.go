package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/serving"
)

// vLLM's label set: the served model's name and the engine's index (one engine a model here).
var modelLabels = []string{"model_name", "engine"}

const engineIndex = "0"

// vLLM's buckets (vllm/v1/metrics/loggers.py).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	e2eBuckets  = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	tokBuckets  = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000}
)

// Serving is the served models' engines, under vLLM's names: gauges and counters read from
// each engine when scraped, latency histograms observed by the engines (Model).
type Serving struct {
	mu     sync.Mutex
	models func() []*serving.Served

	ttft, itl, e2e, prompt, gen         *prometheus.HistogramVec
	queue, prefill, decode, inferenceTm *prometheus.HistogramVec
}

func newServing(reg prometheus.Registerer) *Serving {
	h := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, modelLabels)
		reg.MustRegister(v)
		return v
	}
	s := &Serving{
		ttft:        h("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds (from the request's submission to the engine).", ttftBuckets),
		itl:         h("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets),
		e2e:         h("vllm:e2e_request_latency_seconds", "Histogram of end-to-end request latency in seconds (in the engine).", e2eBuckets),
		prompt:      h("vllm:request_prompt_tokens", "Number of prefill tokens processed, per request.", tokBuckets),
		gen:         h("vllm:request_generation_tokens", "Number of generation tokens processed, per request.", tokBuckets),
		queue:       h("vllm:request_queue_time_seconds", "Histogram of time spent waiting in the queue for requests.", e2eBuckets),
		prefill:     h("vllm:request_prefill_time_seconds", "Histogram of time spent in the prefill phase (admission to first token) for requests.", e2eBuckets),
		decode:      h("vllm:request_decode_time_seconds", "Histogram of time spent in the decode phase (first token to end) for requests.", e2eBuckets),
		inferenceTm: h("vllm:request_inference_time_seconds", "Histogram of time spent running (admission to end) for requests.", e2eBuckets),
	}
	reg.MustRegister(servingCollector{s})
	return s
}

// SetModels gives the served models to read at each scrape (serving.Models.List).
func (s *Serving) SetModels(list func() []*serving.Served) {
	s.mu.Lock()
	s.models = list
	s.mu.Unlock()
}

// Model is the engine observer of the served model name (inference.Options.Observer).
func (s *Serving) Model(name string) inference.Observer {
	lv := []string{name, engineIndex}
	return modelObserver{ttft: s.ttft.WithLabelValues(lv...), itl: s.itl.WithLabelValues(lv...), e2e: s.e2e.WithLabelValues(lv...),
		prompt: s.prompt.WithLabelValues(lv...), gen: s.gen.WithLabelValues(lv...), queue: s.queue.WithLabelValues(lv...),
		prefill: s.prefill.WithLabelValues(lv...), decode: s.decode.WithLabelValues(lv...), inference: s.inferenceTm.WithLabelValues(lv...)}
}

type modelObserver struct {
	ttft, itl, e2e, prompt, gen, queue, prefill, decode, inference prometheus.Observer
}

// Request observes a finished request's phases, as vLLM's request-time histograms: waiting
// (submission to admission), prefill (admission to first token), decode (first token to end)
// and inference (admission to end).
func (o modelObserver) Request(_ context.Context, rt inference.RequestTimes) {
	if rt.Admitted.IsZero() {
		return
	}
	o.queue.Observe(rt.Admitted.Sub(rt.Queued).Seconds())
	o.inference.Observe(rt.Finished.Sub(rt.Admitted).Seconds())
	if !rt.FirstToken.IsZero() {
		o.prefill.Observe(rt.FirstToken.Sub(rt.Admitted).Seconds())
		o.decode.Observe(rt.Finished.Sub(rt.FirstToken).Seconds())
	}
}

func (o modelObserver) FirstToken(d time.Duration) { o.ttft.Observe(d.Seconds()) }
func (o modelObserver) InterToken(d time.Duration) { o.itl.Observe(d.Seconds()) }
func (o modelObserver) Finished(e2e time.Duration, prompt, gen int) {
	o.e2e.Observe(e2e.Seconds())
	o.prompt.Observe(float64(prompt))
	o.gen.Observe(float64(gen))
}

var (
	descRunning   = prometheus.NewDesc("vllm:num_requests_running", "Number of requests in model execution batches.", modelLabels, nil)
	descWaiting   = prometheus.NewDesc("vllm:num_requests_waiting", "Number of requests waiting to be processed.", modelLabels, nil)
	descKVUsage   = prometheus.NewDesc("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", modelLabels, nil)
	descPrompt    = prometheus.NewDesc("vllm:prompt_tokens_total", "Number of prefill tokens processed.", modelLabels, nil)
	descGen       = prometheus.NewDesc("vllm:generation_tokens_total", "Number of generation tokens processed.", modelLabels, nil)
	descPCQueries = prometheus.NewDesc("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", modelLabels, nil)
	descPCHits    = prometheus.NewDesc("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", modelLabels, nil)
	descDrafts    = prometheus.NewDesc("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", modelLabels, nil)
	descDraftToks = prometheus.NewDesc("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", modelLabels, nil)
	descAccepted  = prometheus.NewDesc("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", modelLabels, nil)
	descSuccess   = prometheus.NewDesc("hone:engine_requests_finished_total", "Requests the engine finished (every finish reason).", modelLabels, nil)
	descSteps     = prometheus.NewDesc("hone:engine_steps_total", "Forward passes (engine steps) run.", modelLabels, nil)
	descKVBlocks  = prometheus.NewDesc("hone:kv_cache_blocks", "KV-cache blocks the model's cache may hold.", modelLabels, nil)
)

type servingCollector struct{ s *Serving }

func (c servingCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunning, descWaiting, descKVUsage, descPrompt, descGen, descPCQueries, descPCHits,
		descDrafts, descDraftToks, descAccepted, descSuccess, descSteps, descKVBlocks} {
		ch <- d
	}
}

func (c servingCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	list := c.s.models
	c.s.mu.Unlock()
	if list == nil {
		return
	}
	for _, m := range list() {
		e := m.Engine
		if e == nil {
			continue
		}
		st := e.Stats()
		lv := []string{m.Name, engineIndex}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
		}
		counter := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
		}
		gauge(descRunning, float64(st.Running))
		gauge(descWaiting, float64(st.Waiting))
		gauge(descKVUsage, e.KVCacheUsage())
		gauge(descKVBlocks, float64(e.KVCache().Blocks))
		counter(descPrompt, st.PromptTokens)
		counter(descGen, st.GeneratedTokens)
		counter(descPCQueries, st.PromptTokens)
		counter(descPCHits, st.CachedPromptTokens)
		counter(descDrafts, st.Spec.Drafts)
		counter(descDraftToks, st.Spec.DraftTokens)
		counter(descAccepted, st.Spec.AcceptedTokens)
		counter(descSuccess, st.CompletedRequests)
		counter(descSteps, st.Steps)
	}
}

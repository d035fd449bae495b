package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/honeai/hone/internal/trace"
)

// Trace is the trace store: calls written (counted where the store writes them, whatever
// route they came by: the Weave routes, OTLP, Hone's own traced completions) and the
// latency of the ingest and query routes (HTTP observes those).
type Trace struct {
	calls  prometheus.Counter
	ingest *prometheus.HistogramVec
	query  *prometheus.HistogramVec
}

// latencyBuckets suit requests of milliseconds to a minute.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

func newTrace(reg prometheus.Registerer) *Trace {
	t := &Trace{
		calls: prometheus.NewCounter(prometheus.CounterOpts{Name: "hone:trace_calls_ingested_total",
			Help: "Calls written to the trace store (a start, an end, or both of one call count once per write)."}),
		ingest: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hone:trace_ingest_duration_seconds",
			Help: "Latency of the trace store's ingest routes, by route.", Buckets: latencyBuckets}, []string{"route"}),
		query: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hone:trace_query_duration_seconds",
			Help: "Latency of the trace store's query routes, by route.", Buckets: latencyBuckets}, []string{"route"}),
	}
	reg.MustRegister(t.calls, t.ingest, t.query)
	return t
}

// Store wraps a trace store so that the calls it writes are counted. The wrapper keeps the
// optional interfaces the trace service asks a store for (a file's existence, which the quota
// reads; table sorting in the store): TestStoreKeepsInterfaces fails when the SQL store gains
// an exported method the wrapper does not pass on.
func (t *Trace) Store(s trace.Store) trace.Store {
	c := countingStore{Store: s, calls: t.calls}
	fs, hasFiles := s.(fileStat)
	ts, sorts := s.(trace.TableSorter)
	switch {
	case hasFiles && sorts:
		return struct {
			countingStore
			fileStat
			trace.TableSorter
		}{c, fs, ts}
	case hasFiles:
		return struct {
			countingStore
			fileStat
		}{c, fs}
	case sorts:
		return struct {
			countingStore
			trace.TableSorter
		}{c, ts}
	}
	return c
}

// fileStat is trace's (unexported) interface of a store that tells whether it holds a file.
type fileStat interface {
	HasFile(ctx context.Context, project, digest string) (bool, error)
}

type countingStore struct {
	trace.Store
	calls prometheus.Counter
}

func (s countingStore) UpsertCalls(ctx context.Context, writes []trace.CallWrite) error {
	err := s.Store.UpsertCalls(ctx, writes)
	if err == nil {
		s.calls.Add(float64(len(writes)))
	}
	return err
}

func (s countingStore) UpsertCallStream(ctx context.Context, next func() ([]trace.CallWrite, error)) error {
	n := 0
	err := s.Store.UpsertCallStream(ctx, func() ([]trace.CallWrite, error) {
		ws, err := next()
		n += len(ws)
		return ws, err
	})
	if err == nil {
		s.calls.Add(float64(n))
	}
	return err
}

// ingestRoutes and queryRoutes are the trace routes whose latency is the store's.
var (
	ingestRoutes = map[string]bool{"/call/start": true, "/call/end": true, "/call/upsert_batch": true,
		"/v2/{entity}/{project}/calls/complete": true, "/v2/{entity}/{project}/call/start": true,
		"/v2/{entity}/{project}/call/end": true, "/otel/v1/traces": true}
	queryRoutes = map[string]bool{"/calls/stream_query": true, "/calls/query": true, "/calls/query_stats": true,
		"/call/read": true, "/trace/usage": true, "/calls/usage": true, "/objs/query": true, "/obj/read": true,
		"/table/query": true, "/table/query_stream": true, "/refs/read_batch": true, "/feedback/query": true}
)

package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/honeai/hone/internal/httpx"
)

// HTTP is the API's requests by route (the router's pattern, so that ids in paths do not
// make series), method and status.
type HTTP struct {
	duration *prometheus.HistogramVec
	trace    *Trace
}

func newHTTP(reg prometheus.Registerer) *HTTP {
	h := &HTTP{duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hone:http_request_duration_seconds",
		Help: "Latency of the API's requests (to the end of the answer, streams included), by route, method and status code.", Buckets: latencyBuckets},
		[]string{"route", "method", "code"})}
	reg.MustRegister(h.duration)
	return h
}

// Middleware observes each request. It must wrap the router directly, so that it sees the
// pattern the router matched (http.Request.Pattern).
func (h *HTTP) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := httpx.NewStatusWriter(w)
		next.ServeHTTP(sw, r)
		d := time.Since(start).Seconds()
		route := "unmatched"
		if _, path, ok := strings.Cut(r.Pattern, " "); ok {
			route = path
		} else if r.Pattern != "" {
			route = r.Pattern
		}
		code := sw.Status()
		h.duration.WithLabelValues(route, r.Method, strconv.Itoa(code)).Observe(d)
		if t := h.trace; t != nil && code < 400 {
			switch {
			case ingestRoutes[route]:
				t.ingest.WithLabelValues(route).Observe(d)
			case queryRoutes[route]:
				t.query.WithLabelValues(route).Observe(d)
			}
		}
	})
}

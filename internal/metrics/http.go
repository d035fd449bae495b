package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		d := time.Since(start).Seconds()
		route := "unmatched"
		if _, path, ok := strings.Cut(r.Pattern, " "); ok {
			route = path
		} else if r.Pattern != "" {
			route = r.Pattern
		}
		code := sw.status
		if code == 0 {
			code = http.StatusOK
		}
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

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

package httpx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/fault"
)

// RequestInfo is per-request state shared between the outer middleware (request id, access
// log) and the inner ones (authentication), which run with a derived context.
type RequestInfo struct {
	ID     string
	mu     sync.Mutex
	keyID  string
	entity string
}

func (ri *RequestInfo) setPrincipal(p auth.Principal) {
	ri.mu.Lock()
	ri.keyID, ri.entity = p.KeyID, p.Entity
	ri.mu.Unlock()
}

type infoKey struct{}

// Info returns the request's info (nil outside a request).
func Info(ctx context.Context) *RequestInfo {
	ri, _ := ctx.Value(infoKey{}).(*RequestInfo)
	return ri
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string {
	if ri := Info(ctx); ri != nil {
		return ri.ID
	}
	return ""
}

// NewRequestID returns a random request id.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func validRequestID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// WithRequestID takes X-Request-Id from the request (when it is 1–128 printable ASCII
// characters) or generates one, returns it in the response header, and puts it in the context.
func WithRequestID() Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get("X-Request-Id")
			if !validRequestID(id) {
				id = NewRequestID()
			}
			w.Header().Set("X-Request-Id", id)
			ri := &RequestInfo{ID: id}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), infoKey{}, ri)))
		})
	}
}

// StatusWriter records the status and size of a response while passing Flush and Unwrap
// through (for streaming and http.ResponseController): for middleware that reports on the
// response (the access log, metrics, tracing).
type StatusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

// NewStatusWriter wraps w.
func NewStatusWriter(w http.ResponseWriter) *StatusWriter { return &StatusWriter{ResponseWriter: w} }

// Status is the response's status code: 200 when the handler wrote nothing or only a body.
func (s *StatusWriter) Status() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// Bytes is the size of the body written so far.
func (s *StatusWriter) Bytes() int64 { return s.bytes }

func (s *StatusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *StatusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

func (s *StatusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *StatusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// AccessLog logs one line per request: request id, method, path (no query string), status,
// duration, bytes, and the key id and entity when authenticated. It never logs headers or
// bodies, so secrets stay out of the logs.
func AccessLog(logger *slog.Logger) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			sw := NewStatusWriter(w)
			next.ServeHTTP(sw, r)
			status := sw.Status()
			attrs := []slog.Attr{
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Int("status", status),
				slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
				slog.Int64("bytes", sw.Bytes()),
			}
			if ri := Info(r.Context()); ri != nil {
				ri.mu.Lock()
				if ri.keyID != "" {
					attrs = append(attrs, slog.String("key_id", ri.keyID), slog.String("entity", ri.entity))
				}
				ri.mu.Unlock()
			}
			level := slog.LevelInfo
			if status >= 500 {
				level = slog.LevelError
			}
			logger.LogAttrs(r.Context(), level, "request", attrs...)
		})
	}
}

// Recover turns a panic in a handler into a 500 envelope (without internals) and logs it.
func Recover(logger *slog.Logger) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if p := recover(); p != nil {
					if p == http.ErrAbortHandler {
						panic(p)
					}
					logger.ErrorContext(r.Context(), "panic in handler", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
					apierror.WriteError(w, apierror.Internal())
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// LimitBody caps request bodies at max bytes; reading past it fails with *http.MaxBytesError,
// which DecodeJSON turns into a 413. A declared Content-Length over the limit is refused at once.
func LimitBody(max int64) Middleware { return LimitBodyExcept(max, nil) }

// LimitBodyExcept is LimitBody for every request but those exempt says stream their body
// themselves (uploads written to disk as they arrive).
func LimitBodyExcept(max int64, exempt func(*http.Request) bool) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if exempt != nil && exempt(r) {
				next.ServeHTTP(w, r)
				return
			}
			if r.ContentLength > max {
				apierror.WriteError(w, tooLarge(max))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, max)
			next.ServeHTTP(w, r)
		})
	}
}

func tooLarge(max int64) *apierror.Error {
	return apierror.TooLarge("Request body is larger than the limit of %d bytes", max)
}

// Authenticate requires scheme on every request, puts the principal in the context, and (when
// limiter is non-nil) holds one of the key's concurrency slots for the request's duration.
func Authenticate(keys *auth.Keys, scheme auth.Scheme, limiter *KeyLimiter) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, err := keys.Authenticate(r.Context(), r.Header.Get("Authorization"), scheme)
			if err != nil {
				if fault.Is(err, fault.KindUnauthenticated) {
					w.Header().Set("WWW-Authenticate", scheme.Challenge())
				}
				apierror.Write(w, r, err)
				return
			}
			if ri := Info(r.Context()); ri != nil {
				ri.setPrincipal(p)
			}
			if limiter != nil {
				release, ok := limiter.Acquire(p.KeyID)
				if !ok {
					e := apierror.TooManyRequests("Concurrency limit reached for requests: at most %d concurrent requests per API key", limiter.Limit())
					e.Headers = map[string]string{"Retry-After": "1"}
					apierror.WriteError(w, e)
					return
				}
				defer release()
			}
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		})
	}
}

// KeyLimiter bounds the number of concurrent requests per API key.
type KeyLimiter struct {
	limit int
	mu    sync.Mutex
	n     map[string]int
}

// NewKeyLimiter returns a limiter allowing limit concurrent requests per key (limit <= 0: no limit).
func NewKeyLimiter(limit int) *KeyLimiter {
	return &KeyLimiter{limit: limit, n: map[string]int{}}
}

// Limit is the per-key limit.
func (l *KeyLimiter) Limit() int { return l.limit }

// Acquire takes a slot for key; ok is false when the key is at its limit.
func (l *KeyLimiter) Acquire(key string) (release func(), ok bool) {
	if l.limit <= 0 {
		return func() {}, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key] >= l.limit {
		return nil, false
	}
	l.n[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			if l.n[key]--; l.n[key] <= 0 {
				delete(l.n, key)
			}
			l.mu.Unlock()
		})
	}, true
}

// ContextLogHandler adds the request id of the context to every record, so that logs written
// with slog.*Context inside a request carry it.
type ContextLogHandler struct{ slog.Handler }

// Handle adds request_id before passing the record on.
func (h ContextLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the wrapper.
func (h ContextLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return ContextLogHandler{h.Handler.WithAttrs(as)}
}

// WithGroup keeps the wrapper.
func (h ContextLogHandler) WithGroup(name string) slog.Handler {
	return ContextLogHandler{h.Handler.WithGroup(name)}
}

// IsClientGone reports whether err comes from a client that went away.
func IsClientGone(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, http.ErrHandlerTimeout)
}

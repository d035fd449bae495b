// Package httpx is Hone's HTTP plumbing: a router that documents every route for
// /openapi.json and answers unknown routes and wrong methods in the one error envelope;
// middleware (request id, access log, panic recovery, body limit, authentication, per-key
// concurrency); and JSON decoding that names the field at fault.
package httpx

import (
	"bytes"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/openapi"
)

// Middleware wraps a handler.
type Middleware func(http.Handler) http.Handler

// Chain applies mws so that the first one is the outermost.
func Chain(h http.Handler, mws ...Middleware) http.Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// Router is a ServeMux (Go 1.22 method patterns) that records each route's documentation.
type Router struct {
	mux    *http.ServeMux
	mu     sync.Mutex
	routes []openapi.Route
}

// NewRouter returns an empty router.
func NewRouter() *Router { return &Router{mux: http.NewServeMux()} }

// Handle registers h for pattern ("METHOD /path", ServeMux syntax) with its documentation op.
// A nil op is allowed so that the route still works, but the OpenAPI test reports it.
func (r *Router) Handle(pattern string, h http.Handler, op *openapi.Operation) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "", pattern
	}
	r.mu.Lock()
	r.routes = append(r.routes, openapi.Route{Method: method, Path: path, Op: op})
	r.mu.Unlock()
	r.mux.Handle(pattern, h)
}

// HandleFunc is Handle for a function.
func (r *Router) HandleFunc(pattern string, h http.HandlerFunc, op *openapi.Operation) {
	r.Handle(pattern, h, op)
}

// Group returns a view of r that wraps every handler registered through it with mws.
func (r *Router) Group(mws ...Middleware) *Group { return &Group{r: r, mws: mws} }

// Routes returns the registered routes sorted by path and method.
func (r *Router) Routes() []openapi.Route {
	r.mu.Lock()
	out := append([]openapi.Route(nil), r.routes...)
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// ServeHTTP dispatches to the matching route; unknown routes are 404 and known paths with
// another method are 405 (with Allow), both in the error envelope.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	h, pattern := r.mux.Handler(req)
	if pattern != "" {
		r.mux.ServeHTTP(w, req)
		return
	}
	// No route matched: let the mux decide (404, 405 or a path-cleaning redirect) on a
	// recorder, then answer 404/405 in the envelope.
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, req)
	switch rec.status {
	case http.StatusNotFound:
		apierror.WriteError(w, apierror.NotFound("", "Not Found: no route for %s %s", req.Method, req.URL.Path))
	case http.StatusMethodNotAllowed:
		allow := rec.header.Get("Allow")
		e := apierror.New(http.StatusMethodNotAllowed, apierror.TypeMethodNotAllowed, "",
			"Method Not Allowed: "+req.Method+" "+req.URL.Path+" (allowed: "+allow+")")
		e.Headers = map[string]string{"Allow": allow}
		apierror.WriteError(w, e)
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body.Bytes())
	}
}

type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// Group registers routes on a router through a middleware chain.
type Group struct {
	r   *Router
	mws []Middleware
	sec openapi.Security
}

// Secured returns the group whose routes declare sec in the OpenAPI document when their
// operation names no security of its own: a group behind an authentication middleware
// says so once, and no authenticated route can claim `security: []`.
func (g *Group) Secured(sec openapi.Security) *Group {
	return &Group{r: g.r, mws: g.mws, sec: sec}
}

// Handle registers h wrapped in the group's middleware.
func (g *Group) Handle(pattern string, h http.Handler, op *openapi.Operation) {
	if g.sec != openapi.NoAuth && (op == nil || op.Security == openapi.NoAuth) {
		o := openapi.Operation{}
		if op != nil {
			o = *op
		}
		o.Security = g.sec
		op = &o
	}
	g.r.Handle(pattern, Chain(h, g.mws...), op)
}

// HandleFunc is Handle for a function.
func (g *Group) HandleFunc(pattern string, h http.HandlerFunc, op *openapi.Operation) {
	g.Handle(pattern, h, op)
}

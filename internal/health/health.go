// Package health answers Hone's health routes: `GET /v1/health` (no auth), `GET
// /v1/system-check` (Bearer; one entry per component check, 503 when any fails), and the trace
// area's `GET /health` and `GET /server_info` that the Weave SDKs call.
package health

import (
	"context"
	"net/http"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/openapi"
)

// CheckFunc checks one component. It returns extra fields for the report (may be nil) and an
// error when the component does not work.
type CheckFunc func(ctx context.Context) (map[string]any, error)

// Checks is the set of system checks; components register theirs (a later Register with the
// same name replaces the earlier one).
type Checks struct {
	mu     sync.Mutex
	checks map[string]CheckFunc
}

// NewChecks returns a set holding the checks every Hone has: `api`, `cpu_queue` (until the job
// queue registers the real one) and `gpu_queue`.
func NewChecks() *Checks {
	c := &Checks{checks: map[string]CheckFunc{}}
	c.Register("api", func(context.Context) (map[string]any, error) { return nil, nil })
	c.Register("cpu_queue", CPUProbe)
	c.Register("gpu_queue", func(context.Context) (map[string]any, error) {
		return map[string]any{
			"available": false,
			"detail":    "no GPU on this machine: training and inference run on the CPU queue",
		}, nil
	})
	return c
}

// Register adds or replaces the check called name.
func (c *Checks) Register(name string, fn CheckFunc) {
	c.mu.Lock()
	c.checks[name] = fn
	c.mu.Unlock()
}

// CPUProbe checks that the process can schedule CPU work: a goroutine does a small computation
// and answers within the check's deadline. It reports the cores available.
func CPUProbe(ctx context.Context) (map[string]any, error) {
	done := make(chan float64, 1)
	go func() {
		s := 0.0
		for i := 1; i <= 100000; i++ {
			s += 1 / float64(i*i)
		}
		done <- s
	}()
	select {
	case <-done:
		return map[string]any{"cores": runtime.GOMAXPROCS(0)}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Result is one check's report.
type Result struct {
	Success    bool           `json:"success"`
	DurationMS float64        `json:"duration_ms"`
	Errors     []string       `json:"errors"`
	Extra      map[string]any `json:"-"`
}

// Run runs every check concurrently, each with timeout, and reports whether all succeeded.
func (c *Checks) Run(ctx context.Context, timeout time.Duration) (map[string]Result, bool) {
	c.mu.Lock()
	names := make([]string, 0, len(c.checks))
	for n := range c.checks {
		names = append(names, n)
	}
	fns := make([]CheckFunc, len(names))
	sort.Strings(names)
	for i, n := range names {
		fns[i] = c.checks[n]
	}
	c.mu.Unlock()

	results := make([]Result, len(names))
	var wg sync.WaitGroup
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			start := time.Now()
			type out struct {
				extra map[string]any
				err   error
			}
			ch := make(chan out, 1)
			go func() {
				defer func() {
					if p := recover(); p != nil {
						ch <- out{err: errPanic}
					}
				}()
				e, err := fns[i](cctx)
				ch <- out{e, err}
			}()
			var o out
			select {
			case o = <-ch:
			case <-cctx.Done():
				o.err = cctx.Err()
			}
			r := Result{Success: o.err == nil, Errors: []string{}, Extra: o.extra,
				DurationMS: float64(time.Since(start).Microseconds()) / 1000}
			if o.err != nil {
				r.Errors = append(r.Errors, o.err.Error())
			}
			results[i] = r
		}()
	}
	wg.Wait()
	out := make(map[string]Result, len(names))
	ok := true
	for i, n := range names {
		out[n] = results[i]
		ok = ok && results[i].Success
	}
	return out, ok
}

type panicError struct{}

func (panicError) Error() string { return "check panicked" }

var errPanic = panicError{}

// Status is the body of the health routes.
type Status struct {
	Status string `json:"status"`
}

// ServerInfo is the body of GET /server_info.
type ServerInfo struct {
	MinRequiredWeavePythonVersion string `json:"min_required_weave_python_version"`
	TraceServerVersion            string `json:"trace_server_version"`
}

// SystemCheck documents the body of GET /v1/system-check: one entry per check.
type SystemCheck map[string]CheckReport

// CheckReport is one entry of SystemCheck.
type CheckReport struct {
	Success    bool     `json:"success"`
	DurationMS float64  `json:"duration_ms"`
	Errors     []string `json:"errors"`
}

// MinWeavePythonVersion is the oldest Weave Python SDK Hone's trace server speaks with.
const MinWeavePythonVersion = "0.51.0"

// Register adds the health routes to r; bearer authenticates /v1/system-check.
func Register(r *httpx.Router, checks *Checks, bearer httpx.Middleware, version string) {
	ok := func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, Status{Status: "ok"})
	}
	r.HandleFunc("GET /v1/health", ok, &openapi.Operation{
		Summary: "Health check", Tags: []string{"health"}, Response: Status{},
		Description: "Always 200 while the server runs; needs no authentication.",
	})
	r.HandleFunc("GET /health", ok, &openapi.Operation{
		Summary: "Trace server health check", Tags: []string{"tracing"}, Response: Status{},
	})
	r.HandleFunc("GET /server_info", func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, ServerInfo{MinRequiredWeavePythonVersion: MinWeavePythonVersion, TraceServerVersion: version})
	}, &openapi.Operation{Summary: "Trace server information", Tags: []string{"tracing"}, Response: ServerInfo{}})
	r.Group(bearer).HandleFunc("GET /v1/system-check", func(w http.ResponseWriter, req *http.Request) {
		results, allOK := checks.Run(req.Context(), 5*time.Second)
		body := make(map[string]map[string]any, len(results))
		for name, res := range results {
			m := map[string]any{}
			for k, v := range res.Extra {
				m[k] = v
			}
			m["success"], m["duration_ms"], m["errors"] = res.Success, res.DurationMS, res.Errors
			body[name] = m
		}
		status := http.StatusOK
		if !allOK {
			status = http.StatusServiceUnavailable
		}
		httpx.WriteJSON(w, status, body)
	}, &openapi.Operation{
		Summary: "System check", Tags: []string{"health"}, Security: openapi.BearerAuth, Response: SystemCheck{},
		Description: "Checks api, database, cpu_queue and gpu_queue; 503 when any check fails.",
	})
}

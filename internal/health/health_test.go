package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/honeai/hone/internal/health"
	"github.com/honeai/hone/internal/httpx"
)

func passThrough(next http.Handler) http.Handler { return next }

func TestSystemCheck(t *testing.T) {
	c := health.NewChecks()
	r := httpx.NewRouter()
	health.Register(r, c, passThrough, "test")
	get := func() (int, map[string]map[string]any) {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", "/v1/system-check", nil))
		var body map[string]map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		return w.Code, body
	}
	code, body := get()
	if code != 200 {
		t.Fatalf("status %d %v", code, body)
	}
	for _, name := range []string{"api", "cpu_queue", "gpu_queue"} {
		e, ok := body[name]
		if !ok || e["success"] != true {
			t.Fatalf("%s: %v", name, e)
		}
		if _, ok := e["duration_ms"]; !ok {
			t.Fatalf("%s lacks duration_ms", name)
		}
	}
	if body["gpu_queue"]["available"] != false {
		t.Fatalf("gpu_queue must say no GPU: %v", body["gpu_queue"])
	}
	c.Register("database", func(context.Context) (map[string]any, error) { return nil, errors.New("disk on fire") })
	c.Register("slow", func(ctx context.Context) (map[string]any, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			return nil, nil
		}
	})
	c.Register("panics", func(context.Context) (map[string]any, error) { panic("x") })
	results, ok := c.Run(context.Background(), 100*time.Millisecond)
	if ok || results["database"].Success || results["slow"].Success || results["panics"].Success {
		t.Fatalf("failing checks reported ok: %+v", results)
	}
	if results["database"].Errors[0] != "disk on fire" {
		t.Fatalf("errors = %v", results["database"].Errors)
	}
	c.Register("slow", func(context.Context) (map[string]any, error) { return nil, nil })
	c.Register("panics", func(context.Context) (map[string]any, error) { return nil, nil })
	code, body = get()
	if code != http.StatusServiceUnavailable || body["database"]["success"] != false {
		t.Fatalf("want 503 with database failing: %d %v", code, body)
	}
}

package studio

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/openapi"
)

type mux struct{ *http.ServeMux }

func (m mux) HandleFunc(p string, h http.HandlerFunc, _ *openapi.Operation) {
	m.ServeMux.HandleFunc(p, h)
}

func get(t *testing.T, h http.Handler, path string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// TestUIAssets checks the embedded files: every one is served under the build's prefix with
// its content type and an immutable cache header, index.html names them, ES module imports
// resolve to embedded files, and nothing is loaded from another origin.
func TestUIAssets(t *testing.T) {
	a, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	m := mux{http.NewServeMux()}
	if err := Register(m); err != nil {
		t.Fatal(err)
	}
	names := a.Names()
	for _, want := range []string{"index.html", "app.js", "api.js", "dom.js", "traces.js", "call.js", "evals.js", "chart.js", "objects.js", "training.js", "playground.js", "studio.css", "vendor/uPlot.esm.js", "vendor/uPlot.min.css", "vendor/uPlot.LICENSE"} {
		if _, ok := a.files[want]; !ok {
			t.Errorf("asset %s is not embedded (have %v)", want, names)
		}
	}
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
	importRE := regexp.MustCompile(`(?m)^import\s[^'"]*['"]([^'"]+)['"]`)
	for _, n := range names {
		if n == "index.html" {
			continue
		}
		res := get(t, m, a.Prefix()+n)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || string(body) != string(a.files[n]) {
			t.Fatalf("%s: %d", n, res.StatusCode)
		}
		for ext, ct := range types {
			if strings.HasSuffix(n, ext) && res.Header.Get("Content-Type") != ct {
				t.Errorf("%s: Content-Type %q", n, res.Header.Get("Content-Type"))
			}
		}
		if !strings.Contains(res.Header.Get("Cache-Control"), "immutable") || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", n, res.Header)
		}
		if strings.HasSuffix(n, ".js") && !strings.HasPrefix(n, "vendor/") {
			for _, im := range importRE.FindAllStringSubmatch(string(a.files[n]), -1) {
				target := strings.TrimPrefix(im[1], "./")
				if _, ok := a.files[target]; !ok {
					t.Errorf("%s imports %s, which is not embedded", n, im[1])
				}
			}
			if strings.Contains(string(a.files[n]), "https://") || strings.Contains(string(a.files[n]), "//cdn") {
				t.Errorf("%s names another origin", n)
			}
		}
	}
	if res := get(t, m, a.Prefix()+"app.js", "If-None-Match", `"`+a.hash+`"`); res.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", res.StatusCode)
	}
	for _, p := range []string{"/studio/000000000000/static/app.js", a.Prefix() + "nope.js", a.Prefix() + "index.html"} {
		res := get(t, m, p)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 404 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || !strings.Contains(string(body), `"code":404`) {
			t.Errorf("%s: %d %s, want 404 in the error envelope", p, res.StatusCode, body)
		}
	}
	// index.html: the pages' answer, never cached, naming this build's assets only.
	for _, p := range []string{"/", "/playground", "/local/p/weave", "/local/p/weave/objects/x", "/local/p/r/call/0192", "/local/p/training/jobs/j1"} {
		res := get(t, m, p)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/html; charset=utf-8" || res.Header.Get("Cache-Control") != "no-cache" ||
			!strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Fatalf("%s: %d %v", p, res.StatusCode, res.Header)
		}
		if !strings.Contains(string(body), a.Prefix()+"app.js") || strings.Contains(string(body), "{{ASSETS}}") || strings.Contains(string(body), "http") {
			t.Fatalf("%s: index %s", p, body)
		}
	}
}

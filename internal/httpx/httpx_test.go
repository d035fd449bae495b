package httpx_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/httpx"
)

type inner struct {
	N int `json:"n"`
}

type req struct {
	Name  string  `json:"name"`
	Count int     `json:"count"`
	Inner *inner  `json:"inner"`
	List  []inner `json:"list"`
}

func decodeErr(t *testing.T, body string, opts httpx.DecodeOptions) *apierror.Error {
	t.Helper()
	r := httptest.NewRequest("POST", "/", strings.NewReader(body))
	var v req
	err := httpx.DecodeJSON(r, &v, opts)
	if err == nil {
		return nil
	}
	e, ok := apierror.As(err)
	if !ok {
		t.Fatalf("not an API error: %v", err)
	}
	return e
}

func TestDecodeJSONErrorsNameTheField(t *testing.T) {
	cases := []struct {
		body, param, msg string
		strict           bool
		status           int
	}{
		{`{"name": 1}`, "name", "expected string", false, 400},
		{`{"count": "x"}`, "count", "expected integer", false, 400},
		{`{"inner": {"n": true}}`, "inner.n", "expected integer", false, 400},
		{`{"list": [{"n": 1}, {"n": "z"}]}`, "list.n", "expected integer", false, 400},
		{`{"name": "a",`, "", "Malformed JSON", false, 400},
		{`[1,2]`, "", "must be a JSON object", false, 400},
		{``, "", "required", false, 400},
		{`{"name": "a"} {}`, "", "after the top-level value", false, 400},
		{`{"name": "a", "zzz": 1, "aaa": 2}`, "aaa", "`aaa`, `zzz`", true, 400},
	}
	for _, c := range cases {
		e := decodeErr(t, c.body, httpx.DecodeOptions{Strict: c.strict})
		if e == nil {
			t.Errorf("%s: no error", c.body)
			continue
		}
		if e.Status != c.status || e.Param != c.param || !strings.Contains(e.Message, c.msg) {
			t.Errorf("%s: got %d %q %q; want %d %q ~%q", c.body, e.Status, e.Param, e.Message, c.status, c.param, c.msg)
		}
	}
	// Lenient mode ignores unknown fields, strict only checks the top level.
	if e := decodeErr(t, `{"name": "a", "zzz": 1}`, httpx.DecodeOptions{}); e != nil {
		t.Errorf("lenient decode failed: %v", e)
	}
	if e := decodeErr(t, `{"inner": {"n": 1, "extra": 2}}`, httpx.DecodeOptions{Strict: true}); e != nil {
		t.Errorf("strict decode rejected a nested unknown field: %v", e)
	}
}

func TestDecodeJSONContentTypeAndSize(t *testing.T) {
	r := httptest.NewRequest("POST", "/", strings.NewReader(`{}`))
	r.Header.Set("Content-Type", "text/plain")
	var v req
	if e, _ := apierror.As(httpx.DecodeJSON(r, &v, httpx.DecodeOptions{})); e.Status != 400 || !strings.Contains(e.Message, "application/json") {
		t.Fatalf("content type: %+v", e)
	}
	h := httpx.Chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v req
		if err := httpx.DecodeJSON(r, &v, httpx.DecodeOptions{}); err != nil {
			apierror.Write(w, r, err)
			return
		}
		w.WriteHeader(204)
	}), httpx.LimitBody(64))
	for _, chunked := range []bool{false, true} {
		body := `{"name": "` + strings.Repeat("x", 100) + `"}`
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		if chunked {
			r.ContentLength = -1
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("chunked=%v: status %d %s", chunked, w.Code, w.Body)
		}
		checkEnvelope(t, w.Body.Bytes(), 413)
	}
}

func checkEnvelope(t *testing.T, body []byte, code int) apierror.Info {
	t.Helper()
	var env map[string]map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("not JSON: %s", body)
	}
	e, ok := env["error"]
	if !ok || len(env) != 1 {
		t.Fatalf("not the envelope: %s", body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Fatalf("envelope lacks %q: %s", k, body)
		}
	}
	if int(e["code"].(float64)) != code {
		t.Fatalf("code %v, want %d", e["code"], code)
	}
	var info struct{ Error apierror.Info }
	_ = json.Unmarshal(body, &info)
	return info.Error
}

func TestRouterEnvelopes(t *testing.T) {
	r := httpx.NewRouter()
	r.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, 200, map[string]string{"id": r.PathValue("id")})
	}, nil)
	r.HandleFunc("POST /boom", func(w http.ResponseWriter, r *http.Request) { panic("internal detail xyz") }, nil)
	h := httpx.Chain(r, httpx.WithRequestID(), httpx.AccessLog(slog.New(slog.NewTextHandler(io.Discard, nil))), httpx.Recover(slog.New(slog.NewTextHandler(io.Discard, nil))))

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/things/7", nil))
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"7"`) {
		t.Fatalf("route: %d %s", w.Code, w.Body)
	}
	if id := w.Header().Get("X-Request-Id"); len(id) != 32 {
		t.Fatalf("generated request id %q", id)
	}
	w = httptest.NewRecorder()
	rq := httptest.NewRequest("GET", "/things/7", nil)
	rq.Header.Set("X-Request-Id", "client-id-1")
	h.ServeHTTP(w, rq)
	if w.Header().Get("X-Request-Id") != "client-id-1" {
		t.Fatalf("request id not kept: %q", w.Header().Get("X-Request-Id"))
	}

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/nowhere", nil))
	checkEnvelope(t, w.Body.Bytes(), 404)

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("DELETE", "/things/7", nil))
	checkEnvelope(t, w.Body.Bytes(), 405)
	if !strings.Contains(w.Header().Get("Allow"), "GET") {
		t.Fatalf("Allow = %q", w.Header().Get("Allow"))
	}

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/boom", nil))
	info := checkEnvelope(t, w.Body.Bytes(), 500)
	if strings.Contains(info.Message, "xyz") {
		t.Fatalf("500 leaks internals: %q", info.Message)
	}
	if got := len(r.Routes()); got != 2 {
		t.Fatalf("routes = %d", got)
	}
}

func TestKeyLimiter(t *testing.T) {
	l := httpx.NewKeyLimiter(2)
	r1, ok1 := l.Acquire("k")
	_, ok2 := l.Acquire("k")
	_, ok3 := l.Acquire("k")
	_, okOther := l.Acquire("other")
	if !ok1 || !ok2 || ok3 || !okOther {
		t.Fatalf("acquire: %v %v %v %v", ok1, ok2, ok3, okOther)
	}
	r1()
	r1() // releasing twice frees one slot only
	if _, ok := l.Acquire("k"); !ok {
		t.Fatal("slot not released")
	}
	if _, ok := l.Acquire("k"); ok {
		t.Fatal("double release freed two slots")
	}
}

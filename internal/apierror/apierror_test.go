package apierror

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/fault"
)

func TestEnvelopeShape(t *testing.T) {
	w := httptest.NewRecorder()
	Write(w, nil, BadRequest("messages", "bad %s", "thing"))
	if w.Code != 400 {
		t.Fatal(w.Code)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	e := got["error"]
	if e["message"] != "bad thing" || e["type"] != TypeBadRequest || e["param"] != "messages" || e["code"] != float64(400) {
		t.Fatalf("envelope %v", e)
	}
	w = httptest.NewRecorder()
	Write(w, nil, fmt.Errorf("wrapped: %w", NotFound("", "gone")))
	if w.Code != 404 || !json.Valid(w.Body.Bytes()) {
		t.Fatalf("wrapped error: %d", w.Code)
	}
	var nullParam map[string]map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &nullParam)
	if v, ok := nullParam["error"]["param"]; !ok || v != nil {
		t.Fatalf("param must be null: %v", nullParam)
	}
	w = httptest.NewRecorder()
	Write(w, nil, errors.New("pq: password=hunter2 failed"))
	if w.Code != 500 || json.Valid(w.Body.Bytes()) == false || strings.Contains(w.Body.String(), "hunter2") {
		t.Fatalf("500 leaks: %s", w.Body)
	}
}

// TestFaultsMapAtTheEdge: a service's fault, wrapped or not, becomes the envelope of its kind
// with its field.
func TestFaultsMapAtTheEdge(t *testing.T) {
	for _, c := range []struct {
		f      *fault.Error
		status int
		typ    string
	}{
		{fault.Invalid("config.epochs", "epochs must be from 1 to 1000"), 400, TypeBadRequest},
		{fault.NotFound("model_id", "Model x not found"), 404, TypeNotFound},
		{fault.Forbidden("project_id", "not yours"), 403, TypePermissionDenied},
		{fault.Conflict("name", "exists"), 409, TypeConflict},
		{fault.Unavailable("busy"), 503, TypeUnavailable},
		{fault.Unauthenticated("Invalid API key."), 401, TypeAuthentication},
	} {
		e, ok := As(fmt.Errorf("wrapped: %w", c.f))
		if !ok || e.Status != c.status || e.Type != c.typ || e.Param != c.f.Field || e.Message != c.f.Msg {
			t.Errorf("%+v -> %+v %v", c.f, e, ok)
		}
	}
	if _, ok := As(errors.New("internal")); ok {
		t.Error("a plain error is not an API error")
	}
}

package apierror

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
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

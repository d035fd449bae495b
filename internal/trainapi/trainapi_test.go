package trainapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/training/trainingtest"
)

func TestLimitParam(t *testing.T) {
	for v, want := range map[string]int{"": 20, "1": 1, "100": 100} {
		if n, err := limitParam(v); err != nil || n != want {
			t.Errorf("limit %q: %d %v", v, n, err)
		}
	}
	for _, v := range []string{"0", "101", "-1", "x", "1.5"} {
		_, err := limitParam(v)
		if err == nil || err.Error() != `limit must be an integer from 1 to 100, got "`+v+`"` {
			t.Errorf("limit %q: %v", v, err)
		}
	}
}

// TestPageJSON: the page envelope is written as it was when it was a map (keys in order of
// their names), empty data as [] with null ids.
func TestPageJSON(t *testing.T) {
	id := func(s string) string { return s }
	for _, c := range []struct {
		data []string
		more bool
		want string
	}{
		{nil, false, `{"data":[],"first_id":null,"has_more":false,"last_id":null,"object":"list"}`},
		{[]string{"a", "b"}, true, `{"data":["a","b"],"first_id":"a","has_more":true,"last_id":"b","object":"list"}`},
	} {
		b, _ := json.Marshal(page(c.data, c.more, id))
		if string(b) != c.want {
			t.Errorf("page %v: %s, want %s", c.data, b, c.want)
		}
	}
	// The shapes that were maps too.
	for v, want := range map[any]string{
		File{Bytes: 3, ID: "file-1", Object: "file", URL: "hone-file:///file-1"}: `{"bytes":3,"id":"file-1","object":"file","url":"hone-file:///file-1"}`,
		JobCreated{ID: "j"}: `{"id":"j"}`,
	} {
		if b, _ := json.Marshal(v); string(b) != want {
			t.Errorf("%T: %s, want %s", v, b, want)
		}
	}
	b, _ := json.Marshal(PruneResult{DeletedCount: 1, NotFoundSteps: []int{}, DeletedSteps: []int{1}, KeptSteps: []int{2}, BestSteps: []int{2}})
	if want := `{"best_steps":[2],"deleted_count":1,"deleted_steps":[1],"kept_steps":[2],"not_found_steps":[]}`; string(b) != want {
		t.Errorf("prune: %s, want %s", b, want)
	}
}

// server is the training API over a training service on a temporary SQLite store serving one
// tiny random model ("tiny"); every request acts as a key of entity local.
func server(t *testing.T) *httptest.Server {
	t.Helper()
	svc := trainingtest.NewService(t)
	r := httpx.NewRouter()
	bearer := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			next.ServeHTTP(w, req.WithContext(auth.WithPrincipal(req.Context(), auth.Principal{KeyID: "k", Entity: "local"})))
		})
	}
	(&API{Svc: svc}).Register(r, bearer)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, method, url, contentType, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHandlers: models, an upload, an SFT job and its events through the routes, and the
// refusals they map to the error envelope.
func TestHandlers(t *testing.T) {
	u := server(t).URL + "/v1/preview"
	const js = "application/json"
	code, body := call(t, "GET", u+"/base-models", "", "")
	if code != 200 || !strings.Contains(body, `"id":"tiny"`) {
		t.Fatalf("base models: %d %s", code, body)
	}
	code, body = call(t, "POST", u+"/models", js, `{"project":"p","name":"m","base_model":"tiny"}`)
	var m registry.Model
	if code != 200 || json.Unmarshal([]byte(body), &m) != nil || m.Entity != "local" || m.BaseModel != "tiny" {
		t.Fatalf("create model: %d %s", code, body)
	}
	if code, body = call(t, "POST", u+"/models", js, `{"entity":"other","project":"p","name":"m","base_model":"tiny"}`); code != 403 {
		t.Fatalf("another entity's model: %d %s", code, body)
	}
	if code, body = call(t, "GET", u+"/models/local/p/m", "", ""); code != 200 || !strings.Contains(body, m.ID) {
		t.Fatalf("get model: %d %s", code, body)
	}
	if code, body = call(t, "GET", u+"/models/local/p/nope", "", ""); code != 404 {
		t.Fatalf("missing model: %d %s", code, body)
	}
	if code, body = call(t, "GET", u+"/models/local/p/m/checkpoints?limit=0", "", ""); code != 400 || !strings.Contains(body, `"param":"limit"`) {
		t.Fatalf("limit 0: %d %s", code, body)
	}
	if code, body = call(t, "GET", u+"/models/local/p/m/checkpoints", "", ""); code != 200 || body != `{"data":[],"first_id":null,"has_more":false,"last_id":null,"object":"list"}`+"\n" {
		t.Fatalf("no checkpoints: %d %q", code, body)
	}

	code, body = call(t, "POST", u+"/files", "application/jsonl", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`+"\n")
	var f File
	if code != 200 || json.Unmarshal([]byte(body), &f) != nil || f.URL == "" || f.Object != "file" {
		t.Fatalf("upload: %d %s", code, body)
	}
	code, body = call(t, "POST", u+"/sft-training-jobs", js, `{"model_id":"`+m.ID+`","training_data_url":"`+f.URL+`","config":{"epochs":1}}`)
	var created JobCreated
	if code != 200 || json.Unmarshal([]byte(body), &created) != nil || created.ID == "" {
		t.Fatalf("sft job: %d %s", code, body)
	}
	if code, body = call(t, "POST", u+"/sft-training-jobs", js, `{"model_id":"`+m.ID+`","training_data_url":"`+f.URL+`","config":{"epochs":"x"}}`); code != 400 || !strings.Contains(body, `"param":"config.epochs"`) {
		t.Fatalf("a bad config: %d %s", code, body)
	}
	code, body = call(t, "GET", u+"/training-jobs?model_id=local/p/m", "", "")
	var jl Page[jobs.Job]
	if code != 200 || json.Unmarshal([]byte(body), &jl) != nil || len(jl.Data) != 1 || jl.Data[0].ID != created.ID || *jl.FirstID != created.ID {
		t.Fatalf("list jobs: %d %s", code, body)
	}
	code, body = call(t, "POST", u+"/training-jobs/"+created.ID+"/cancel", js, `{}`)
	var j jobs.Job
	if code != 200 || json.Unmarshal([]byte(body), &j) != nil || j.Status != jobs.Cancelled {
		t.Fatalf("cancel: %d %s", code, body)
	}
	code, body = call(t, "GET", u+"/training-jobs/"+created.ID+"/events", "", "")
	var evs Page[jobs.Event]
	if code != 200 || json.Unmarshal([]byte(body), &evs) != nil || evs.Object != "list" {
		t.Fatalf("events: %d %s", code, body)
	}
	if code, body = call(t, "GET", u+"/training-jobs/nope", "", ""); code != 404 {
		t.Fatalf("missing job: %d %s", code, body)
	}
	if code, body = call(t, "PATCH", u+"/models/local/p/m", js, `{}`); code != 405 {
		t.Fatalf("PATCH: %d %s", code, body)
	}
}

package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/client"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/trainapi"
	"github.com/honeai/hone/internal/training"
	"github.com/honeai/hone/internal/training/trainingtest"
)

// server is the training API over a temporary SQLite store serving one tiny random model
// ("tiny"); a request with the key "good" acts as entity local, any other is refused.
func server(t *testing.T) *httptest.Server {
	t.Helper()
	svc := trainingtest.NewService(t)
	r := httpx.NewRouter()
	bearer := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Header.Get("Authorization") != "Bearer good" {
				w.WriteHeader(http.StatusUnauthorized)
				w.Write([]byte(`{"error":{"message":"bad key","type":"AuthenticationError","param":null,"code":401}}`))
				return
			}
			next.ServeHTTP(w, req.WithContext(auth.WithPrincipal(req.Context(), auth.Principal{KeyID: "k", Entity: "local"})))
		})
	}
	(&trainapi.API{Svc: svc}).Register(r, bearer)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

// TestTrainingClient: a model, an upload and an SFT job through the typed client, with the
// server's refusals as *client.Error.
func TestTrainingClient(t *testing.T) {
	ctx := context.Background()
	srv := server(t)
	c := client.New(srv.URL+"/", "good")

	bases, err := c.BaseModels(ctx)
	if err != nil || len(bases) != 1 || bases[0].ID != "tiny" || bases[0].ChatTemplateFrom == "" {
		t.Fatalf("base models: %+v %v", bases, err)
	}
	if _, err := c.Model(ctx, "local/p/m"); client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("a missing model: %v", err)
	}
	m, err := c.CreateModel(ctx, trainapi.CreateModelRequest{Project: "p", Name: "m", BaseModel: "tiny"})
	if err != nil || m.Entity != "local" {
		t.Fatalf("create: %+v %v", m, err)
	}
	if got, err := c.Model(ctx, "local/p/m"); err != nil || got.ID != m.ID {
		t.Fatalf("get: %+v %v", got, err)
	}
	if ms, err := c.Models(ctx); err != nil || len(ms) != 1 {
		t.Fatalf("list: %+v %v", ms, err)
	}
	if p, err := c.Checkpoints(ctx, "local/p/m", 5, ""); err != nil || len(p.Data) != 0 || p.FirstID != nil {
		t.Fatalf("checkpoints: %+v %v", p, err)
	}

	f, err := c.UploadFile(ctx, []byte(`{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`+"\n"), "application/jsonl")
	if err != nil || f.URL == "" {
		t.Fatalf("upload: %+v %v", f, err)
	}
	_, err = c.CreateSFTJob(ctx, training.SFTRequest{ModelID: m.ID, TrainingDataURL: f.URL, Config: []byte(`{"epochs":"x"}`)})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 400 || ce.Param != "config.epochs" || ce.Type == "" {
		t.Fatalf("a bad config: %#v", err)
	}
	id, err := c.CreateSFTJob(ctx, training.SFTRequest{ModelID: m.ID, TrainingDataURL: f.URL, Config: []byte(`{"epochs":1}`)})
	if err != nil || id == "" {
		t.Fatalf("sft job: %q %v", id, err)
	}
	if j, err := c.Job(ctx, id); err != nil || j.Status != jobs.Queued || j.ModelID != m.ID {
		t.Fatalf("job: %+v %v", j, err)
	}
	if l, err := c.ListJobs(ctx, client.JobFilter{Model: "local/p/m", Limit: 10}); err != nil || len(l.Data) != 1 || l.Data[0].ID != id {
		t.Fatalf("jobs: %+v %v", l, err)
	}
	if _, err := c.ListJobs(ctx, client.JobFilter{Status: "NAPPING"}); client.StatusOf(err) != 400 {
		t.Fatalf("a bad status: %v", err)
	}
	if j, err := c.CancelJob(ctx, id); err != nil || j.Status != jobs.Cancelled {
		t.Fatalf("cancel: %+v %v", j, err)
	}
	// The job has ended: following its events reads them all and ends.
	evs, err := c.FollowJobEvents(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for evs.Next() {
		if evs.Event().Type == "" {
			t.Errorf("an event without a type: %+v", evs.Event())
		}
		n++
	}
	evs.Close()
	page, err := c.JobEvents(ctx, id, "", 100)
	if err != nil || evs.Err() != nil || len(page.Data) != n {
		t.Fatalf("followed %d events (%v), listed %+v (%v)", n, evs.Err(), page, err)
	}
	if err := c.DeleteModel(ctx, "local/p/m"); err != nil {
		t.Fatal(err)
	}

	// A wrong key: the envelope's message; a server that is gone: Unreachable's error.
	if _, err := client.New(srv.URL, "bad").BaseModels(ctx); err == nil || err.Error() != "401: bad key" {
		t.Fatalf("a bad key: %v", err)
	}
	srv.Close()
	gone := errors.New("gone")
	c.Unreachable = func(url string, err error) error { return gone }
	if _, err := c.BaseModels(ctx); err != gone {
		t.Fatalf("no server: %v", err)
	}
}

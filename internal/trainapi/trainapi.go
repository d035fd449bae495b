// Package trainapi serves the training API of the seed under /v1/preview with the payloads of
// W&B Training / OpenPipe ART — models, checkpoints, trajectory logs, RL and SFT training jobs
// with their events, data files — runs the jobs (Runner) on the durable queue of
// internal/jobs with the engine of internal/train, and resolves trained checkpoints for chat
// completions (ResolveAdapter).
package trainapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/chatapi"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/openapi"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/trace"
)

// Service holds what the training API needs.
type Service struct {
	Reg   *registry.Registry
	Queue *jobs.Queue
	Chat  *chatapi.Registry // the served base models
	Trace *trace.Service    // trajectory logs and weave:/// training data (may be nil)
	// DataRoot is the directory local training_data_url paths must lie under ("" = none allowed).
	DataRoot string
	// FilesDir keeps uploaded training files.
	FilesDir string
	Log      *slog.Logger
	// LoRA is the adapter shape of new models (rank 8, alpha 16 by default).
	LoRARank  int
	LoRAAlpha float64

	mu       sync.Mutex
	adapters map[string]*model.LoRA // checkpoint dir → loaded adapter
}

func (s *Service) logger() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// Register adds the routes behind bearer authentication.
func (s *Service) Register(r *httpx.Router, bearer httpx.Middleware) {
	g := r.Group(bearer)
	tag := []string{"training"}
	g.HandleFunc("GET /v1/preview/base-models", s.baseModels, &openapi.Operation{Summary: "List the base models that can be fine-tuned", Tags: tag})
	g.HandleFunc("POST /v1/preview/models", s.createModel, &openapi.Operation{Summary: "Create a trainable model", Tags: tag, Request: createModelReq{}, Response: registry.Model{}})
	g.HandleFunc("GET /v1/preview/models", s.listModels, &openapi.Operation{Summary: "List the entity's trainable models", Tags: tag})
	g.HandleFunc("GET /v1/preview/models/{model...}", s.modelRoutes, &openapi.Operation{Summary: "Get a model, or list its checkpoints (…/checkpoints)", Tags: tag})
	g.HandleFunc("DELETE /v1/preview/models/{model...}", s.modelRoutes, &openapi.Operation{Summary: "Delete a model, or some of its checkpoints (…/checkpoints)", Tags: tag})
	g.HandleFunc("POST /v1/preview/models/{model...}", s.modelRoutes, &openapi.Operation{Summary: "Log trajectories and their metrics (…/log)", Tags: tag})
	g.HandleFunc("POST /v1/preview/training-jobs", s.createRLJob, &openapi.Operation{Summary: "Create an RL training job (one step)", Tags: tag, Request: rlJobReq{}})
	g.HandleFunc("POST /v1/preview/sft-training-jobs", s.createSFTJob, &openapi.Operation{Summary: "Create an SFT training job", Tags: tag, Request: sftJobReq{}})
	g.HandleFunc("GET /v1/preview/training-jobs", s.listJobs, &openapi.Operation{Summary: "List the entity's training jobs, newest first (model_id, status, before, limit)", Tags: tag})
	g.HandleFunc("GET /v1/preview/training-jobs/{id}", s.getJob, &openapi.Operation{Summary: "Get a training job", Tags: tag, Response: jobs.Job{}})
	g.HandleFunc("GET /v1/preview/training-jobs/{id}/events", s.jobEvents, &openapi.Operation{Summary: "List a training job's events (text/event-stream follows it live)", Tags: tag})
	g.HandleFunc("POST /v1/preview/training-jobs/{id}/cancel", s.cancelJob, &openapi.Operation{Summary: "Cancel a training job", Tags: tag, Response: jobs.Job{}})
	g.HandleFunc("POST /v1/preview/files", s.uploadFile, &openapi.Operation{Summary: "Upload a training data file (JSONL body); use its url as training_data_url", Tags: tag})
}

func entityOf(r *http.Request) string {
	if p, ok := auth.FromContext(r.Context()); ok {
		return p.Entity
	}
	return ""
}

func (s *Service) baseModels(w http.ResponseWriter, r *http.Request) {
	type item struct {
		ID     string `json:"id"`
		Object string `json:"object"`
	}
	out := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
	}{Object: "list", Data: []item{}}
	for _, m := range s.Chat.List() {
		out.Data = append(out.Data, item{ID: m.Name, Object: "model"})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

type createModelReq struct {
	Entity         string `json:"entity"`
	Project        string `json:"project"`
	Name           string `json:"name"`
	BaseModel      string `json:"base_model"`
	ReturnExisting bool   `json:"return_existing"`
}

func validName(param, v string) error {
	if v == "" {
		return apierror.BadRequest(param, "%s is required", param)
	}
	if len(v) > 128 || strings.ContainsAny(v, "/:\\ \t\n@") {
		return apierror.BadRequest(param, "%s %q must be at most 128 characters without '/', ':', '\\\\', '@' or spaces", param, v)
	}
	return nil
}

func (s *Service) createModel(w http.ResponseWriter, r *http.Request) {
	var req createModelReq
	if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{}); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if req.Entity == "" {
		req.Entity = entityOf(r)
	}
	for _, f := range [][2]string{{"project", req.Project}, {"name", req.Name}, {"base_model", req.BaseModel}} {
		if err := validName(f[0], f[1]); err != nil && f[0] != "base_model" {
			apierror.Write(w, r, err)
			return
		}
	}
	if err := auth.Entity(r.Context(), req.Entity, "entity"); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if _, ok := s.Chat.Get(req.BaseModel); !ok || req.BaseModel == "" {
		var names []string
		for _, m := range s.Chat.List() {
			names = append(names, m.Name)
		}
		apierror.Write(w, r, apierror.BadRequest("base_model", "base_model %q is not a base model this server serves (GET /v1/preview/base-models lists %v)", req.BaseModel, names))
		return
	}
	m, _, err := s.Reg.Create(r.Context(), registry.Model{Entity: req.Entity, Project: req.Project, Name: req.Name, BaseModel: req.BaseModel}, req.ReturnExisting)
	if errors.Is(err, registry.ErrExists) {
		apierror.Write(w, r, apierror.Conflict("name", "A model named %s/%s/%s exists (id %s); send return_existing to get it", req.Entity, req.Project, req.Name, m.ID))
		return
	}
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, m)
}

func (s *Service) listModels(w http.ResponseWriter, r *http.Request) {
	ms, err := s.Reg.List(r.Context(), entityOf(r))
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if ms == nil {
		ms = []registry.Model{}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": ms})
}

// model finds {model} (an id or <entity>/<project>/<name>) of the caller's entity; another
// entity's model is a 404 like a missing one (nothing leaks).
func (s *Service) model(r *http.Request, ref string) (registry.Model, error) {
	m, err := s.Reg.Resolve(r.Context(), ref)
	if errors.Is(err, registry.ErrNotFound) || (err == nil && m.Entity != entityOf(r)) {
		return registry.Model{}, apierror.NotFound("model_id", "Model %s not found", ref)
	}
	return m, err
}

// modelRoutes dispatches /v1/preview/models/{model}[/checkpoints|/log]: the model reference
// may itself contain slashes (<entity>/<project>/<name>).
func (s *Service) modelRoutes(w http.ResponseWriter, r *http.Request) {
	path := r.PathValue("model")
	ref, sub := path, ""
	for _, suffix := range []string{"/checkpoints", "/log"} {
		if strings.HasSuffix(path, suffix) {
			ref, sub = strings.TrimSuffix(path, suffix), suffix[1:]
		}
	}
	m, err := s.model(r, ref)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	switch {
	case r.Method == "GET" && sub == "":
		httpx.WriteJSON(w, http.StatusOK, m)
	case r.Method == "DELETE" && sub == "":
		s.deleteModel(w, r, m)
	case r.Method == "GET" && sub == "checkpoints":
		s.listCheckpoints(w, r, m)
	case r.Method == "DELETE" && sub == "checkpoints":
		s.deleteCheckpoints(w, r, m)
	case r.Method == "POST" && sub == "log":
		s.logTrajectories(w, r, m)
	default:
		apierror.Write(w, r, apierror.New(http.StatusMethodNotAllowed, "MethodNotAllowed", "", fmt.Sprintf("%s is not allowed on this route", r.Method)))
	}
}

func (s *Service) deleteModel(w http.ResponseWriter, r *http.Request, m registry.Model) {
	n, err := s.Reg.Delete(r.Context(), m.ID)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	s.mu.Lock()
	for dir := range s.adapters {
		if strings.Contains(dir, m.ID) {
			delete(s.adapters, dir)
		}
	}
	s.mu.Unlock()
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"model_id": m.ID, "deleted_checkpoints": n, "deleted_run": true})
}

func (s *Service) listCheckpoints(w http.ResponseWriter, r *http.Request, m registry.Model) {
	q := r.URL.Query()
	limit, err := limitParam(q.Get("limit"))
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	order := q.Get("order")
	if order == "" {
		order = "desc"
	}
	if order != "asc" && order != "desc" {
		apierror.Write(w, r, apierror.BadRequest("order", "order must be asc or desc, got %q", order))
		return
	}
	cs, more, err := s.Reg.Checkpoints(r.Context(), m.ID, q.Get("after"), limit, order)
	if errors.Is(err, registry.ErrNotFound) {
		apierror.Write(w, r, apierror.BadRequest("after", "after %q is not a checkpoint of this model", q.Get("after")))
		return
	}
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, page(cs, more, func(c registry.Checkpoint) string { return c.ID }))
}

// page is the cursor page shape {object, data, first_id, last_id, has_more}.
func page[T any](data []T, more bool, id func(T) string) map[string]any {
	out := map[string]any{"object": "list", "data": data, "first_id": nil, "last_id": nil, "has_more": more}
	if len(data) == 0 {
		out["data"] = []T{}
	} else {
		out["first_id"], out["last_id"] = id(data[0]), id(data[len(data)-1])
	}
	return out
}

func (s *Service) deleteCheckpoints(w http.ResponseWriter, r *http.Request, m registry.Model) {
	var req struct {
		Steps []int `json:"steps"`
	}
	if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{}); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if req.Steps == nil {
		apierror.Write(w, r, apierror.BadRequest("steps", "steps is required: a list of checkpoint steps"))
		return
	}
	n, missing, err := s.Reg.DeleteCheckpoints(r.Context(), m.ID, req.Steps)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	s.mu.Lock()
	for _, st := range req.Steps {
		delete(s.adapters, s.Reg.CheckpointDir(m.ID, st))
	}
	s.mu.Unlock()
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"deleted_count": n, "not_found_steps": missing})
}

// uploadFile stores a training data file (the raw body, or the "file" part of a multipart
// form) and answers {id, url, bytes}; url is what training_data_url takes.
func (s *Service) uploadFile(w http.ResponseWriter, r *http.Request) {
	var data []byte
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		f, _, err := r.FormFile("file")
		if err != nil {
			apierror.Write(w, r, apierror.BadRequest("file", "multipart upload needs a part named file: %v", err))
			return
		}
		defer f.Close()
		if data, err = io.ReadAll(f); err != nil {
			apierror.Write(w, r, apierror.BadRequest("file", "could not read the upload: %v", err))
			return
		}
	} else {
		b, err := httpx.ReadBody(r)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		data = b
	}
	if len(bytes.TrimSpace(data)) == 0 {
		apierror.Write(w, r, apierror.BadRequest("file", "the file is empty"))
		return
	}
	id := "file-" + strings.ReplaceAll(uuid.Must(uuid.NewV7()).String(), "-", "")
	dir := filepath.Join(s.FilesDir, entityOf(r))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, id+".jsonl"), data, 0o644); err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "object": "file", "bytes": len(data), "url": "hone-file:///" + id})
}

// ---- Jobs ----

type rlJobReq struct {
	ModelID            string            `json:"model_id"`
	TrajectoryGroups   []json.RawMessage `json:"trajectory_groups"`
	ExperimentalConfig json.RawMessage   `json:"experimental_config"`
}

type sftJobReq struct {
	ModelID            string          `json:"model_id"`
	TrainingDataURL    string          `json:"training_data_url"`
	Config             json.RawMessage `json:"config"`
	ExperimentalConfig json.RawMessage `json:"experimental_config"`
}

func (s *Service) createRLJob(w http.ResponseWriter, r *http.Request) {
	var req rlJobReq
	if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{}); err != nil {
		apierror.Write(w, r, err)
		return
	}
	m, err := s.model(r, req.ModelID)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if len(req.TrajectoryGroups) == 0 {
		apierror.Write(w, r, apierror.BadRequest("trajectory_groups", "trajectory_groups must hold at least one group"))
		return
	}
	plan, err := parseRLConfig(req.ExperimentalConfig)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if st := plan.klRefStep; st != nil && *st > 0 && plan.cfg.KLPenaltyCoef > 0 {
		if _, err := s.Reg.Step(r.Context(), m.ID, *st); errors.Is(err, registry.ErrNotFound) {
			apierror.Write(w, r, apierror.BadRequest("experimental_config.kl_penalty_reference_step", "kl_penalty_reference_step %d is not a checkpoint of this model", *st))
			return
		}
	}
	if _, err := parseGroups(req.TrajectoryGroups); err != nil {
		apierror.Write(w, r, err)
		return
	}
	j, err := s.Queue.Enqueue(r.Context(), m.ID, m.Entity, "rl", req)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"id": j.ID})
}

func (s *Service) createSFTJob(w http.ResponseWriter, r *http.Request) {
	var req sftJobReq
	if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{}); err != nil {
		apierror.Write(w, r, err)
		return
	}
	m, err := s.model(r, req.ModelID)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if _, err := parseSFTConfig(req.Config, req.ExperimentalConfig); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if err := s.checkDataURL(r.Context(), m.Entity, req.TrainingDataURL); err != nil {
		apierror.Write(w, r, err)
		return
	}
	j, err := s.Queue.Enqueue(r.Context(), m.ID, m.Entity, "sft", req)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"id": j.ID})
}

// job finds a job of the caller's entity (another entity's is a 404).
func (s *Service) job(r *http.Request) (jobs.Job, error) {
	j, err := s.Queue.Get(r.Context(), r.PathValue("id"))
	if errors.Is(err, jobs.ErrNotFound) || (err == nil && j.Entity != entityOf(r)) {
		return jobs.Job{}, apierror.NotFound("training_job_id", "Training job %s not found", r.PathValue("id"))
	}
	return j, err
}

func (s *Service) getJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.job(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, j)
}

func (s *Service) listJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o := jobs.ListOptions{Before: q.Get("before"), Status: q.Get("status")}
	var err error
	if o.Limit, err = limitParam(q.Get("limit")); err != nil {
		apierror.Write(w, r, err)
		return
	}
	switch o.Status {
	case "", jobs.Queued, jobs.Running, jobs.Succeeded, jobs.Failed, jobs.Cancelled:
	default:
		apierror.Write(w, r, apierror.BadRequest("status", "status must be QUEUED, RUNNING, SUCCEEDED, FAILED or CANCELLED, got %q", o.Status))
		return
	}
	if ref := q.Get("model_id"); ref != "" {
		m, err := s.model(r, ref)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		o.ModelID = m.ID
	}
	js, more, err := s.Queue.List(r.Context(), entityOf(r), o)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, page(js, more, func(j jobs.Job) string { return j.ID }))
}

// limitParam reads a page size: 1 to 100, 20 when absent.
func limitParam(v string) (int, error) {
	if v == "" {
		return 20, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100 {
		return 0, apierror.BadRequest("limit", "limit must be an integer from 1 to 100, got %q", v)
	}
	return n, nil
}

func (s *Service) cancelJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.job(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if j, err = s.Queue.Cancel(r.Context(), j.ID); err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, j)
}

func terminal(status string) bool {
	return status == jobs.Succeeded || status == jobs.Failed || status == jobs.Cancelled
}

func (s *Service) jobEvents(w http.ResponseWriter, r *http.Request) {
	j, err := s.job(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	q := r.URL.Query()
	limit, err := limitParam(q.Get("limit"))
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	after := q.Get("after")
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		evs, more, err := s.Queue.Events(r.Context(), j.ID, after, limit)
		if errors.Is(err, jobs.ErrNotFound) {
			apierror.Write(w, r, apierror.BadRequest("after", "after %q is not an event of this job", after))
			return
		}
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, page(evs, more, func(e jobs.Event) string { return e.ID }))
		return
	}
	// Follow live: every event as an SSE message until the job ends.
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for {
		wake := s.Queue.Wait(j.ID)
		evs, _, err := s.Queue.Events(r.Context(), j.ID, after, 100)
		if err != nil {
			return
		}
		for _, e := range evs {
			b, _ := json.Marshal(e)
			fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", e.ID, e.Type, b)
			after = e.ID
		}
		if flusher != nil {
			flusher.Flush()
		}
		cur, err := s.Queue.Get(r.Context(), j.ID)
		if err != nil {
			return
		}
		if terminal(cur.Status) && len(evs) == 0 {
			fmt.Fprint(w, "data: [DONE]\n\n")
			if flusher != nil {
				flusher.Flush()
			}
			return
		}
		if len(evs) > 0 {
			continue
		}
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		case <-time.After(time.Second): // events written by workers in other processes
		}
	}
}

// ---- Adapters for chat completions ----

// ResolveAdapter implements chatapi.AdapterResolver: `<entity>/<project>/<name>:step<N>`,
// `:latest` (also without a tag), and `wandb-artifact:///<entity>/<project>/<name>:step<N>`.
// Before the first checkpoint (and for `:step0`) the model is its base model.
// A checkpoint of another entity is not found.
// ListAdapters lists an entity's trained models for GET /v1/models.
func (s *Service) ListAdapters(ctx context.Context, entity string) ([]chatapi.AdapterCard, error) {
	ms, err := s.Reg.List(ctx, entity)
	if err != nil {
		return nil, err
	}
	out := make([]chatapi.AdapterCard, 0, len(ms))
	for _, m := range ms {
		var created int64
		if t, err := db.ParseTime(m.CreatedAt); err == nil {
			created = t.Unix()
		}
		out = append(out, chatapi.AdapterCard{Name: m.Entity + "/" + m.Project + "/" + m.Name, Base: m.BaseModel, Owner: m.Entity, Created: created})
	}
	return out, nil
}

func (s *Service) ResolveAdapter(entity, name string) (string, *model.LoRA, string, bool, error) {
	ref := strings.TrimPrefix(name, "wandb-artifact:///")
	tag := "latest"
	if i := strings.LastIndex(ref, ":"); i >= 0 {
		ref, tag = ref[:i], ref[i+1:]
	}
	parts := strings.Split(ref, "/")
	if len(parts) != 3 || parts[0] != entity {
		return "", nil, "", false, nil
	}
	ctx := context.Background()
	m, err := s.Reg.ByName(ctx, parts[0], parts[1], parts[2])
	if errors.Is(err, registry.ErrNotFound) {
		return "", nil, "", false, nil
	}
	if err != nil {
		return "", nil, "", false, err
	}
	var c registry.Checkpoint
	switch {
	case tag == "step0":
		// Step 0 is the base model itself (what ART samples from before any training).
		return m.BaseModel, nil, ref + ":step0", true, nil
	case tag == "latest":
		c, err = s.Reg.Latest(ctx, m.ID)
		if errors.Is(err, registry.ErrNotFound) {
			return m.BaseModel, nil, ref + ":step0", true, nil
		}
	case strings.HasPrefix(tag, "step"):
		n, perr := strconv.Atoi(strings.TrimPrefix(tag, "step"))
		if perr != nil {
			return "", nil, "", false, nil
		}
		c, err = s.Reg.Step(ctx, m.ID, n)
	default:
		return "", nil, "", false, nil
	}
	if errors.Is(err, registry.ErrNotFound) {
		return "", nil, "", false, nil
	}
	if err != nil {
		return "", nil, "", false, err
	}
	base, ok := s.Chat.Get(m.BaseModel)
	if !ok {
		return "", nil, "", false, fmt.Errorf("the base model %s of %s is not served", m.BaseModel, ref)
	}
	a, err := s.loadAdapter(s.Reg.CheckpointDir(m.ID, c.Step), &base.Model.Config)
	if err != nil {
		return "", nil, "", false, err
	}
	return m.BaseModel, a, fmt.Sprintf("%s:step%d", ref, c.Step), true, nil
}

func (s *Service) loadAdapter(dir string, cfg *model.Config) (*model.LoRA, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.adapters == nil {
		s.adapters = map[string]*model.LoRA{}
	}
	if a, ok := s.adapters[dir]; ok {
		return a, nil
	}
	a, err := model.LoadLoRA(dir, cfg)
	if err != nil {
		return nil, err
	}
	if len(s.adapters) > 64 { // bounded: drop an arbitrary half
		keys := make([]string, 0, len(s.adapters))
		for k := range s.adapters {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys[:len(keys)/2] {
			delete(s.adapters, k)
		}
	}
	s.adapters[dir] = a
	return a, nil
}

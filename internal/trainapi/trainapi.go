// Package trainapi serves the training API of the seed under /v1/preview with the payloads of
// W&B Training / OpenPipe ART — models, checkpoints, trajectory logs, RL and SFT training jobs
// with their events, data files — over internal/training: it decodes requests, pages lists
// and maps the service's faults to the error envelope; the service validates, queues and
// runs the jobs.
package trainapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/evaluation"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/loop"
	"github.com/honeai/hone/internal/openapi"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/training"
)

// API serves the training routes over the training service.
type API struct {
	Svc *training.Service
	// Evals, when set, serves the evaluation jobs (evaluation.go).
	Evals *evaluation.Service
	// Loop, when set, serves aliases and promotion rules (aliases.go).
	Loop *loop.Service
}

// Register adds the routes behind bearer authentication.
func (a *API) Register(r *httpx.Router, bearer httpx.Middleware) {
	g := r.Group(bearer, httpx.CheckParams()).Secured(openapi.BearerAuth)
	tag := []string{"training"}
	g.HandleFunc("GET /v1/preview/base-models", a.baseModels, &openapi.Operation{Summary: "List the base models that can be fine-tuned", Tags: tag})
	g.HandleFunc("POST /v1/preview/models", a.createModel, &openapi.Operation{Summary: "Create a trainable model", Tags: tag, Request: createModelReq{}, Response: registry.Model{}})
	g.HandleFunc("GET /v1/preview/models", a.listModels, &openapi.Operation{Summary: "List the entity's trainable models", Tags: tag})
	g.HandleFunc("GET /v1/preview/models/{model...}", a.modelRoutes, &openapi.Operation{Summary: "Get a model, or list its checkpoints (…/checkpoints)", Tags: tag})
	g.HandleFunc("DELETE /v1/preview/models/{model...}", a.modelRoutes, &openapi.Operation{Summary: "Delete a model, or some of its checkpoints (…/checkpoints)", Tags: tag})
	g.HandleFunc("POST /v1/preview/models/{model...}", a.modelRoutes, &openapi.Operation{Summary: "Log trajectories and their metrics (…/log); roll an alias back (…/aliases/{alias}/rollback)", Tags: tag})
	g.HandleFunc("PUT /v1/preview/models/{model...}", a.modelRoutes, &openapi.Operation{Summary: "Move an alias to a checkpoint (…/aliases/{alias}), set its promotion rule (…/aliases/{alias}/rule)", Tags: tag})
	g.HandleFunc("POST /v1/preview/training-jobs", a.createRLJob, &openapi.Operation{Summary: "Create an RL training job (one step)", Tags: tag, Request: training.RLRequest{}})
	g.HandleFunc("POST /v1/preview/sft-training-jobs", a.createSFTJob, &openapi.Operation{Summary: "Create an SFT training job", Tags: tag, Request: training.SFTRequest{}})
	g.HandleFunc("GET /v1/preview/training-jobs", a.listJobs, &openapi.Operation{Summary: "List the entity's training jobs, newest first (model_id, status, before, limit)", Tags: tag})
	g.HandleFunc("GET /v1/preview/training-jobs/{id}", a.getJob, &openapi.Operation{Summary: "Get a training job", Tags: tag, Response: jobs.Job{}})
	g.HandleFunc("GET /v1/preview/training-jobs/{id}/events", a.jobEvents, &openapi.Operation{Summary: "List a training job's events (text/event-stream follows it live)", Tags: tag})
	g.HandleFunc("POST /v1/preview/training-jobs/{id}/cancel", a.cancelJob, &openapi.Operation{Summary: "Cancel a training job", Tags: tag, Response: jobs.Job{}})
	g.HandleFunc("POST /v1/preview/datasets/from-calls", a.datasetFromCalls, &openapi.Operation{Summary: "Build a Weave Dataset of SFT examples or RL trajectory groups from traced chat completions (op, feedback and query filters); its dataset_ref is a training_data_url", Tags: tag, Request: training.FromCallsRequest{}, Response: training.FromCallsResult{}})
	g.HandleFunc("POST /v1/preview/files", a.uploadFile, &openapi.Operation{Summary: "Upload a training data file (JSONL body); use its url as training_data_url", Tags: tag})
	a.registerEvaluations(g) // evaluation.go
}

func entityOf(r *http.Request) string {
	if p, ok := auth.FromContext(r.Context()); ok {
		return p.Entity
	}
	return ""
}

// List is the envelope of the training API's unpaged lists.
type List[T any] struct {
	Object string `json:"object"`
	Data   []T    `json:"data"`
}

// BaseModel is a base model that can be fine-tuned (GET /v1/preview/base-models).
type BaseModel struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	// ChatTemplateFrom says where the chat template that training renders data with
	// comes from (the model's files, --chat-template, a built-in one); "" for none.
	ChatTemplateFrom string `json:"chat_template_from"`
}

func (a *API) baseModels(w http.ResponseWriter, r *http.Request) {
	out := List[BaseModel]{Object: "list", Data: []BaseModel{}}
	for _, m := range a.Svc.Models.List() {
		from := m.TemplateFrom
		if m.Template == nil {
			from = ""
		} else if from == "" {
			from = "the model's files"
		}
		out.Data = append(out.Data, BaseModel{ID: m.Name, Object: "model", ChatTemplateFrom: from})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// CreateModelRequest is the body of POST /v1/preview/models (its schema keeps the name
// createModelReq in the OpenAPI document).
type CreateModelRequest = createModelReq

type createModelReq struct {
	Entity         string `json:"entity"`
	Project        string `json:"project"`
	Name           string `json:"name"`
	BaseModel      string `json:"base_model"`
	ReturnExisting bool   `json:"return_existing"`
}

func (a *API) createModel(w http.ResponseWriter, r *http.Request) {
	var req createModelReq
	if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{Text: true}); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if req.Entity == "" {
		req.Entity = entityOf(r)
	}
	n := training.NewModel{Entity: req.Entity, Project: req.Project, Name: req.Name, BaseModel: req.BaseModel, ReturnExisting: req.ReturnExisting}
	if err := n.Validate(); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if err := auth.Entity(r.Context(), req.Entity, "entity"); err != nil {
		apierror.Write(w, r, err)
		return
	}
	m, err := a.Svc.CreateModel(r.Context(), n)
	httpx.Reply(w, r, m, err)
}

func (a *API) listModels(w http.ResponseWriter, r *http.Request) {
	ms, err := a.Svc.Reg.List(r.Context(), entityOf(r))
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if ms == nil {
		ms = []registry.Model{}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": ms})
}

// modelRoutes dispatches /v1/preview/models/{model}[/checkpoints|/log]: the model reference
// may itself contain slashes (<entity>/<project>/<name>).
func (a *API) modelRoutes(w http.ResponseWriter, r *http.Request) {
	path := r.PathValue("model")
	if a.loopRoutes(w, r, path) { // aliases.go
		return
	}
	ref, sub := path, ""
	for _, suffix := range []string{"/checkpoints", "/log", "/evaluations"} {
		if strings.HasSuffix(path, suffix) {
			ref, sub = strings.TrimSuffix(path, suffix), suffix[1:]
		}
	}
	m, err := a.Svc.Model(r.Context(), entityOf(r), ref)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	switch {
	case r.Method == "GET" && sub == "":
		httpx.WriteJSON(w, http.StatusOK, m)
	case r.Method == "DELETE" && sub == "":
		n, err := a.Svc.DeleteModel(r.Context(), m)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		if err := a.modelDeleted(r.Context(), m.ID); err != nil { // evaluation.go
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"model_id": m.ID, "deleted_checkpoints": n, "deleted_run": true})
	case r.Method == "GET" && sub == "checkpoints":
		a.listCheckpoints(w, r, m)
	case r.Method == "GET" && sub == "evaluations":
		a.modelEvaluations(w, r, m) // evaluation.go
	case r.Method == "DELETE" && sub == "checkpoints":
		var req struct {
			Steps []int `json:"steps"`
			// Hone's pruning, ART's delete_checkpoints on the server: keep the latest and
			// the keep_best best by best_checkpoint_metric.
			Metric   *string `json:"best_checkpoint_metric"`
			KeepBest *int    `json:"keep_best"`
		}
		if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{Text: true}); err != nil {
			apierror.Write(w, r, err)
			return
		}
		if req.Metric != nil || req.KeepBest != nil {
			if req.Steps != nil {
				apierror.Write(w, r, apierror.BadRequest("steps", "send steps, or best_checkpoint_metric/keep_best to prune, not both"))
				return
			}
			metric := ""
			if req.Metric != nil {
				metric = *req.Metric
			}
			res, err := a.Svc.PruneCheckpoints(r.Context(), m, metric, req.KeepBest)
			if err != nil {
				apierror.Write(w, r, err)
				return
			}
			httpx.WriteJSON(w, http.StatusOK, PruneResult{DeletedCount: len(res.Deleted), NotFoundSteps: []int{},
				DeletedSteps: res.Deleted, KeptSteps: res.Kept, BestSteps: res.Best})
			return
		}
		n, missing, err := a.Svc.DeleteCheckpoints(r.Context(), m, req.Steps)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"deleted_count": n, "not_found_steps": missing})
	case r.Method == "POST" && sub == "log":
		var req struct {
			Split            string            `json:"split"`
			TrajectoryGroups []json.RawMessage `json:"trajectory_groups"`
		}
		if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{Text: true}); err != nil {
			apierror.Write(w, r, err)
			return
		}
		if err := a.Svc.LogTrajectories(r.Context(), m, req.Split, req.TrajectoryGroups); err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{})
	default:
		apierror.Write(w, r, apierror.New(http.StatusMethodNotAllowed, "MethodNotAllowed", "", fmt.Sprintf("%s is not allowed on this route", r.Method)))
	}
}

func (a *API) listCheckpoints(w http.ResponseWriter, r *http.Request, m registry.Model) {
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
	cs, more, err := a.Svc.Reg.Checkpoints(r.Context(), m.ID, q.Get("after"), limit, order)
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

// PruneResult answers DELETE /v1/preview/models/{model}/checkpoints with
// best_checkpoint_metric or keep_best: the steps deleted and kept, the best among them.
type PruneResult struct {
	BestSteps     []int `json:"best_steps"`
	DeletedCount  int   `json:"deleted_count"`
	DeletedSteps  []int `json:"deleted_steps"`
	KeptSteps     []int `json:"kept_steps"`
	NotFoundSteps []int `json:"not_found_steps"`
}

// Page is the list envelope of ART's paged routes (its fields in the order of their names,
// as the envelope was first written as a map).
type Page[T any] struct {
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	HasMore bool    `json:"has_more"`
	LastID  *string `json:"last_id"`
	Object  string  `json:"object"`
}

// page is the page of data (more: whether more follow), its items named by id.
func page[T any](data []T, more bool, id func(T) string) Page[T] {
	out := Page[T]{Object: "list", Data: data, HasMore: more}
	if len(data) == 0 {
		out.Data = []T{}
	} else {
		first, last := id(data[0]), id(data[len(data)-1])
		out.FirstID, out.LastID = &first, &last
	}
	return out
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

// datasetFromCalls builds a Weave Dataset from the traced chat completions of a project of
// the caller's entity.
func (a *API) datasetFromCalls(w http.ResponseWriter, r *http.Request) {
	var req training.FromCallsRequest
	if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{Strict: true, Text: true}); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if strings.Contains(req.Project, "/") {
		// "entity/project", the form every trace route takes.
		entity, project, err := auth.Project(r.Context(), req.Project, "project")
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		if req.Entity != "" && req.Entity != entity {
			apierror.Write(w, r, apierror.BadRequest("entity", "entity %q and project %q name different entities: give the project as ENTITY/PROJECT, or the entity apart", req.Entity, req.Project))
			return
		}
		req.Entity, req.Project = entity, project
	}
	if req.Entity == "" {
		req.Entity = entityOf(r)
	}
	if err := auth.Entity(r.Context(), req.Entity, "entity"); err != nil {
		apierror.Write(w, r, err)
		return
	}
	res, err := a.Svc.DatasetFromCalls(r.Context(), req)
	httpx.Reply(w, r, res, err)
}

// uploadFile stores a training data file (the raw body, or the "file" part of a multipart
// form) and answers {id, url, bytes}; url is what training_data_url takes.
func (a *API) uploadFile(w http.ResponseWriter, r *http.Request) {
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
	up, err := a.Svc.SaveUploadContext(r.Context(), entityOf(r), data)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, File{Bytes: up.Bytes, ID: up.ID, Object: "file", URL: up.URL})
}

// File is an uploaded training data file (POST /v1/preview/files): URL is what
// training_data_url takes.
type File struct {
	Bytes  int    `json:"bytes"`
	ID     string `json:"id"`
	Object string `json:"object"`
	URL    string `json:"url"`
}

// JobCreated answers the creation of a training job.
type JobCreated struct {
	ID string `json:"id"`
}

// ---- Jobs ----

func (a *API) createRLJob(w http.ResponseWriter, r *http.Request) {
	var req training.RLRequest
	if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{Text: true}); err != nil {
		apierror.Write(w, r, err)
		return
	}
	m, err := a.Svc.Model(r.Context(), entityOf(r), req.ModelID)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	j, err := a.Svc.CreateRLJob(r.Context(), m, req)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, JobCreated{ID: j.ID})
}

func (a *API) createSFTJob(w http.ResponseWriter, r *http.Request) {
	var req training.SFTRequest
	if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{Text: true}); err != nil {
		apierror.Write(w, r, err)
		return
	}
	m, err := a.Svc.Model(r.Context(), entityOf(r), req.ModelID)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	j, err := a.Svc.CreateSFTJob(r.Context(), m, req)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, JobCreated{ID: j.ID})
}

func (a *API) getJob(w http.ResponseWriter, r *http.Request) {
	j, err := a.Svc.Job(r.Context(), entityOf(r), r.PathValue("id"))
	httpx.Reply(w, r, j, err)
}

func (a *API) listJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := limitParam(q.Get("limit"))
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	js, more, err := a.Svc.ListJobs(r.Context(), entityOf(r), training.JobFilter{Model: q.Get("model_id"), Status: q.Get("status"), Before: q.Get("before"), Limit: limit})
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, page(js, more, func(j jobs.Job) string { return j.ID }))
}

func (a *API) cancelJob(w http.ResponseWriter, r *http.Request) {
	j, err := a.Svc.CancelJob(r.Context(), entityOf(r), r.PathValue("id"))
	httpx.Reply(w, r, j, err)
}

func terminal(status string) bool {
	return status == jobs.Succeeded || status == jobs.Failed || status == jobs.Cancelled
}

func (a *API) jobEvents(w http.ResponseWriter, r *http.Request) {
	j, err := a.Svc.Job(r.Context(), entityOf(r), r.PathValue("id"))
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
		evs, more, err := a.Svc.JobEvents(r.Context(), j, after, limit)
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
	queue := a.Svc.Queue
	for {
		wake := queue.Wait(j.ID)
		// The status is read before the events: a final status and its final event are
		// written in one transaction, so when the status read is final, the events read
		// after it include the last one (read the other way round, a job that ended in
		// between would end the stream without its final event).
		cur, err := queue.Get(r.Context(), j.ID)
		if err != nil {
			return
		}
		evs, _, err := queue.Events(r.Context(), j.ID, after, 100)
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

package trainapi

import (
	"context"
	"net/http"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/evaluation"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/openapi"
	"github.com/honeai/hone/internal/registry"
)

// Evaluation jobs (internal/evaluation): a model or checkpoint evaluated with Hone's scorers
// on the job queue, stored as a Weave Evaluation.

func (a *API) registerEvaluations(g *httpx.Group) {
	if a.Evals == nil {
		return
	}
	tag := []string{"training"}
	g.HandleFunc("POST /v1/preview/evaluation-jobs", a.createEvaluation, &openapi.Operation{Summary: "Evaluate a model or checkpoint with Hone's scorers on the job queue; the results are a Weave Evaluation",
		Tags: tag, Request: evaluation.CreateRequest{}, Response: evaluation.JobView{}})
	g.HandleFunc("GET /v1/preview/evaluation-jobs", a.listEvaluations, &openapi.Operation{Summary: "List the entity's evaluation jobs, newest first (model_id, status, before, limit)", Tags: tag})
	g.HandleFunc("GET /v1/preview/evaluation-jobs/{id}", a.getEvaluation, &openapi.Operation{Summary: "Get an evaluation job with its runs' summaries", Tags: tag, Response: evaluation.JobView{}})
	g.HandleFunc("GET /v1/preview/evaluation-jobs/{id}/events", a.evaluationEvents, &openapi.Operation{Summary: "List an evaluation job's events (text/event-stream follows it live)", Tags: tag})
	g.HandleFunc("POST /v1/preview/evaluation-jobs/{id}/cancel", a.cancelEvaluation, &openapi.Operation{Summary: "Cancel an evaluation job", Tags: tag, Response: evaluation.JobView{}})
}

func (a *API) createEvaluation(w http.ResponseWriter, r *http.Request) {
	body, err := httpx.ReadBody(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	var probe any
	if err := httpx.Unmarshal(body, &probe, httpx.DecodeOptions{Text: true}); err != nil {
		apierror.Write(w, r, err)
		return
	}
	j, _, err := a.Evals.Create(r.Context(), entityOf(r), body)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	v, err := a.Evals.View(r.Context(), j)
	httpx.Reply(w, r, v, err)
}

func (a *API) listEvaluations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := limitParam(q.Get("limit"))
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	o := jobs.ListOptions{Status: q.Get("status"), Before: q.Get("before"), Limit: limit, Kinds: []string{evaluation.Kind}}
	switch o.Status {
	case "", jobs.Queued, jobs.Running, jobs.Succeeded, jobs.Failed, jobs.Cancelled:
	default:
		apierror.Write(w, r, apierror.BadRequest("status", "status must be QUEUED, RUNNING, SUCCEEDED, FAILED or CANCELLED, got %q", o.Status))
		return
	}
	if ref := q.Get("model_id"); ref != "" {
		m, err := a.Svc.Model(r.Context(), entityOf(r), ref)
		if err != nil {
			// A base model's evaluations are listed by its name.
			if _, ok := a.Svc.Models.Get(ref); !ok {
				apierror.Write(w, r, err)
				return
			}
			m = registry.Model{ID: "base:" + ref}
		}
		o.ModelID = m.ID
	}
	js, more, err := a.Svc.Queue.List(r.Context(), entityOf(r), o)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	views := make([]evaluation.JobView, 0, len(js))
	for _, j := range js {
		v, err := a.Evals.View(r.Context(), j)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		views = append(views, v)
	}
	httpx.WriteJSON(w, http.StatusOK, page(views, more, func(v evaluation.JobView) string { return v.ID }))
}

func (a *API) getEvaluation(w http.ResponseWriter, r *http.Request) {
	j, err := a.Evals.Job(r.Context(), entityOf(r), r.PathValue("id"))
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	v, err := a.Evals.View(r.Context(), j)
	httpx.Reply(w, r, v, err)
}

func (a *API) evaluationEvents(w http.ResponseWriter, r *http.Request) {
	if _, err := a.Evals.Job(r.Context(), entityOf(r), r.PathValue("id")); err != nil {
		apierror.Write(w, r, err)
		return
	}
	a.jobEvents(w, r)
}

func (a *API) cancelEvaluation(w http.ResponseWriter, r *http.Request) {
	j, err := a.Evals.Job(r.Context(), entityOf(r), r.PathValue("id"))
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if j, err = a.Svc.Queue.Cancel(r.Context(), j.ID); err != nil {
		apierror.Write(w, r, err)
		return
	}
	v, err := a.Evals.View(r.Context(), j)
	httpx.Reply(w, r, v, err)
}

// modelEvaluations answers GET /v1/preview/models/{model}/evaluations: the finished
// evaluation runs of the model's checkpoints, newest first.
func (a *API) modelEvaluations(w http.ResponseWriter, r *http.Request, m registry.Model) {
	if a.Evals == nil {
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{}})
		return
	}
	limit, err := limitParam(r.URL.Query().Get("limit"))
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	runs, err := a.Evals.ModelRuns(r.Context(), m.ID, limit)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": runs})
}

// modelDeleted forgets a deleted model's evaluation runs, policy and policy runs.
func (a *API) modelDeleted(ctx context.Context, modelID string) error {
	if a.Evals != nil {
		if err := a.Evals.ModelDeleted(ctx, modelID); err != nil {
			return err
		}
	}
	if a.Loop != nil {
		return a.Loop.ModelDeleted(ctx, modelID)
	}
	return nil
}

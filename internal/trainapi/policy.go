package trainapi

import (
	"net/http"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/loop"
	"github.com/honeai/hone/internal/registry"
)

// A model's training policy (internal/loop):
//
//	GET    /v1/preview/models/{model}/policy
//	PUT    /v1/preview/models/{model}/policy          {project, alias, kind, feedback, ..., every_calls, interval, config, paused}
//	DELETE /v1/preview/models/{model}/policy
//	POST   /v1/preview/models/{model}/policy/pause
//	POST   /v1/preview/models/{model}/policy/resume
//	POST   /v1/preview/models/{model}/policy/run      {reason}
//	GET    /v1/preview/models/{model}/policy/runs

func (a *API) policyRoutes(w http.ResponseWriter, r *http.Request, m registry.Model, rest []string) {
	ctx := r.Context()
	answer := func(v loop.PolicyView, err error) {
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, v)
	}
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		answer(a.Loop.Policy(ctx, m))
	case len(rest) == 0 && r.Method == http.MethodPut:
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
		answer(a.Loop.SetPolicy(ctx, m, body, actor(r)))
	case len(rest) == 0 && r.Method == http.MethodDelete:
		if err := a.Loop.DeletePolicy(ctx, m); err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"model": m.Entity + "/" + m.Project + "/" + m.Name, "deleted": true})
	case len(rest) == 1 && (rest[0] == "pause" || rest[0] == "resume") && r.Method == http.MethodPost:
		answer(a.Loop.PausePolicy(ctx, m, rest[0] == "pause", actor(r)))
	case len(rest) == 1 && rest[0] == "run" && r.Method == http.MethodPost:
		var req struct {
			Reason string `json:"reason"`
		}
		if r.ContentLength != 0 {
			if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{Strict: true, Text: true}); err != nil {
				apierror.Write(w, r, err)
				return
			}
		}
		j, err := a.Loop.RunNow(ctx, m, actor(r), req.Reason)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, j)
	case len(rest) == 1 && rest[0] == "runs" && r.Method == http.MethodGet:
		q := r.URL.Query()
		limit, err := limitParam(q.Get("limit"))
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		runs, more, err := a.Loop.Runs(ctx, m, q.Get("before"), limit)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		// The policy itself (null when the model has none), so that a page shows both at once.
		out := struct {
			Page[loop.RunView]
			Policy any `json:"policy"`
		}{Page: page(runs, more, func(v loop.RunView) string { return v.JobID })}
		if v, err := a.Loop.Policy(ctx, m); err == nil {
			out.Policy = v
		} else if !fault.Is(err, fault.KindNotFound) {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, out)
	case len(rest) <= 1:
		notAllowed(w, r)
	default:
		apierror.Write(w, r, apierror.NotFound("", "Unknown route %s", r.URL.Path))
	}
}

package trainapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/registry"
)

// Aliases of a model's checkpoints and their promotion rules (internal/loop):
//
//	GET    /v1/preview/models/{model}/aliases
//	GET    /v1/preview/models/{model}/alias-events            (every alias's history)
//	GET    /v1/preview/models/{model}/aliases/{alias}
//	PUT    /v1/preview/models/{model}/aliases/{alias}          {step, reason}
//	DELETE /v1/preview/models/{model}/aliases/{alias}          {reason}
//	GET    /v1/preview/models/{model}/aliases/{alias}/history
//	POST   /v1/preview/models/{model}/aliases/{alias}/rollback {reason}
//	PUT    /v1/preview/models/{model}/aliases/{alias}/rule     {evaluation, metric, margin, higher_is_better, reason}
//	DELETE /v1/preview/models/{model}/aliases/{alias}/rule     {reason}
//
// {model} is an id or <entity>/<project>/<name>, so the path is split here.

// splitLoopPath finds a model's loop sub-route (aliases, alias-events, policy) in the path of
// /v1/preview/models/{model...}: the model reference, the sub-route's name and the segments
// after it.
func splitLoopPath(path string) (ref, sub string, rest []string, ok bool) {
	segs := strings.Split(path, "/")
	for _, n := range []int{3, 1} { // <entity>/<project>/<name>/..., or <id>/...
		if n == 1 && uuid.Validate(segs[0]) != nil {
			continue // "local/aliases/agent" is a model of a project named aliases
		}
		if len(segs) > n {
			switch segs[n] {
			case "aliases", "alias-events", "policy":
				return strings.Join(segs[:n], "/"), segs[n], segs[n+1:], true
			}
		}
	}
	return "", "", nil, false
}

// actor names who made a change: the API key.
func actor(r *http.Request) string {
	if p, ok := auth.FromContext(r.Context()); ok {
		return "key " + p.KeyID
	}
	return "unknown"
}

// loopRoutes serves the loop's sub-routes of a model; false when the path has none.
func (a *API) loopRoutes(w http.ResponseWriter, r *http.Request, path string) bool {
	ref, sub, rest, ok := splitLoopPath(path)
	if !ok || a.Loop == nil {
		return false
	}
	m, err := a.Svc.Model(r.Context(), entityOf(r), ref)
	if err != nil {
		apierror.Write(w, r, err)
		return true
	}
	switch sub {
	case "alias-events":
		if r.Method != http.MethodGet || len(rest) > 0 {
			notAllowed(w, r)
			return true
		}
		a.aliasHistory(w, r, m, "")
	case "aliases":
		a.aliasRoutes(w, r, m, rest)
	case "policy":
		a.policyRoutes(w, r, m, rest) // policy.go
	}
	return true
}

func notAllowed(w http.ResponseWriter, r *http.Request) {
	apierror.Write(w, r, apierror.New(http.StatusMethodNotAllowed, "MethodNotAllowed", "", r.Method+" is not allowed on this route"))
}

func (a *API) aliasRoutes(w http.ResponseWriter, r *http.Request, m registry.Model, rest []string) {
	ctx := r.Context()
	if len(rest) == 0 {
		if r.Method != http.MethodGet {
			notAllowed(w, r)
			return
		}
		as, err := a.Loop.Aliases(ctx, m)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": as})
		return
	}
	name := rest[0]
	var reasonBody struct {
		Reason string `json:"reason"`
	}
	readReason := func() bool {
		if r.ContentLength == 0 {
			return true
		}
		if err := httpx.DecodeJSON(r, &reasonBody, httpx.DecodeOptions{Strict: true, Text: true}); err != nil {
			apierror.Write(w, r, err)
			return false
		}
		return true
	}
	switch {
	case len(rest) == 1 && r.Method == http.MethodGet:
		v, err := a.Loop.Alias(ctx, m, name)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, v)
	case len(rest) == 1 && r.Method == http.MethodPut:
		var req struct {
			Step   *int   `json:"step"`
			Reason string `json:"reason"`
		}
		if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{Strict: true, Text: true}); err != nil {
			apierror.Write(w, r, err)
			return
		}
		if req.Step == nil {
			apierror.Write(w, r, apierror.BadRequest("step", "step is required: the checkpoint step the alias names (0: the base model)"))
			return
		}
		v, err := a.Loop.MoveAlias(ctx, m, name, *req.Step, actor(r), req.Reason)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, v)
	case len(rest) == 1 && r.Method == http.MethodDelete:
		if !readReason() {
			return
		}
		if err := a.Loop.DeleteAlias(ctx, m, name, actor(r), reasonBody.Reason); err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"alias": name, "deleted": true})
	case len(rest) == 2 && rest[1] == "history" && r.Method == http.MethodGet:
		if _, err := a.Loop.Alias(ctx, m, name); err != nil {
			// The history of a deleted alias is still there: only an alias never seen is unknown.
			if evs, _, herr := a.Loop.History(ctx, m, name, "", 1); herr != nil || len(evs) == 0 {
				apierror.Write(w, r, err)
				return
			}
		}
		a.aliasHistory(w, r, m, name)
	case len(rest) == 2 && rest[1] == "rollback" && r.Method == http.MethodPost:
		if !readReason() {
			return
		}
		v, err := a.Loop.Rollback(ctx, m, name, actor(r), reasonBody.Reason)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, v)
	case len(rest) == 2 && rest[1] == "rule" && r.Method == http.MethodPut:
		body, err := httpx.ReadBody(r)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		var fields map[string]json.RawMessage
		if err := httpx.Unmarshal(body, &fields, httpx.DecodeOptions{Text: true}); err != nil {
			apierror.Write(w, r, err)
			return
		}
		reason := ""
		if raw, ok := fields["reason"]; ok {
			if json.Unmarshal(raw, &reason) != nil {
				apierror.Write(w, r, apierror.BadRequest("reason", "reason must be a string"))
				return
			}
			delete(fields, "reason")
		}
		rule, _ := json.Marshal(fields)
		v, err := a.Loop.SetRule(ctx, m, name, rule, actor(r), reason)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, v)
	case len(rest) == 2 && rest[1] == "rule" && r.Method == http.MethodDelete:
		if !readReason() {
			return
		}
		v, err := a.Loop.SetRule(ctx, m, name, nil, actor(r), reasonBody.Reason)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, v)
	case len(rest) <= 2:
		notAllowed(w, r)
	default:
		apierror.Write(w, r, apierror.NotFound("", "Unknown route %s", r.URL.Path))
	}
}

func (a *API) aliasHistory(w http.ResponseWriter, r *http.Request, m registry.Model, name string) {
	q := r.URL.Query()
	limit, err := limitParam(q.Get("limit"))
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	evs, more, err := a.Loop.History(r.Context(), m, name, q.Get("before"), limit)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, page(evs, more, func(e registry.AliasEvent) string { return e.ID }))
}

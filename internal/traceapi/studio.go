package traceapi

import (
	"net/http"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/trace"
)

// registerStudio adds the routes Hone adds for Hone Studio beside GET /projects:
// GET /projects/stats, each of the key's entity's projects with its counts of calls, traces
// and objects and its last activity.
func (a *API) registerStudio(g *httpx.Group) {
	g.HandleFunc("GET /projects/stats", func(w http.ResponseWriter, r *http.Request) {
		res, err := a.svc.ProjectsStats(r.Context(), user(r.Context()))
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, res)
	}, op("List the key's entity's projects with their counts of calls, traces and objects and their last activity (Hone addition)", nil, trace.ProjectsStatsRes{}))
}

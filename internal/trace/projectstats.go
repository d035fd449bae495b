package trace

import (
	"context"
	"time"
)

// ProjectStats is one project's counts and last activity (GET /projects/stats, a Hone
// addition for Hone Studio's projects page).
type ProjectStats struct {
	ProjectID string `json:"project_id"`
	// Calls counts every call, Traces the root calls (one per trace).
	Calls  int `json:"calls"`
	Traces int `json:"traces"`
	// Objects counts the objects (latest versions: one per name), ops among them.
	Objects      int     `json:"objects"`
	LastCallAt   *string `json:"last_call_at"`
	LastObjectAt *string `json:"last_object_at"`
	// LastActivityAt is the later of the two.
	LastActivityAt *string `json:"last_activity_at"`
}

// ProjectsStatsRes answers GET /projects/stats: the key's entity's projects that hold calls or
// objects, in the order of GET /projects, each with its stats.
type ProjectsStatsRes struct {
	Projects []ProjectStats `json:"projects"`
}

// ProjectsStats counts the calls, traces and objects of each project of entity and finds its
// last call and object. Each count is the store's (the same as /calls/query_stats and
// /objs/query answer), read through the service's own queries.
func (s *Service) ProjectsStats(ctx context.Context, entity string) (ProjectsStatsRes, error) {
	names, err := s.store.ListProjects(ctx, entity)
	if err != nil {
		return ProjectsStatsRes{}, err
	}
	out := ProjectsStatsRes{Projects: make([]ProjectStats, 0, len(names))}
	yes, one := true, 1
	for _, p := range names {
		st := ProjectStats{ProjectID: p}
		all, err := s.CallsQueryStats(ctx, CallsQueryStatsReq{ProjectID: p})
		if err != nil {
			return ProjectsStatsRes{}, err
		}
		st.Calls = all.Count
		roots, err := s.CallsQueryStats(ctx, CallsQueryStatsReq{ProjectID: p, Filter: &CallsFilter{TraceRootsOnly: &yes}})
		if err != nil {
			return ProjectsStatsRes{}, err
		}
		st.Traces = roots.Count
		if st.Calls > 0 {
			err := s.CallsQuery(ctx, CallsQueryReq{ProjectID: p, Limit: &one, Columns: []string{"id", "started_at"},
				SortBy: []SortBy{{Field: "started_at", Direction: "desc"}}}, func(c CallSchema) error {
				st.LastCallAt = c.StartedAt
				return nil
			})
			if err != nil {
				return ProjectsStatsRes{}, err
			}
		}
		objs, err := s.ObjsQuery(ctx, ObjQueryReq{ProjectID: p, Filter: &ObjectVersionFilter{LatestOnly: &yes}, MetadataOnly: &yes,
			SortBy: []SortBy{{Field: "created_at", Direction: "desc"}}})
		if err != nil {
			return ProjectsStatsRes{}, err
		}
		st.Objects = len(objs.Objs)
		if len(objs.Objs) > 0 {
			t := objs.Objs[0].CreatedAt
			st.LastObjectAt = &t
		}
		st.LastActivityAt = later(st.LastCallAt, st.LastObjectAt)
		out.Projects = append(out.Projects, st)
	}
	return out, nil
}

// later is the later of two times (either may be nil or not a time the store writes).
func later(a, b *string) *string {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	ta, ea := time.Parse(time.RFC3339Nano, *a)
	tb, eb := time.Parse(time.RFC3339Nano, *b)
	if ea != nil || eb != nil {
		if *a >= *b {
			return a
		}
		return b
	}
	if ta.After(tb) {
		return a
	}
	return b
}

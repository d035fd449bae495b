// Package loop closes the improvement loop on Hone's own parts: named aliases on a model's
// checkpoints (local/p/agent:prod) that chat resolves like :latest, moved by hand or by a
// promotion rule (move only when the candidate's evaluation beats the current checkpoint's
// on a metric by a margin), every move and every decision recorded with who and why; and a
// model's training policy (policy.go): from a trace project, every N new calls with feedback
// or every interval, build the dataset (datasets/from-calls), train from the alias's
// checkpoint, evaluate, and promote by the rule, each run an ordinary job with its events.
//
// The aliases themselves are kept by internal/registry; evaluations are internal/evaluation's
// (this package is its Promoter). Errors for a caller's mistake are faults (internal/fault).
//
//	lp := &loop.Service{Reg: reg, Evals: evals, Training: tr, Trace: tc, Queue: q}
//	evals.Promoter = lp
//	a, err := lp.MoveAlias(ctx, m, "prod", 3, "key 1234", "the new prompt format")
package loop

import (
	"log/slog"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/evaluation"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/trace"
	"github.com/honeai/hone/internal/training"
)

// Service holds the loop's parts. Reg, Evals and Queue are required for aliases and
// promotions; DB, Training and Trace for policies.
type Service struct {
	DB       *db.DB
	Reg      *registry.Registry
	Evals    *evaluation.Service
	Training *training.Service
	Trace    *trace.Service
	Queue    *jobs.Queue
	Log      *slog.Logger

	now func() time.Time
}

func (s *Service) logger() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

func (s *Service) clock() time.Time {
	if s.now == nil {
		return time.Now()
	}
	return s.now()
}

package loop

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/evaluation"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/jsonfields"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/trace"
	"github.com/honeai/hone/internal/training"
)

// A model's training policy: from a trace project, every N new calls with feedback (or every
// interval with some), a run builds the dataset (datasets/from-calls: SFT from the liked
// replies, or RL groups from the rewards), trains from the checkpoint the alias points at,
// evaluates the new checkpoint with the alias's rule's Evaluation and promotes it by the
// rule. Off until set; a run is a job of kind "policy" with its events; a policy can be
// paused. The check runs on every node (Watch), one node at a time per policy (a lease on
// its row).

var migrations = []db.Migration{{Version: 1, SQLite: `
CREATE TABLE loop_policies (
	model_id TEXT PRIMARY KEY,
	entity TEXT NOT NULL,
	spec TEXT NOT NULL,
	paused INTEGER NOT NULL DEFAULT 0,
	counted_until TEXT NOT NULL,
	last_run_at TEXT,
	last_job_id TEXT,
	lease_until TEXT,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	updated_by TEXT NOT NULL
);
CREATE TABLE loop_runs (
	job_id TEXT PRIMARY KEY,
	model_id TEXT NOT NULL,
	entity TEXT NOT NULL,
	trigger TEXT NOT NULL,
	result TEXT,
	created_at TEXT NOT NULL
);
CREATE INDEX loop_runs_model ON loop_runs (model_id, job_id)`}}

// Open migrates the loop's tables (policies and their runs) on d.
func Open(ctx context.Context, d *db.DB) (*Service, error) {
	if err := d.Migrate(ctx, "loop", migrations); err != nil {
		return nil, err
	}
	return &Service{DB: d, now: time.Now}, nil
}

// PolicyKind is the job kind of a policy run.
const PolicyKind = "policy"

// Events of a policy run (besides training's, evaluation's and promotion_decided).
const (
	// EventRunStarted: {alias, from_step, trigger, message}.
	EventRunStarted = "policy_run_started"
	// EventDataset: {dataset_ref, rows, calls, skipped, message}.
	EventDataset = "dataset_built"
	// EventRunSkipped: the run found nothing to train on: {reason, message}.
	EventRunSkipped = "policy_run_skipped"
	// EventRunEnded: {step, promoted, message}.
	EventRunEnded = "policy_run_ended"
)

// Policy is a model's training policy as it is set (PUT …/policy).
type Policy struct {
	// Project is the trace project the calls are read from (<entity>/<project>; default the
	// model's).
	Project string `json:"project"`
	// Alias is trained from and promoted by its rule (it must have one).
	Alias string `json:"alias"`
	// Kind: sft (default: the liked replies) or rl (groups rewarded by their feedback).
	Kind string `json:"kind"`
	// Feedback, OpNames, Query and Limit select the calls, as datasets/from-calls does
	// (Feedback default for sft: {"reaction": "👍"}).
	Feedback json.RawMessage `json:"feedback,omitempty"`
	OpNames  []string        `json:"op_names,omitempty"`
	Query    json.RawMessage `json:"query,omitempty"`
	Limit    *int            `json:"limit,omitempty"`
	// EveryCalls starts a run when this many calls got feedback since the last run's.
	EveryCalls int `json:"every_calls,omitempty"`
	// Interval starts a run when this long passed since the last (a Go duration: "6h"),
	// when at least one call got feedback since.
	Interval string `json:"interval,omitempty"`
	// Config and ExperimentalConfig are the training job's (as SFT or RL jobs take them).
	Config             json.RawMessage `json:"config,omitempty"`
	ExperimentalConfig json.RawMessage `json:"experimental_config,omitempty"`
	Paused             bool            `json:"paused"`
}

// PolicyView is a policy as the API shows it, with where it stands.
type PolicyView struct {
	Policy
	Model     string `json:"model"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
	UpdatedBy string `json:"updated_by"`
	// CountedUntil is the time up to which feedback was counted into a run; NewCalls the
	// calls with feedback since then that the policy would train on.
	CountedUntil string  `json:"counted_until"`
	NewCalls     int     `json:"new_calls"`
	LastRunAt    *string `json:"last_run_at"`
	LastJobID    *string `json:"last_job_id"`
}

// Trigger is why a run started.
type Trigger struct {
	Reason       string `json:"reason"` // every_calls, interval or manual
	NewCalls     int    `json:"new_calls"`
	CountedUntil string `json:"counted_until"`
	Actor        string `json:"actor"`
	Message      string `json:"message"`
}

// policyPayload is a policy run's job payload: the policy as it was when the run started.
type policyPayload struct {
	Policy  Policy  `json:"policy"`
	Trigger Trigger `json:"trigger"`
}

// RunView is one policy run: its job, why it started and what it did.
type RunView struct {
	JobID        string          `json:"job_id"`
	Status       string          `json:"status"`
	Trigger      Trigger         `json:"trigger"`
	Result       json.RawMessage `json:"result"`
	CreatedAt    string          `json:"created_at"`
	FinishedAt   *string         `json:"finished_at"`
	ErrorMessage *string         `json:"error_message"`
}

// CheckPolicy decodes and validates a policy for model m; faults name its fields.
func (s *Service) CheckPolicy(ctx context.Context, m registry.Model, raw json.RawMessage) (Policy, error) {
	var p Policy
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return p, fault.Invalid("", "the policy must be a JSON object")
	}
	var names []string
	for k := range fields {
		if !jsonfields.Has(reflect.TypeOf(p), k) {
			names = append(names, k)
		}
	}
	if len(names) > 0 {
		sort.Strings(names)
		return p, fault.Invalid(names[0], "%s is not a field of a training policy (project, alias, kind, feedback, op_names, query, limit, every_calls, interval, config, experimental_config, paused)", names[0])
	}
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&p); err != nil {
		return p, fault.JSON(err, "")
	}
	switch p.Project {
	case "":
		p.Project = m.Entity + "/" + m.Project
	default:
		e, name, ok := strings.Cut(p.Project, "/")
		if !ok {
			e, name = m.Entity, p.Project
		}
		if e != m.Entity {
			return p, fault.Forbidden("project", "this API key may only use projects of entity %q", m.Entity)
		}
		p.Project = e + "/" + name
	}
	if p.Kind == "" {
		p.Kind = "sft"
	}
	if p.Kind == "sft" && len(bytes.TrimSpace(p.Feedback)) == 0 {
		p.Feedback = json.RawMessage(`{"reaction":"👍"}`)
	}
	_, project, _ := strings.Cut(p.Project, "/")
	if err := training.CheckFromCalls(training.FromCallsRequest{Project: project, Kind: p.Kind, Feedback: p.Feedback, OpNames: p.OpNames, Query: p.Query, Limit: p.Limit}); err != nil {
		return p, err
	}
	if p.Alias == "" {
		return p, fault.Invalid("alias", "alias is required: the alias the policy trains from and promotes by its rule")
	}
	if _, _, err := s.rule(ctx, m.ID, p.Alias, "alias"); err != nil {
		return p, err
	}
	if p.EveryCalls < 0 {
		return p, fault.Invalid("every_calls", "every_calls must be at least 1, got %d", p.EveryCalls)
	}
	if p.Interval != "" {
		d, err := time.ParseDuration(p.Interval)
		if err != nil || d < time.Second {
			return p, fault.Invalid("interval", "interval must be a duration of at least 1s such as \"30m\" or \"6h\", got %q", p.Interval)
		}
	}
	if p.EveryCalls == 0 && p.Interval == "" {
		return p, fault.Invalid("every_calls", "a policy needs a trigger: every_calls (N new calls with feedback), interval, or both")
	}
	switch p.Kind {
	case "sft":
		if _, err := training.NewSFTSpec(training.SFTRequest{Config: p.Config, ExperimentalConfig: p.ExperimentalConfig}); err != nil {
			return p, err
		}
	case "rl":
		if len(p.Config) > 0 && string(p.Config) != "null" {
			return p, fault.Invalid("config", "an RL policy's training settings are experimental_config (as RL jobs take them)")
		}
		if err := training.CheckRLConfig(p.ExperimentalConfig); err != nil {
			return p, err
		}
	}
	return p, nil
}

const policyCols = `spec, paused, counted_until, last_run_at, last_job_id, created_at, updated_at, updated_by`

func (s *Service) readPolicy(ctx context.Context, q interface {
	QueryRow(ctx context.Context, q string, args ...any) *sql.Row
}, m registry.Model, lock string) (PolicyView, error) {
	var v PolicyView
	var spec string
	var paused int
	var lastRun, lastJob sql.NullString
	err := q.QueryRow(ctx, `SELECT `+policyCols+` FROM loop_policies WHERE model_id = ?`+lock, m.ID).
		Scan(&spec, &paused, &v.CountedUntil, &lastRun, &lastJob, &v.CreatedAt, &v.UpdatedAt, &v.UpdatedBy)
	if errors.Is(err, sql.ErrNoRows) {
		return v, fault.NotFound("policy", "%s has no training policy (PUT …/policy sets one)", modelRef(m))
	}
	if err != nil {
		return v, err
	}
	json.Unmarshal([]byte(spec), &v.Policy)
	v.Paused = paused != 0
	v.Model = modelRef(m)
	if lastRun.Valid {
		v.LastRunAt = &lastRun.String
	}
	if lastJob.Valid {
		v.LastJobID = &lastJob.String
	}
	return v, nil
}

// Policy returns a model's policy with the calls it would count now.
func (s *Service) Policy(ctx context.Context, m registry.Model) (PolicyView, error) {
	v, err := s.readPolicy(ctx, s.DB, m, "")
	if err != nil {
		return v, err
	}
	v.NewCalls, _, err = s.newCalls(ctx, v.Policy, v.CountedUntil)
	return v, err
}

// SetPolicy sets (or replaces) a model's policy; feedback is counted from now when it is
// new, and from where it was otherwise.
func (s *Service) SetPolicy(ctx context.Context, m registry.Model, raw json.RawMessage, actor string) (PolicyView, error) {
	p, err := s.CheckPolicy(ctx, m, raw)
	if err != nil {
		return PolicyView{}, err
	}
	spec, _ := json.Marshal(p)
	now := db.FormatTime(s.clock())
	paused := 0
	if p.Paused {
		paused = 1
	}
	_, err = s.DB.Exec(ctx, `INSERT INTO loop_policies (model_id, entity, spec, paused, counted_until, created_at, updated_at, updated_by)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (model_id) DO UPDATE SET spec = excluded.spec, paused = excluded.paused, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
		m.ID, m.Entity, string(spec), paused, now, now, now, actor)
	if err != nil {
		return PolicyView{}, err
	}
	return s.Policy(ctx, m)
}

// PausePolicy pauses (or resumes) a policy: a paused policy starts no run (a run started
// goes on).
func (s *Service) PausePolicy(ctx context.Context, m registry.Model, paused bool, actor string) (PolicyView, error) {
	v, err := s.readPolicy(ctx, s.DB, m, "")
	if err != nil {
		return v, err
	}
	v.Policy.Paused = paused
	spec, _ := json.Marshal(v.Policy)
	p := 0
	if paused {
		p = 1
	}
	if _, err := s.DB.Exec(ctx, `UPDATE loop_policies SET paused = ?, spec = ?, updated_at = ?, updated_by = ? WHERE model_id = ?`,
		p, string(spec), db.FormatTime(s.clock()), actor, m.ID); err != nil {
		return v, err
	}
	return s.Policy(ctx, m)
}

// DeletePolicy removes a model's policy (its runs stay listed).
func (s *Service) DeletePolicy(ctx context.Context, m registry.Model) error {
	res, err := s.DB.Exec(ctx, `DELETE FROM loop_policies WHERE model_id = ?`, m.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fault.NotFound("policy", "%s has no training policy", modelRef(m))
	}
	return nil
}

// RunNow starts a run of the policy at once (paused or not, whatever the count), unless one
// is queued or running.
func (s *Service) RunNow(ctx context.Context, m registry.Model, actor, reason string) (jobs.Job, error) {
	if _, err := s.readPolicy(ctx, s.DB, m, ""); err != nil {
		return jobs.Job{}, err
	}
	j, started, err := s.maybeRun(ctx, m, func(v PolicyView, n int, until string) (Trigger, bool) {
		msg := "started by hand"
		if reason != "" {
			msg += ": " + reason
		}
		return Trigger{Reason: "manual", NewCalls: n, CountedUntil: until, Actor: actor, Message: msg}, true
	})
	if err != nil {
		return j, err
	}
	if !started {
		return j, fault.Conflict("policy", "a run of %s's policy is queued or running (job %s): wait for it to end", modelRef(m), j.ID)
	}
	return j, nil
}

// leaseFor is how long one node holds a policy's row while it decides on a run.
const leaseFor = 2 * time.Minute

// maybeRun holds the policy's lease, counts its new calls and, when decide says so (and no
// run of it is queued or running), queues a run. It answers the run's job, or the one
// queued or running already (started false), or no job when decide said no.
func (s *Service) maybeRun(ctx context.Context, m registry.Model, decide func(v PolicyView, newCalls int, until string) (Trigger, bool)) (jobs.Job, bool, error) {
	now := s.clock()
	res, err := s.DB.Exec(ctx, `UPDATE loop_policies SET lease_until = ? WHERE model_id = ? AND (lease_until IS NULL OR lease_until < ?)`,
		db.FormatTime(now.Add(leaseFor)), m.ID, db.FormatTime(now))
	if err != nil {
		return jobs.Job{}, false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return jobs.Job{}, false, fault.Conflict("policy", "another node is starting a run of this policy: try again in a minute")
	}
	defer s.DB.Exec(context.WithoutCancel(ctx), `UPDATE loop_policies SET lease_until = NULL WHERE model_id = ?`, m.ID)
	v, err := s.readPolicy(ctx, s.DB, m, "")
	if err != nil {
		return jobs.Job{}, false, err
	}
	if v.LastJobID != nil {
		if j, err := s.Queue.Get(ctx, *v.LastJobID); err == nil && (j.Status == jobs.Queued || j.Status == jobs.Running) {
			return j, false, nil
		}
	}
	n, until, err := s.newCalls(ctx, v.Policy, v.CountedUntil)
	if err != nil {
		return jobs.Job{}, false, err
	}
	tr, ok := decide(v, n, until)
	if !ok {
		return jobs.Job{}, false, nil
	}
	if tr.CountedUntil == "" {
		tr.CountedUntil = v.CountedUntil
	}
	j, err := s.Queue.Enqueue(ctx, m.ID, m.Entity, PolicyKind, policyPayload{Policy: v.Policy, Trigger: tr})
	if err != nil {
		return j, false, err
	}
	trig, _ := json.Marshal(tr)
	nowS := db.FormatTime(s.clock())
	if _, err := s.DB.Exec(ctx, `INSERT INTO loop_runs (job_id, model_id, entity, trigger, result, created_at) VALUES (?, ?, ?, ?, NULL, ?)`,
		j.ID, m.ID, m.Entity, string(trig), nowS); err != nil {
		return j, true, err
	}
	_, err = s.DB.Exec(ctx, `UPDATE loop_policies SET counted_until = ?, last_run_at = ?, last_job_id = ? WHERE model_id = ?`, tr.CountedUntil, nowS, j.ID, m.ID)
	return j, true, err
}

// maxCounted bounds the feedback one check reads.
const maxCounted = 10000

// newCalls counts the calls of the policy's ops whose feedback came after since and matches
// the policy (a 👍 for an SFT policy by default; a reward for RL), and the time of the latest
// such feedback counted (since when there is none).
func (s *Service) newCalls(ctx context.Context, p Policy, since string) (int, string, error) {
	limit := maxCounted
	q, _ := json.Marshal(map[string]any{"$expr": map[string]any{"$gt": []any{map[string]any{"$getField": "created_at"}, map[string]any{"$literal": since}}}})
	fb, err := s.Trace.FeedbackQuery(ctx, trace.FeedbackQueryReq{ProjectID: p.Project, Fields: []string{"weave_ref", "created_at"}, Query: q,
		SortBy: []trace.SortBy{{Field: "created_at", Direction: "asc"}}, Limit: &limit})
	if err != nil {
		return 0, since, err
	}
	until := since
	prefix := "weave:///" + p.Project + "/call/"
	seen := map[string]bool{}
	var ids []string
	for _, f := range fb.Result {
		ref, _ := f["weave_ref"].(string)
		if at, _ := f["created_at"].(string); at > until {
			until = at
		}
		if id, ok := strings.CutPrefix(ref, prefix); ok && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	ops := p.OpNames
	if len(ops) == 0 {
		ops = []string{training.ChatOpName}
	}
	var filterOps []string
	for _, op := range ops {
		filterOps = append(filterOps, op)
		if !strings.HasPrefix(op, "weave:///") {
			filterOps = append(filterOps, "weave:///"+p.Project+"/op/"+op+":*")
		}
	}
	n := 0
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 1000)]
		ids = ids[len(batch):]
		err := s.Trace.CallsQuery(ctx, trace.CallsQueryReq{ProjectID: p.Project, Filter: &trace.CallsFilter{CallIDs: batch, OpNames: filterOps},
			Query: p.Query, IncludeFeedback: true}, func(c trace.CallSchema) error {
			if c.Exception == nil && training.MatchesFeedback(c.Summary, p.Feedback, p.Kind == "rl") {
				n++
			}
			return nil
		})
		if err != nil {
			return 0, since, err
		}
	}
	return n, until, nil
}

// Tick checks every policy once: a policy that is not paused, has no run queued or running
// and has enough new calls with feedback (every_calls), or has waited its interval with at
// least one, starts a run. Errors of one policy are logged; the others are checked.
func (s *Service) Tick(ctx context.Context) {
	rows, err := s.DB.Query(ctx, `SELECT model_id FROM loop_policies WHERE paused = 0 ORDER BY model_id`)
	if err != nil {
		if ctx.Err() == nil {
			s.logger().Warn("training policies not checked", "err", err)
		}
		return
	}
	var ids []string
	for rows.Next() {
		var id string
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	for _, id := range ids {
		m, err := s.Reg.Get(ctx, id)
		if err != nil {
			continue
		}
		j, started, err := s.maybeRun(ctx, m, func(v PolicyView, n int, until string) (Trigger, bool) {
			if v.Paused || n == 0 {
				return Trigger{}, false
			}
			if v.EveryCalls > 0 && n >= v.EveryCalls {
				return Trigger{Reason: "every_calls", NewCalls: n, CountedUntil: until, Actor: "policy",
					Message: fmt.Sprintf("%d calls got feedback since the last run (every_calls %d)", n, v.EveryCalls)}, true
			}
			if v.Interval != "" {
				d, _ := time.ParseDuration(v.Interval)
				last := v.CreatedAt
				if v.LastRunAt != nil {
					last = *v.LastRunAt
				}
				if t, err := db.ParseTime(last); err == nil && s.clock().Sub(t) >= d {
					return Trigger{Reason: "interval", NewCalls: n, CountedUntil: until, Actor: "policy",
						Message: fmt.Sprintf("%s passed since the last run, and %d calls got feedback", v.Interval, n)}, true
				}
			}
			return Trigger{}, false
		})
		switch {
		case err != nil && !fault.Is(err, fault.KindConflict) && ctx.Err() == nil:
			s.logger().Warn("training policy not checked", "model", modelRef(m), "err", err)
		case started:
			s.logger().Info("training policy: run queued", "model", modelRef(m), "job", j.ID)
		}
	}
}

// Watch checks the policies every interval until ctx ends.
func (s *Service) Watch(ctx context.Context, every time.Duration) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Tick(ctx)
		}
	}
}

// Runs lists a model's policy runs, newest first.
func (s *Service) Runs(ctx context.Context, m registry.Model, before string, limit int) ([]RunView, bool, error) {
	q := `SELECT job_id, trigger, result, created_at FROM loop_runs WHERE model_id = ?`
	args := []any{m.ID}
	if before != "" {
		q += ` AND job_id < ?`
		args = append(args, before)
	}
	q += ` ORDER BY job_id DESC LIMIT ?`
	args = append(args, limit+1)
	rows, err := s.DB.Query(ctx, q, args...)
	if err != nil {
		return nil, false, err
	}
	var out []RunView
	for rows.Next() {
		var v RunView
		var trig string
		var result sql.NullString
		if err := rows.Scan(&v.JobID, &trig, &result, &v.CreatedAt); err != nil {
			rows.Close()
			return nil, false, err
		}
		json.Unmarshal([]byte(trig), &v.Trigger)
		if result.Valid {
			v.Result = json.RawMessage(result.String)
		}
		out = append(out, v)
	}
	rows.Close()
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	for i := range out {
		if j, err := s.Queue.Get(ctx, out[i].JobID); err == nil {
			out[i].Status, out[i].FinishedAt, out[i].ErrorMessage = j.Status, j.FinishedAt, j.ErrorMessage
		}
	}
	if out == nil {
		out = []RunView{}
	}
	return out, more, nil
}

// Runner wraps a runner: policy runs run here, every other job as next runs it.
func (s *Service) Runner(next jobs.Runner) jobs.Runner {
	return func(ctx context.Context, j jobs.Job, progress func(string, any)) (*int, error) {
		if j.Kind != PolicyKind {
			return next(ctx, j, progress)
		}
		return s.runPolicy(ctx, j, progress)
	}
}

// runResult is what a run did, kept with it (loop_runs.result).
type runResult struct {
	DatasetRef string    `json:"dataset_ref,omitempty"`
	Rows       int       `json:"rows,omitempty"`
	Calls      int       `json:"calls,omitempty"`
	FromStep   int       `json:"from_step"`
	Step       *int      `json:"step,omitempty"`
	Skipped    string    `json:"skipped,omitempty"`
	Decision   *Decision `json:"decision,omitempty"`
	CallID     string    `json:"evaluation_call_id,omitempty"`
}

func (s *Service) saveResult(ctx context.Context, jobID string, r runResult) {
	b, _ := json.Marshal(r)
	if _, err := s.DB.Exec(context.WithoutCancel(ctx), `UPDATE loop_runs SET result = ? WHERE job_id = ?`, string(b), jobID); err != nil {
		s.logger().Warn("policy run's result not recorded", "job", jobID, "err", err)
	}
}

// runPolicy is one run of a policy: dataset, training from the alias's checkpoint, the
// rule's evaluation, the promotion. A run that starts again goes on from what its earlier
// run recorded (the dataset, the checkpoint, the evaluation's rows, the decision).
func (s *Service) runPolicy(ctx context.Context, j jobs.Job, progress func(string, any)) (*int, error) {
	var pl policyPayload
	if err := json.Unmarshal(j.Payload, &pl); err != nil {
		return nil, fmt.Errorf("the run's payload is not readable: %w", err)
	}
	p := pl.Policy
	m, err := s.Reg.Get(ctx, j.ModelID)
	if err != nil {
		return nil, fmt.Errorf("the policy's model is gone: %w", err)
	}
	a, r, err := s.rule(ctx, m.ID, p.Alias, "alias")
	if err != nil {
		return nil, fmt.Errorf("the policy's alias: %w", err)
	}
	var res runResult
	if data, ok := s.Evals.PriorEvent(ctx, j.ID, EventRunStarted); ok {
		var d struct {
			FromStep int `json:"from_step"`
		}
		json.Unmarshal(data, &d)
		res.FromStep = d.FromStep
	} else {
		res.FromStep = a.Step
		progress(EventRunStarted, map[string]any{"alias": p.Alias, "from_step": a.Step, "trigger": pl.Trigger,
			"message": fmt.Sprintf("policy run (%s): training %s:%s (step %d) on the %s data of %s", pl.Trigger.Message, modelRef(m), p.Alias, a.Step, p.Kind, p.Project)})
	}

	// The dataset.
	if data, ok := s.Evals.PriorEvent(ctx, j.ID, EventDataset); ok {
		var d struct {
			Ref   string `json:"dataset_ref"`
			Rows  int    `json:"rows"`
			Calls int    `json:"calls"`
		}
		json.Unmarshal(data, &d)
		res.DatasetRef, res.Rows, res.Calls = d.Ref, d.Rows, d.Calls
	} else {
		entity, project, _ := strings.Cut(p.Project, "/")
		name := m.Name + "-policy"
		if p.Kind == "rl" {
			name += "-rl"
		}
		ds, err := s.Training.DatasetFromCalls(ctx, training.FromCallsRequest{Entity: entity, Project: project, Name: name, OpNames: p.OpNames,
			Feedback: p.Feedback, Query: p.Query, Limit: p.Limit, Kind: p.Kind})
		if f, ok := fault.As(err); ok && f.Kind == fault.KindInvalid {
			res.Skipped = f.Msg
			progress(EventRunSkipped, map[string]any{"reason": f.Msg, "message": "nothing to train on: " + f.Msg})
			s.saveResult(ctx, j.ID, res)
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("building the dataset: %w", err)
		}
		res.DatasetRef, res.Rows, res.Calls = ds.DatasetRef, ds.Rows, ds.Calls
		progress(EventDataset, map[string]any{"dataset_ref": ds.DatasetRef, "rows": ds.Rows, "calls": ds.Calls, "skipped": ds.Skipped,
			"message": fmt.Sprintf("dataset %s: %d %s row(s) from %d call(s)", ds.DatasetRef, ds.Rows, p.Kind, ds.Calls)})
	}
	s.saveResult(ctx, j.ID, res)

	// Training, from the alias's checkpoint.
	var step *int
	if data, ok := s.Evals.PriorEvent(ctx, j.ID, evaluation.EventCheckpointSaved); ok {
		var d struct {
			Step int `json:"step"`
		}
		if json.Unmarshal(data, &d) == nil && d.Step > 0 {
			step = &d.Step
		}
	}
	if step == nil {
		from := res.FromStep
		in := training.InlineJob{FromStep: &from}
		if p.Kind == "rl" {
			in.RL = &training.RLRequest{TrajectoryGroupsURL: res.DatasetRef, ExperimentalConfig: p.ExperimentalConfig}
		} else {
			in.SFT = &training.SFTRequest{TrainingDataURL: res.DatasetRef, Config: p.Config, ExperimentalConfig: p.ExperimentalConfig}
		}
		if step, err = s.Training.TrainInline(ctx, j, in, progress); err != nil {
			return nil, err
		}
		if step == nil {
			return nil, fmt.Errorf("training saved no checkpoint")
		}
		progress(evaluation.EventCheckpointSaved, map[string]any{"step": *step, "message": fmt.Sprintf("checkpoint step %d saved (trained from step %d); evaluating it", *step, res.FromStep)})
	}
	res.Step = step
	s.saveResult(ctx, j.ID, res)

	// The rule's evaluation, and the promotion.
	je, err := s.Evals.LoadEvaluation(ctx, m.Entity, r.Evaluation, "alias")
	if err != nil {
		return nil, fmt.Errorf("the rule's evaluation: %w", err)
	}
	rec, err := s.Evals.Evaluate(ctx, j, "checkpoint", je, evaluation.CheckpointTarget(m, *step), progress)
	if err != nil {
		if ctx.Err() != nil {
			return nil, jobs.ErrCancelled
		}
		return nil, fmt.Errorf("checkpoint step %d was saved, but its evaluation failed: %w", *step, err)
	}
	res.CallID = rec.ID
	if err := s.Promote(ctx, j, p.Alias, je, rec, progress); err != nil {
		return nil, err
	}
	if data, ok := s.Evals.PriorEvent(ctx, j.ID, EventPromotion); ok {
		var d Decision
		if json.Unmarshal(data, &d) == nil {
			res.Decision = &d
		}
	}
	s.saveResult(ctx, j.ID, res)
	msg := fmt.Sprintf("policy run ended: step %d", *step)
	promoted := false
	if res.Decision != nil {
		promoted = res.Decision.Promoted
		msg += "; " + res.Decision.Message
	}
	progress(EventRunEnded, map[string]any{"step": *step, "promoted": promoted, "message": msg})
	return step, nil
}

// ModelDeleted removes a deleted model's policy and its runs' records (their jobs stay).
func (s *Service) ModelDeleted(ctx context.Context, modelID string) error {
	for _, t := range []string{"loop_policies", "loop_runs"} {
		if _, err := s.DB.Exec(ctx, `DELETE FROM `+t+` WHERE model_id = ?`, modelID); err != nil {
			return err
		}
	}
	return nil
}

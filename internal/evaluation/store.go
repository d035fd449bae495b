package evaluation

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/honeai/hone/internal/db"
)

// eval_runs keeps each evaluation run: which model (and checkpoint step) it evaluated with
// which Evaluation, where its calls are, and its summary and metrics once it ended. A
// promotion compares two runs of the same Evaluation; Studio shows a checkpoint's runs.
var migrations = []db.Migration{{Version: 1, SQLite: `
CREATE TABLE eval_runs (
	id TEXT PRIMARY KEY,
	job_id TEXT NOT NULL,
	label TEXT NOT NULL,
	entity TEXT NOT NULL,
	project TEXT NOT NULL,
	model_id TEXT NOT NULL,
	base_model TEXT NOT NULL,
	model TEXT NOT NULL,
	step INTEGER NOT NULL,
	evaluation_ref TEXT NOT NULL,
	evaluation_name TEXT NOT NULL,
	status TEXT NOT NULL,
	summary TEXT,
	metrics TEXT,
	created_at TEXT NOT NULL,
	finished_at TEXT
);
CREATE INDEX eval_runs_job ON eval_runs (job_id, id);
CREATE INDEX eval_runs_model ON eval_runs (model_id, step, evaluation_ref);
CREATE INDEX eval_runs_entity ON eval_runs (entity, id)`}}

// Run statuses.
const (
	RunRunning  = "running"
	RunFinished = "finished"
)

// RunRecord is one evaluation run of a model (or checkpoint) with an Evaluation.
type RunRecord struct {
	// ID is the run's Evaluation.evaluate call id in the trace project.
	ID    string `json:"call_id"`
	JobID string `json:"job_id"`
	// Label tells the runs of one job apart: "" for an evaluation job's, "candidate" and
	// "current" for the two sides of a promotion.
	Label          string `json:"label,omitempty"`
	Entity         string `json:"-"`
	Project        string `json:"project"`
	ModelID        string `json:"model_id,omitempty"` // "" for a base model
	BaseModel      string `json:"base_model"`
	Model          string `json:"model"` // the exact name chat was asked (…:step<N>, or a base model)
	Step           *int   `json:"step"`  // nil for a base model
	EvaluationRef  string `json:"evaluation_ref"`
	EvaluationName string `json:"evaluation"`
	Status         string `json:"status"`
	// Summary is the Weave summary (the Evaluation.evaluate call's output).
	Summary   json.RawMessage    `json:"summary,omitempty"`
	Metrics   map[string]float64 `json:"metrics,omitempty"`
	CreatedAt string             `json:"created_at"`
	// FinishedAt is when the run ended (nil while it runs).
	FinishedAt *string `json:"finished_at"`
}

// ErrNotFound is a missing run.
var ErrNotFound = errors.New("evaluation: not found")

const runCols = `id, job_id, label, entity, project, model_id, base_model, model, step, evaluation_ref, evaluation_name, status, summary, metrics, created_at, finished_at`

func scanRun(row interface{ Scan(...any) error }) (RunRecord, error) {
	var r RunRecord
	var step int
	var summary, metrics, finished sql.NullString
	err := row.Scan(&r.ID, &r.JobID, &r.Label, &r.Entity, &r.Project, &r.ModelID, &r.BaseModel, &r.Model, &step,
		&r.EvaluationRef, &r.EvaluationName, &r.Status, &summary, &metrics, &r.CreatedAt, &finished)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, err
	}
	if step >= 0 {
		r.Step = &step
	}
	if summary.Valid {
		r.Summary = json.RawMessage(summary.String)
	}
	if metrics.Valid {
		json.Unmarshal([]byte(metrics.String), &r.Metrics)
	}
	if finished.Valid {
		r.FinishedAt = &finished.String
	}
	return r, nil
}

// startRun records a run that starts (or, when its id is known, leaves the record as it is).
func (s *Service) startRun(ctx context.Context, r RunRecord) error {
	step := -1
	if r.Step != nil {
		step = *r.Step
	}
	_, err := s.DB.Exec(ctx, `INSERT INTO eval_runs (`+runCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, NULL)
		ON CONFLICT (id) DO NOTHING`, r.ID, r.JobID, r.Label, r.Entity, r.Project, r.ModelID, r.BaseModel, r.Model, step,
		r.EvaluationRef, r.EvaluationName, RunRunning, r.CreatedAt)
	return err
}

// finishRun records a run's summary and metrics.
func (s *Service) finishRun(ctx context.Context, id string, summary json.RawMessage, metrics map[string]float64) error {
	mj, _ := json.Marshal(metrics)
	_, err := s.DB.Exec(ctx, `UPDATE eval_runs SET status = ?, summary = ?, metrics = ?, finished_at = ? WHERE id = ?`,
		RunFinished, string(summary), string(mj), db.FormatTime(s.now()), id)
	return err
}

// JobRuns lists the evaluation runs of a job, oldest first.
func (s *Service) JobRuns(ctx context.Context, jobID string) ([]RunRecord, error) {
	return s.runs(ctx, `WHERE job_id = ? ORDER BY created_at, id`, jobID)
}

// ModelRuns lists the finished evaluation runs of a trainable model's checkpoints, newest
// first, at most limit.
func (s *Service) ModelRuns(ctx context.Context, modelID string, limit int) ([]RunRecord, error) {
	return s.runs(ctx, `WHERE model_id = ? AND status = ? ORDER BY finished_at DESC, id DESC LIMIT ?`, modelID, RunFinished, limit)
}

// LatestRun is the newest finished run of a model's step with an Evaluation (by its ref
// with digest), or ErrNotFound.
func (s *Service) LatestRun(ctx context.Context, modelID string, step int, evaluationRef string) (RunRecord, error) {
	rs, err := s.runs(ctx, `WHERE model_id = ? AND step = ? AND evaluation_ref = ? AND status = ? ORDER BY finished_at DESC, id DESC LIMIT 1`,
		modelID, step, evaluationRef, RunFinished)
	if err != nil {
		return RunRecord{}, err
	}
	if len(rs) == 0 {
		return RunRecord{}, ErrNotFound
	}
	return rs[0], nil
}

func (s *Service) runs(ctx context.Context, where string, args ...any) ([]RunRecord, error) {
	rows, err := s.DB.Query(ctx, `SELECT `+runCols+` FROM eval_runs `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []RunRecord{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ModelDeleted removes a deleted model's evaluation runs (their calls stay in the trace
// project, as its Weave Evaluation's).
func (s *Service) ModelDeleted(ctx context.Context, modelID string) error {
	_, err := s.DB.Exec(ctx, `DELETE FROM eval_runs WHERE model_id = ?`, modelID)
	return err
}

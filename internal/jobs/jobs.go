// Package jobs is the durable training-job queue: jobs and their events live in the store,
// workers (in the API server or in `hone worker` processes on the same store) claim queued jobs
// under a lease that they renew while running; a job whose worker died is put back in the queue
// when its lease expires (and failed once MaxAttempts runs in a row made no progress), so a
// job is never lost and never runs twice at once; a worker that shuts down cleanly hands its job back at once (Release), without
// counting the attempt. At most one job per model runs at a time: training steps serialise.
package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/db"
)

var migrations = []db.Migration{{Version: 1, SQLite: `
CREATE TABLE train_jobs (
	id TEXT PRIMARY KEY,
	model_id TEXT NOT NULL,
	entity TEXT NOT NULL,
	kind TEXT NOT NULL,
	status TEXT NOT NULL,
	payload TEXT NOT NULL,
	created_at TEXT NOT NULL,
	started_at TEXT,
	finished_at TEXT,
	error_message TEXT,
	step INTEGER,
	attempts INTEGER NOT NULL DEFAULT 0,
	lease_owner TEXT,
	lease_until TEXT,
	cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX train_jobs_queue ON train_jobs (status, created_at);
CREATE INDEX train_jobs_model ON train_jobs (model_id, status);
CREATE TABLE train_job_events (
	job_id TEXT NOT NULL,
	seq INTEGER NOT NULL,
	id TEXT NOT NULL,
	type TEXT NOT NULL,
	data TEXT NOT NULL,
	created_at TEXT NOT NULL,
	PRIMARY KEY (job_id, seq)
);
CREATE UNIQUE INDEX train_job_events_id ON train_job_events (job_id, id)`}, {Version: 2, SQLite: `
CREATE INDEX train_jobs_entity ON train_jobs (entity, id)`}, {Version: 3, SQLite: `
ALTER TABLE train_jobs ADD COLUMN runs INTEGER NOT NULL DEFAULT 0`}, {Version: 4, SQLite: `
ALTER TABLE train_jobs ADD COLUMN progress INTEGER NOT NULL DEFAULT 0`}}

// Statuses.
const (
	Queued    = "QUEUED"
	Running   = "RUNNING"
	Succeeded = "SUCCEEDED"
	Failed    = "FAILED"
	Cancelled = "CANCELLED"
)

// Event types (ART's TrainingJobEventType).
const (
	EventStarted = "training_started"
	EventStep    = "gradient_step"
	// EventGroupSkipped says that an RL job leaves a trajectory group out because all its
	// rewards are equal: {group_index, num_trajectories, reward, message}.
	EventGroupSkipped = "group_skipped"
	EventEnded        = "training_ended"
	EventFailed       = "training_failed"
	// EventInterrupted marks the end of an attempt that a worker's clean shutdown stopped
	// at a step boundary: {attempt, message}; the job is queued again at once.
	EventInterrupted = "training_interrupted"
	// EventResumed follows EventStarted when a run goes on from the state an earlier run
	// of the job saved: {from_step, num_sequences, message}; its first gradient step is
	// from_step+1.
	EventResumed = "training_resumed"
	// EventSaved says that a run saved a state the job's next run goes on from: {step,
	// num_sequences}. A step past every earlier saved one is progress: the job's count of
	// runs in a row without progress starts again (the run does not count).
	EventSaved = "training_saved"
	// EventWorkerLost marks a run whose worker stopped responding (its lease expired): {attempt,
	// attempts_without_progress, max_attempts, saved_step, message}; the job is queued again,
	// or fails when max_attempts runs in a row made no progress.
	EventWorkerLost = "worker_lost"
)

// The rule for runs whose worker dies: a job fails only once MaxAttempts of its runs in a row
// ended with their worker gone (their lease expired) and made no progress, that is saved no
// state past the furthest one saved before (EventSaved). A run that resumed and saved further
// starts the count again; a run handed back by a clean shutdown (Release) is not counted.

// Every event written while a job has been claimed at least once carries the number of the
// run it belongs to as data.attempt (1, 2, 3, ...), counting interrupted runs and runs whose
// worker died: a job that runs again repeats its step numbers, and the attempt tells the
// runs apart.

// ErrNotFound is returned for an unknown job or event cursor.
var ErrNotFound = errors.New("jobs: not found")

// Job is one queued training job.
type Job struct {
	ID           string          `json:"id"`
	ModelID      string          `json:"model_id"`
	Entity       string          `json:"-"`
	Kind         string          `json:"kind"`
	Status       string          `json:"status"`
	Payload      json.RawMessage `json:"-"`
	CreatedAt    string          `json:"created_at"`
	StartedAt    *string         `json:"started_at"`
	FinishedAt   *string         `json:"finished_at"`
	ErrorMessage *string         `json:"error_message"`
	Step         *int            `json:"step"`
	Attempts     int             `json:"-"`
	// Attempt is the number of the job's latest run (0 before its first claim); it never
	// goes down, unlike Attempts, which a clean hand-back does not count.
	Attempt int `json:"attempt"`
}

// Event is one event of a job.
type Event struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	CreatedAt string          `json:"created_at"`
	seq       int
}

// Queue is the job store.
type Queue struct {
	db          *db.DB
	now         func() time.Time
	Lease       time.Duration // how long a claim lasts without renewal (default 30 s)
	MaxAttempts int           // runs in a row without progress whose workers died before the job fails (default 3)

	mu      sync.Mutex
	waiters map[string][]chan struct{} // job id → followers woken on new events
	wake    chan struct{}              // workers in this process woken on new jobs
}

// Open migrates the job tables on d.
func Open(ctx context.Context, d *db.DB) (*Queue, error) {
	if err := d.Migrate(ctx, "jobs", migrations); err != nil {
		return nil, err
	}
	q := &Queue{db: d, now: time.Now, Lease: 30 * time.Second, MaxAttempts: 3,
		waiters: map[string][]chan struct{}{}, wake: make(chan struct{}, 1)}
	if d.Dialect() == db.Postgres { // workers on several machines: the server's clock (clock.go)
		q.now = (&storeClock{d: d, local: time.Now}).now
	}
	return q, nil
}

// Enqueue adds a job.
func (q *Queue) Enqueue(ctx context.Context, modelID, entity, kind string, payload any) (Job, error) {
	js, err := json.Marshal(payload)
	if err != nil {
		return Job{}, err
	}
	j := Job{ID: uuid.Must(uuid.NewV7()).String(), ModelID: modelID, Entity: entity, Kind: kind, Status: Queued,
		Payload: js, CreatedAt: db.FormatTime(q.now())}
	_, err = q.db.Exec(ctx, `INSERT INTO train_jobs (id, model_id, entity, kind, status, payload, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		j.ID, j.ModelID, j.Entity, j.Kind, j.Status, string(js), j.CreatedAt)
	if err != nil {
		return Job{}, err
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return j, nil
}

const jobCols = `id, model_id, entity, kind, status, payload, created_at, started_at, finished_at, error_message, step, attempts, runs`

func scanJob(row interface{ Scan(...any) error }) (Job, error) {
	var j Job
	var payload string
	var started, finished, errMsg sql.NullString
	var step sql.NullInt64
	err := row.Scan(&j.ID, &j.ModelID, &j.Entity, &j.Kind, &j.Status, &payload, &j.CreatedAt, &started, &finished, &errMsg, &step, &j.Attempts, &j.Attempt)
	if errors.Is(err, sql.ErrNoRows) {
		return j, ErrNotFound
	}
	if err != nil {
		return j, err
	}
	j.Payload = json.RawMessage(payload)
	if started.Valid {
		j.StartedAt = &started.String
	}
	if finished.Valid {
		j.FinishedAt = &finished.String
	}
	if errMsg.Valid {
		j.ErrorMessage = &errMsg.String
	}
	if step.Valid {
		s := int(step.Int64)
		j.Step = &s
	}
	return j, nil
}

// queueLockKey names the PostgreSQL advisory lock that serialises claims and cancels.
const queueLockKey = 0x686f6e656a6f6273 // "honejobs"

// lockQueue serialises the transactions that read a job's state and then change it (Claim,
// Cancel) across workers and processes. SQLite's write transactions are serial already;
// PostgreSQL's run under READ COMMITTED, where two claims could both pick the same queued
// job, or two jobs of one model.
func lockQueue(ctx context.Context, tx *db.Tx) error {
	if tx.Dialect() != db.Postgres {
		return nil
	}
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(?)", int64(queueLockKey))
	return err
}

// Get returns a job.
func (q *Queue) Get(ctx context.Context, id string) (Job, error) {
	return scanJob(q.db.QueryRow(ctx, `SELECT `+jobCols+` FROM train_jobs WHERE id = ?`, id))
}

// ListOptions filter and page List.
type ListOptions struct {
	ModelID string   // only this model's jobs
	Status  string   // only jobs in this status
	Before  string   // only jobs created before this job (its id); "" starts from the newest
	Limit   int      // at most this many (default 20)
	Kinds   []string // only jobs of these kinds (none: every kind)
}

// List returns an entity's jobs, newest first, and whether more follow.
func (q *Queue) List(ctx context.Context, entity string, o ListOptions) ([]Job, bool, error) {
	if o.Limit <= 0 {
		o.Limit = 20
	}
	query := `SELECT ` + jobCols + ` FROM train_jobs WHERE entity = ?`
	args := []any{entity}
	if o.ModelID != "" {
		query += ` AND model_id = ?`
		args = append(args, o.ModelID)
	}
	if o.Status != "" {
		query += ` AND status = ?`
		args = append(args, o.Status)
	}
	if len(o.Kinds) > 0 {
		query += ` AND kind IN (?` + strings.Repeat(`, ?`, len(o.Kinds)-1) + `)`
		for _, k := range o.Kinds {
			args = append(args, k)
		}
	}
	if o.Before != "" {
		// Ids are UUIDv7: their order is the order of creation.
		query += ` AND id < ?`
		args = append(args, o.Before)
	}
	query += ` ORDER BY id DESC LIMIT ?`
	args = append(args, o.Limit+1)
	rows, err := q.db.Query(ctx, query, args...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, false, err
		}
		out = append(out, j)
	}
	more := len(out) > o.Limit
	if more {
		out = out[:o.Limit]
	}
	return out, more, rows.Err()
}

// Cancel asks for a job to stop: a queued job is cancelled at once; a running one when its
// worker next checks (between gradient steps). Finished jobs are left as they are.
func (q *Queue) Cancel(ctx context.Context, id string) (Job, error) {
	var cancelledNow bool
	err := q.db.WriteTx(ctx, func(tx *db.Tx) error {
		if err := lockQueue(ctx, tx); err != nil {
			return err
		}
		var status string
		if err := tx.QueryRow(ctx, `SELECT status FROM train_jobs WHERE id = ?`, id).Scan(&status); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		switch status {
		case Queued:
			cancelledNow = true
			now := db.FormatTime(q.now())
			if _, err := tx.Exec(ctx, `UPDATE train_jobs SET status = ?, finished_at = ?, cancel_requested = 1 WHERE id = ?`, Cancelled, now, id); err != nil {
				return err
			}
			_, err := q.addEventTx(ctx, tx, id, EventFailed, map[string]any{"error_message": "cancelled before it started"})
			return err
		case Running:
			_, err := tx.Exec(ctx, `UPDATE train_jobs SET cancel_requested = 1 WHERE id = ?`, id)
			return err
		}
		return nil
	})
	if err != nil {
		return Job{}, err
	}
	if cancelledNow {
		q.notify(id)
	}
	return q.Get(ctx, id)
}

// CancelRequested reports whether a cancel was asked for.
func (q *Queue) CancelRequested(ctx context.Context, id string) bool {
	var c int
	q.db.QueryRow(ctx, `SELECT cancel_requested FROM train_jobs WHERE id = ?`, id).Scan(&c)
	return c != 0
}

// Claim takes the oldest queued job whose model has no running job, for owner, under a lease.
// Expired leases are handled first: their jobs go back to the queue, or fail after
// MaxAttempts. It returns ErrNotFound when there is nothing to run.
func (q *Queue) Claim(ctx context.Context, owner string) (Job, error) {
	var claimed Job
	found := false
	var failedIDs []string
	err := q.db.WriteTx(ctx, func(tx *db.Tx) error {
		if err := lockQueue(ctx, tx); err != nil {
			return err
		}
		now := q.now()
		nowS := db.FormatTime(now)
		// Reap expired leases.
		rows, err := tx.Query(ctx, `SELECT id, attempts, runs, progress FROM train_jobs WHERE status = ? AND lease_until < ?`, Running, nowS)
		if err != nil {
			return err
		}
		type exp struct {
			id                       string
			attempts, runs, progress int
		}
		var expired []exp
		for rows.Next() {
			var e exp
			if err := rows.Scan(&e.id, &e.attempts, &e.runs, &e.progress); err != nil {
				rows.Close()
				return err
			}
			expired = append(expired, e)
		}
		rows.Close()
		for _, e := range expired {
			lost := map[string]any{"attempts_without_progress": e.attempts, "max_attempts": q.MaxAttempts, "saved_step": e.progress}
			if e.attempts >= q.MaxAttempts {
				msg := fmt.Sprintf("the job's worker stopped responding in %d runs in a row that made no progress (none saved a state past step %d); giving up", e.attempts, e.progress)
				lost["message"] = fmt.Sprintf("attempt %d's worker stopped responding: %s", e.runs, msg)
				if _, err := q.addEventTx(ctx, tx, e.id, EventWorkerLost, lost); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `UPDATE train_jobs SET status = ?, finished_at = ?, error_message = ?, lease_owner = NULL, lease_until = NULL WHERE id = ?`,
					Failed, nowS, msg, e.id); err != nil {
					return err
				}
				if _, err := q.addEventTx(ctx, tx, e.id, EventFailed, map[string]any{"error_message": msg}); err != nil {
					return err
				}
				failedIDs = append(failedIDs, e.id)
				continue
			}
			lost["message"] = fmt.Sprintf("attempt %d's worker stopped responding; the job is queued again (%d of %d runs in a row without progress; the furthest saved state is after step %d)",
				e.runs, e.attempts, q.MaxAttempts, e.progress)
			if _, err := q.addEventTx(ctx, tx, e.id, EventWorkerLost, lost); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE train_jobs SET status = ?, lease_owner = NULL, lease_until = NULL WHERE id = ?`, Queued, e.id); err != nil {
				return err
			}
			failedIDs = append(failedIDs, e.id) // (requeued: its followers see the event too)
		}
		j, err := scanJob(tx.QueryRow(ctx, `SELECT `+jobCols+` FROM train_jobs j WHERE status = ?
			AND NOT EXISTS (SELECT 1 FROM train_jobs r WHERE r.model_id = j.model_id AND r.status = ?)
			ORDER BY created_at, id LIMIT 1`, Queued, Running))
		if errors.Is(err, ErrNotFound) {
			return nil // keep the reaping
		}
		if err != nil {
			return err
		}
		until := db.FormatTime(now.Add(q.Lease))
		if _, err := tx.Exec(ctx, `UPDATE train_jobs SET status = ?, started_at = COALESCE(started_at, ?), attempts = attempts + 1, runs = runs + 1, lease_owner = ?, lease_until = ? WHERE id = ?`,
			Running, nowS, owner, until, j.ID); err != nil {
			return err
		}
		j.Status = Running
		j.Attempts++
		j.Attempt++
		claimed, found = j, true
		return nil
	})
	if err != nil {
		return Job{}, err
	}
	for _, id := range failedIDs {
		q.notify(id)
	}
	if !found {
		return Job{}, ErrNotFound
	}
	return claimed, nil
}

// Renew extends owner's lease on a running job; false when the lease was lost.
func (q *Queue) Renew(ctx context.Context, id, owner string) bool {
	res, err := q.db.Exec(ctx, `UPDATE train_jobs SET lease_until = ? WHERE id = ? AND lease_owner = ? AND status = ?`,
		db.FormatTime(q.now().Add(q.Lease)), id, owner, Running)
	if err != nil {
		return false
	}
	n, _ := res.RowsAffected()
	return n == 1
}

// Finish ends a running job held by owner with a final status, error message and step, and
// writes the job's final event (training_ended, or training_failed with the message) in the
// same transaction: whoever reads the final status also finds the final event.
func (q *Queue) Finish(ctx context.Context, id, owner, status, errMsg string, step *int) error {
	var em any
	if errMsg != "" {
		em = errMsg
	}
	var st any
	if step != nil {
		st = *step
	}
	typ, data := EventEnded, map[string]any{}
	if status != Succeeded {
		typ, data = EventFailed, map[string]any{"error_message": errMsg}
	}
	err := q.db.WriteTx(ctx, func(tx *db.Tx) error {
		res, err := tx.Exec(ctx, `UPDATE train_jobs SET status = ?, finished_at = ?, error_message = ?, step = COALESCE(?, step), lease_owner = NULL, lease_until = NULL
			WHERE id = ? AND lease_owner = ? AND status = ?`, status, db.FormatTime(q.now()), em, st, id, owner, Running)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("jobs: lost the lease on job %s", id)
		}
		_, err = q.addEventTx(ctx, tx, id, typ, data)
		return err
	})
	if err != nil {
		return err
	}
	q.notify(id)
	return nil
}

// Release hands a running job held by owner back to the queue at once, because its worker
// is shutting down cleanly: the job is queued again (not left to its lease), the
// interrupted attempt does not count towards MaxAttempts, and a training_interrupted event
// marks it, in one transaction.
//
// The event's attempt is the run's number (Job.Attempt), interrupted runs included.
func (q *Queue) Release(ctx context.Context, id, owner string) error {
	err := q.db.WriteTx(ctx, func(tx *db.Tx) error {
		var attempt int
		if err := tx.QueryRow(ctx, `SELECT runs FROM train_jobs WHERE id = ?`, id).Scan(&attempt); err != nil {
			return err
		}
		msg := fmt.Sprintf("attempt %d was stopped by a shutdown of its worker; the job is queued again", attempt)
		res, err := tx.Exec(ctx, `UPDATE train_jobs SET status = ?, lease_owner = NULL, lease_until = NULL,
			attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END
			WHERE id = ? AND lease_owner = ? AND status = ?`, Queued, id, owner, Running)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("jobs: lost the lease on job %s", id)
		}
		_, err = q.addEventTx(ctx, tx, id, EventInterrupted, map[string]any{"attempt": attempt, "message": msg})
		return err
	})
	if err != nil {
		return err
	}
	q.notify(id)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// AddEvent appends an event to a job and wakes its followers.
func (q *Queue) AddEvent(ctx context.Context, jobID, typ string, data any) (Event, error) {
	var ev Event
	err := q.db.WriteTx(ctx, func(tx *db.Tx) error {
		var err error
		ev, err = q.addEventTx(ctx, tx, jobID, typ, data)
		return err
	})
	if err != nil {
		return Event{}, err
	}
	q.notify(jobID)
	return ev, nil
}

// addEventTx appends an event inside tx; the caller wakes followers (notify) after commit.
func (q *Queue) addEventTx(ctx context.Context, tx *db.Tx, jobID, typ string, data any) (Event, error) {
	js, err := encodeEvent(data)
	if err != nil {
		return Event{}, err
	}
	ev := Event{ID: uuid.Must(uuid.NewV7()).String(), Type: typ, Data: js, CreatedAt: db.FormatTime(q.now())}
	if tx.Dialect() == db.Postgres { // one writer of a job's next seq at a time
		if _, err := tx.Exec(ctx, `SELECT 1 FROM train_jobs WHERE id = ? FOR UPDATE`, jobID); err != nil {
			return Event{}, err
		}
	}
	var attempt int
	if err := tx.QueryRow(ctx, `SELECT runs FROM train_jobs WHERE id = ?`, jobID).Scan(&attempt); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Event{}, err
	}
	js = withAttempt(js, attempt)
	ev.Data = js
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM train_job_events WHERE job_id = ?`, jobID).Scan(&ev.seq); err != nil {
		return Event{}, err
	}
	_, err = tx.Exec(ctx, `INSERT INTO train_job_events (job_id, seq, id, type, data, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		jobID, ev.seq, ev.ID, ev.Type, string(js), ev.CreatedAt)
	if err != nil || typ != EventSaved {
		return ev, err
	}
	// A state saved past every earlier one is progress: the running attempt and those before
	// it no longer count towards MaxAttempts.
	var saved struct {
		Step int `json:"step"`
	}
	if json.Unmarshal(js, &saved) == nil && saved.Step > 0 {
		_, err = tx.Exec(ctx, `UPDATE train_jobs SET progress = ?, attempts = 0 WHERE id = ? AND status = ? AND progress < ?`, saved.Step, jobID, Running, saved.Step)
	}
	return ev, err
}

// notify wakes the followers of a job waiting in this process.
func (q *Queue) notify(jobID string) {
	q.mu.Lock()
	for _, ch := range q.waiters[jobID] {
		close(ch)
	}
	delete(q.waiters, jobID)
	q.mu.Unlock()
}

// Events lists a job's events in order, after the event with id after, at most limit; more
// tells whether others follow.
func (q *Queue) Events(ctx context.Context, jobID, after string, limit int) ([]Event, bool, error) {
	from := 0
	if after != "" {
		if err := q.db.QueryRow(ctx, `SELECT seq FROM train_job_events WHERE job_id = ? AND id = ?`, jobID, after).Scan(&from); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil, false, fmt.Errorf("%w: event %s", ErrNotFound, after)
			}
			return nil, false, err
		}
	}
	rows, err := q.db.Query(ctx, `SELECT seq, id, type, data, created_at FROM train_job_events WHERE job_id = ? AND seq > ? ORDER BY seq LIMIT ?`, jobID, from, limit+1)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var data string
		if err := rows.Scan(&e.seq, &e.ID, &e.Type, &data, &e.CreatedAt); err != nil {
			return nil, false, err
		}
		e.Data = json.RawMessage(data)
		out = append(out, e)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, rows.Err()
}

// Wait returns a channel closed at the job's next event in this process (followers also poll,
// for events written by workers in other processes).
func (q *Queue) Wait(jobID string) <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	ch := make(chan struct{})
	q.waiters[jobID] = append(q.waiters[jobID], ch)
	return ch
}

// Runner runs one job. progress reports events; Runner returns the step the job produced (if
// any) or an error, which fails the job with its message. ctx is cancelled when the job is
// cancelled or its lease is lost.
type Runner func(ctx context.Context, j Job, progress func(typ string, data any)) (step *int, err error)

// ErrCancelled is what a Runner returns when it stopped because its context was cancelled
// for a cancel request.
var ErrCancelled = errors.New("the job was cancelled")

// Work runs n workers until ctx ends, each claiming jobs and running them with run.
func (q *Queue) Work(ctx context.Context, n int, owner string, run Runner, log *slog.Logger) {
	var wg sync.WaitGroup
	for i := 0; i < max(n, 1); i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			q.worker(ctx, fmt.Sprintf("%s/%d", owner, i), run, log)
		}(i)
	}
	wg.Wait()
}

func (q *Queue) worker(ctx context.Context, owner string, run Runner, log *slog.Logger) {
	for ctx.Err() == nil {
		j, err := q.Claim(ctx, owner)
		if err != nil {
			if !errors.Is(err, ErrNotFound) && ctx.Err() == nil {
				log.Error("jobs: claim failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		q.runOne(ctx, j, owner, run, log)
	}
}

func (q *Queue) runOne(ctx context.Context, j Job, owner string, run Runner, log *slog.Logger) {
	// The store writes of the job (events, its end, handing it back) must land while the
	// process shuts down, after ctx ends.
	wctx := context.WithoutCancel(ctx)
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cancelled := false
	var mu sync.Mutex
	done := make(chan struct{})
	go func() { // lease renewal and cancel requests
		t := time.NewTicker(max(q.Lease/3, 50*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-jctx.Done():
				return
			case <-t.C:
				if !q.Renew(jctx, j.ID, owner) {
					cancel()
					return
				}
				if q.CancelRequested(jctx, j.ID) {
					mu.Lock()
					cancelled = true
					mu.Unlock()
					cancel()
				}
			}
		}
	}()
	start := time.Now()
	log.Info("jobs: running", "job", j.ID, "kind", j.Kind, "model", j.ModelID, "attempt", j.Attempt)
	step, err := run(jctx, j, func(typ string, data any) {
		if _, err := q.AddEvent(wctx, j.ID, typ, data); err != nil {
			log.Error("jobs: event not recorded", "job", j.ID, "type", typ, "err", err)
		}
	})
	close(done)
	mu.Lock()
	wasCancelled := cancelled || q.CancelRequested(wctx, j.ID)
	mu.Unlock()
	switch {
	case err == nil:
		// Finished (its checkpoint saved), even when the shutdown came meanwhile.
		if ferr := q.Finish(wctx, j.ID, owner, Succeeded, "", step); ferr != nil {
			log.Error("jobs: not finished", "job", j.ID, "err", ferr)
		}
		log.Info("jobs: succeeded", "job", j.ID, "seconds", time.Since(start).Seconds())
	case wasCancelled:
		if ferr := q.Finish(wctx, j.ID, owner, Cancelled, "cancelled", nil); ferr != nil {
			log.Error("jobs: not finished", "job", j.ID, "err", ferr)
		}
		log.Info("jobs: cancelled", "job", j.ID)
	case ctx.Err() != nil:
		// Shutting down: the run stopped at a step boundary; the job goes back to the queue
		// now rather than when its lease expires.
		rctx, rcancel := context.WithTimeout(wctx, 10*time.Second)
		defer rcancel()
		if rerr := q.Release(rctx, j.ID, owner); rerr != nil {
			log.Error("jobs: not handed back; it runs again when its lease expires", "job", j.ID, "err", rerr)
			return
		}
		log.Info("jobs: handed back to the queue (shutting down)", "job", j.ID, "attempt", j.Attempt)
	default:
		if ferr := q.Finish(wctx, j.ID, owner, Failed, err.Error(), nil); ferr != nil {
			log.Error("jobs: not finished", "job", j.ID, "err", ferr)
		}
		log.Warn("jobs: failed", "job", j.ID, "err", err)
	}
}

package training

import (
	"context"
	"errors"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/jobs"
)

// Job finds a job of entity (another entity's is not found, like a missing one).
func (s *Service) Job(ctx context.Context, entity, id string) (jobs.Job, error) {
	j, err := s.Queue.Get(ctx, id)
	if errors.Is(err, jobs.ErrNotFound) || (err == nil && j.Entity != entity) {
		return jobs.Job{}, fault.NotFound("training_job_id", "Training job %s not found", id)
	}
	return j, err
}

// JobFilter selects jobs for ListJobs.
type JobFilter struct {
	Model  string // a model id or <entity>/<project>/<name> ("" = every model)
	Status string // "" = every status
	Before string // a job id: only older jobs
	Limit  int
}

// ListJobs lists entity's jobs, newest first, and whether more follow.
func (s *Service) ListJobs(ctx context.Context, entity string, f JobFilter) ([]jobs.Job, bool, error) {
	o := jobs.ListOptions{Status: f.Status, Before: f.Before, Limit: f.Limit}
	switch f.Status {
	case "", jobs.Queued, jobs.Running, jobs.Succeeded, jobs.Failed, jobs.Cancelled:
	default:
		return nil, false, fault.Invalid("status", "status must be QUEUED, RUNNING, SUCCEEDED, FAILED or CANCELLED, got %q", f.Status)
	}
	if f.Model != "" {
		m, err := s.Model(ctx, entity, f.Model)
		if err != nil {
			return nil, false, err
		}
		o.ModelID = m.ID
	}
	return s.Queue.List(ctx, entity, o)
}

// CancelJob cancels a job of entity (see jobs.Queue.Cancel).
func (s *Service) CancelJob(ctx context.Context, entity, id string) (jobs.Job, error) {
	j, err := s.Job(ctx, entity, id)
	if err != nil {
		return j, err
	}
	return s.Queue.Cancel(ctx, j.ID)
}

// JobEvents lists a job's events after the event with id after; an unknown cursor is a
// fault of after.
func (s *Service) JobEvents(ctx context.Context, j jobs.Job, after string, limit int) ([]jobs.Event, bool, error) {
	evs, more, err := s.Queue.Events(ctx, j.ID, after, limit)
	if errors.Is(err, jobs.ErrNotFound) {
		return nil, false, fault.Invalid("after", "after %q is not an event of this job", after)
	}
	return evs, more, err
}

package training

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/train"
)

// event is one progress call of a run.
type event struct {
	typ  string
	data any
}

// runUntil runs job j, cancelling its context after its stop-th gradient step (0: never);
// atStop runs then, before the cancel.
func runUntil(t *testing.T, s *Service, j jobs.Job, stop int, atStop func()) ([]event, *int, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var evs []event
	n := 0
	step, err := s.Run(ctx, j, func(typ string, data any) {
		evs = append(evs, event{typ, data})
		if typ == jobs.EventStep {
			if n++; n == stop {
				if atStop != nil {
					atStop()
				}
				cancel()
			}
		}
	})
	return evs, step, err
}

// steps lists the step numbers of the gradient_step events, and the from_step of a
// training_resumed event (-1 when none).
func steps(evs []event) ([]int, int) {
	var out []int
	from := -1
	for _, e := range evs {
		switch e.typ {
		case jobs.EventStep:
			out = append(out, e.data.(train.StepMetrics).Step)
		case jobs.EventResumed:
			from = e.data.(map[string]any)["from_step"].(int)
		}
	}
	return out, from
}

// TestSFTJobResumes: an SFT job stopped at a step boundary by a shutdown saves its state,
// and its next run goes on from the next step; the state is dropped when the job ends. A
// state that no longer fits (the data changed; the model's checkpoint moved on) is dropped
// and the job starts over; a job the user cancelled keeps none; the states of a model's
// other jobs are dropped when one of its jobs starts.
func TestSFTJobResumes(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	m, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	data := filepath.Join(s.DataRoot, "d.jsonl")
	if err := os.WriteFile(data, []byte(sftLines), 0o644); err != nil {
		t.Fatal(err)
	}
	// 2 examples, batch 1, 4 epochs: 8 steps.
	req := SFTRequest{TrainingDataURL: "d.jsonl", Config: json.RawMessage(`{"learning_rate":0.01,"epochs":4,"batch_size":1}`)}
	newJob := func() jobs.Job {
		j, err := s.CreateSFTJob(ctx, m, req)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	hasState := func(j jobs.Job) bool {
		_, err := s.Reg.ResumePath(ctx, m.ID, j.ID)
		if err != nil && !errors.Is(err, registry.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	j := newJob()
	evs, _, err := runUntil(t, s, j, 3, nil)
	if !errors.Is(err, jobs.ErrCancelled) || !hasState(j) {
		t.Fatalf("stopped run: %v, state %v, events %v", err, hasState(j), evs)
	}
	evs, step, err := runUntil(t, s, j, 0, nil)
	if err != nil || step == nil || *step != 1 {
		t.Fatalf("resumed run: %v %v", step, err)
	}
	got, from := steps(evs)
	if from != 3 || len(got) != 5 || got[0] != 4 || got[4] != 8 {
		t.Fatalf("resumed from %d with steps %v", from, got)
	}
	if hasState(j) {
		t.Fatal("the finished job's state is left")
	}

	// The data changes between the runs: the state does not fit, the job starts over.
	j = newJob()
	if _, _, err := runUntil(t, s, j, 2, nil); !errors.Is(err, jobs.ErrCancelled) || !hasState(j) {
		t.Fatalf("stopped run: %v", err)
	}
	if err := os.WriteFile(data, []byte(sftLines+`{"messages":[{"role":"user","content":"Capital of Chad?"},{"role":"assistant","content":"N'Djamena."}]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	evs, step, err = runUntil(t, s, j, 0, nil)
	if got, from := steps(evs); err != nil || *step != 2 || from != -1 || len(got) != 12 || got[0] != 1 {
		t.Fatalf("after the data changed: %v %v, resumed from %d, steps %v", step, err, from, got)
	}
	if err := os.WriteFile(data, []byte(sftLines), 0o644); err != nil {
		t.Fatal(err)
	}

	// Another job of the model makes a checkpoint meanwhile: the state is of step 2's run.
	j = newJob()
	if _, _, err := runUntil(t, s, j, 2, nil); !errors.Is(err, jobs.ErrCancelled) || !hasState(j) {
		t.Fatalf("stopped run: %v", err)
	}
	if err := train.SaveCheckpoint(s.Reg.CheckpointDir(m.ID, 3), mustLatest(t, s, m.ID), train.Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reg.AddCheckpoint(ctx, m.ID, 3, nil); err != nil {
		t.Fatal(err)
	}
	evs, step, err = runUntil(t, s, j, 0, nil)
	if got, from := steps(evs); err != nil || *step != 4 || from != -1 || len(got) != 8 {
		t.Fatalf("after another checkpoint: %v %v, resumed from %d, steps %v", step, err, from, got)
	}

	// Cancelled by its user: no state. A state left by a job that ended otherwise is
	// dropped when the model's next job starts.
	j = newJob()
	if _, _, err := runUntil(t, s, j, 2, func() { _, _ = s.Queue.Cancel(ctx, j.ID) }); !errors.Is(err, jobs.ErrCancelled) || hasState(j) {
		t.Fatalf("cancelled run: %v, state %v", err, hasState(j))
	}
	left := newJob()
	if _, _, err := runUntil(t, s, left, 1, nil); !errors.Is(err, jobs.ErrCancelled) || !hasState(left) {
		t.Fatalf("stopped run: %v", err)
	}
	if _, _, err := runUntil(t, s, newJob(), 1, nil); !errors.Is(err, jobs.ErrCancelled) || hasState(left) {
		t.Fatalf("another job's run: %v; the earlier job's state left: %v", err, hasState(left))
	}
}

// mustLatest loads the model's latest adapter.
func mustLatest(t *testing.T, s *Service, modelID string) *model.LoRA {
	t.Helper()
	ctx := context.Background()
	c, err := s.Reg.Latest(ctx, modelID)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := s.Reg.CheckpointPath(ctx, modelID, c.Step)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := s.Models.Get("tiny")
	a, _, err := train.LoadCheckpoint(dir, &base.Model.Config)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

package training

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/train"
)

// An SFT job that stops in its middle goes on from where it stopped when it runs again. Its
// run saves a resume state (the adapter, the optimizer state, and how many of the plan's
// steps are done: registry.ResumeDir) when a shutdown stops it at a step boundary, and every
// SFTSaveEvery while it trains (so that a worker that dies loses at most that much). The
// next run of the job reads the state when it continues the same run: the job's, started
// from the same checkpoint of the model, with a plan of the same steps (the data, the
// shuffle's seed and the hyperparameters give the same fingerprint). It then trains from the
// next step on, and its result equals that of a run never stopped. A state that does not
// fit (or cannot be read) is dropped, with the reason logged, and the job starts over. A job
// that ends (succeeded, failed or cancelled) drops its state.

// resumeFile is the file of a resume state that says what it is.
const resumeFile = "resume.json"

// DefaultSFTSaveEvery is how often a running SFT job saves its resume state by default.
const DefaultSFTSaveEvery = 5 * time.Minute

// sftResume is resumeFile.
type sftResume struct {
	Job string `json:"job_id"`
	// FromStep is the model's checkpoint the job started from (0: a new adapter).
	FromStep int    `json:"from_checkpoint_step"`
	Done     int    `json:"steps_done"`
	Steps    int    `json:"num_steps"`
	Plan     string `json:"plan"` // train.SFTPlan.Fingerprint
	Attempt  int    `json:"attempt"`
	SavedAt  string `json:"saved_at"`
}

// loadResume reads the job's resume state when it continues the run want describes:
// registry.ErrNotFound when there is none, another error saying why it does not fit.
func (s *Service) loadResume(ctx context.Context, m registry.Model, jobID string, cfg *model.Config, want sftResume) (*model.LoRA, *train.AdamW, sftResume, error) {
	var got sftResume
	dir, err := s.Reg.ResumePath(ctx, m.ID, jobID)
	if err != nil {
		return nil, nil, got, err
	}
	js, err := os.ReadFile(filepath.Join(dir, resumeFile))
	if err != nil {
		return nil, nil, got, fmt.Errorf("its resume state: %w", err)
	}
	if err := json.Unmarshal(js, &got); err != nil {
		return nil, nil, got, fmt.Errorf("its resume state: %w", err)
	}
	switch {
	case got.Job != want.Job:
		return nil, nil, got, fmt.Errorf("the resume state is of job %s", got.Job)
	case got.FromStep != want.FromStep:
		return nil, nil, got, fmt.Errorf("the resume state continues checkpoint step %d of the model, whose latest is now step %d", got.FromStep, want.FromStep)
	case got.Plan != want.Plan || got.Steps != want.Steps:
		return nil, nil, got, fmt.Errorf("the job's steps differ from those of its resume state (its training data changed)")
	case got.Done < 1 || got.Done >= got.Steps:
		return nil, nil, got, fmt.Errorf("the resume state says %d of %d steps are done", got.Done, got.Steps)
	}
	a, o, err := train.LoadCheckpoint(dir, cfg)
	if err != nil {
		return nil, nil, got, fmt.Errorf("its resume state: %w", err)
	}
	return a, o, got, nil
}

// saveResume writes and stores the job's resume state.
func (s *Service) saveResume(ctx context.Context, m registry.Model, st sftResume, a *model.LoRA, o *train.AdamW) error {
	st.SavedAt = db.FormatTime(time.Now())
	js, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	err = train.SaveCheckpoint(s.Reg.ResumeDir(m.ID, st.Job), a, train.Checkpoint{BaseModel: m.BaseModel, Optimizer: o,
		Files: map[string][]byte{resumeFile: append(js, '\n')}})
	if err != nil {
		return err
	}
	return s.Reg.StoreResume(ctx, m.ID, st.Job)
}

// dropResume forgets a job's resume state, logging a failure (a state left behind is
// dropped when the model's next job starts).
func (s *Service) dropResume(ctx context.Context, modelID, jobID string) {
	if err := s.Reg.DropResume(ctx, modelID, jobID); err != nil {
		s.logger().Warn("training: resume state not dropped", "job", jobID, "model", modelID, "err", err)
	}
}

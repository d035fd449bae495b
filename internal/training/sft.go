package training

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/train"
	"github.com/honeai/hone/internal/trainingdata"
)

// runSFT runs an SFT job from the model's checkpoint step (adapter and opt, nil for none) or
// from the job's resume state (resume.go), and returns the trained adapter, its optimizer state
// and the last step's metrics.
func (s *Service) runSFT(ctx context.Context, j jobs.Job, m registry.Model, base *serving.Served, chat *trainingdata.ChatTokenizer,
	step int, adapter *model.LoRA, opt *train.AdamW, sp SFTSpec, tokens []string, progress func(string, any)) (*model.LoRA, *train.AdamW, map[string]float64, error) {
	data, err := s.readData(ctx, m.Entity, sp.DataURL)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("training data: %w", err)
	}
	xs, err := trainingdata.ReadSFT(bytes.NewReader(data), chat, sp.Turns)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("training data: %w", err)
	}
	plan, err := train.PlanSFT(xs, sp.Config)
	if err != nil {
		return nil, nil, nil, err
	}
	log := s.logger().With("job", j.ID, "model", m.ID)
	if err := s.Reg.DropResumes(ctx, m.ID, j.ID); err != nil {
		log.Warn("training: resume states of the model's ended jobs not dropped", "err", err)
	}
	state := sftResume{Job: j.ID, FromStep: step, Steps: plan.Steps(), Plan: plan.Fingerprint()}
	first, from := 0, 0
	if a, o, saved, err := s.loadResume(ctx, m, j.ID, &base.Model.Config, state); err == nil {
		adapter, opt, first, from = a, o, saved.Done, saved.Attempt
	} else if !errors.Is(err, registry.ErrNotFound) {
		log.Warn("training: the job starts over", "reason", err)
		s.dropResume(ctx, m.ID, j.ID)
	}
	e, err := train.NewTrainer(base.Model, adapter)
	if err != nil {
		return nil, nil, nil, err
	}
	e.FrozenTokens = sp.Tokens == TokensOff
	progress(jobs.EventStarted, startedEvent(plan.Steps(), tokens))
	if first > 0 {
		msg := fmt.Sprintf("resumed after step %d of %d, from the state saved by attempt %d", first, plan.Steps(), from)
		progress(jobs.EventResumed, map[string]any{"from_step": first, "num_sequences": plan.Steps(), "message": msg})
		log.Info("training: "+msg, "attempt", j.Attempt)
	}
	state.Attempt, state.Done = j.Attempt, first
	saved, lastSave := first, time.Now()
	save := func(ctx context.Context, o *train.AdamW) {
		if state.Done == saved || state.Done == plan.Steps() {
			return
		}
		start := time.Now()
		if err := s.saveResume(ctx, m, state, e.A, o); err != nil {
			log.Warn("training: resume state not saved", "step", state.Done, "err", err)
			return
		}
		saved, lastSave = state.Done, time.Now()
		log.Info("training: resume state saved", "step", state.Done, "of", plan.Steps(), "seconds", time.Since(start).Seconds())
		// Progress: a run that saves past every earlier state starts the job's count of runs
		// in a row without progress again (jobs.MaxAttempts).
		progress(jobs.EventSaved, map[string]any{"step": state.Done, "num_sequences": plan.Steps()})
	}
	metrics := map[string]float64{}
	opt, err = train.RunSFTFrom(ctx, e, plan, opt, first, func(sm train.StepMetrics, o *train.AdamW) error {
		progress(jobs.EventStep, sm)
		metrics = map[string]float64{"loss": sm.Loss, "grad_norm": sm.GradNorm}
		state.Done = sm.Step // (a step that diverged ends the run, and its state is dropped)
		if s.SFTSaveEvery > 0 && time.Since(lastSave) >= s.SFTSaveEvery {
			save(ctx, o)
		}
		return nil
	})
	if err == nil {
		return e.A, opt, metrics, nil
	}
	if ctx.Err() != nil && !errors.Is(err, train.ErrDiverged) {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if s.Queue.CancelRequested(wctx, j.ID) {
			s.dropResume(wctx, m.ID, j.ID)
		} else {
			save(wctx, opt) // a shutdown: the next run goes on from here
		}
		return nil, nil, nil, jobs.ErrCancelled
	}
	s.dropResume(ctx, m.ID, j.ID)
	if errors.Is(err, train.ErrDiverged) {
		return nil, nil, nil, fmt.Errorf("%w; no checkpoint was saved", err)
	}
	return nil, nil, nil, err
}

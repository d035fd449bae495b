package training

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/train"
)

// queued is a job's payload in the queue: its spec, built when the job was created.
type queued struct {
	Version int      `json:"spec_version"` // 1; 0: a job queued by an older Hone (the request as sent)
	RL      *RLSpec  `json:"rl,omitempty"`
	SFT     *SFTSpec `json:"sft,omitempty"`
	// Evaluation is the evaluation to run on the job's new checkpoint (internal/evaluation
	// runs it; loop.go).
	Evaluation json.RawMessage `json:"evaluation,omitempty"`
	// FromStep trains from that checkpoint (0: a fresh adapter) instead of the latest.
	FromStep *int `json:"from_step,omitempty"`
}

// decodeQueued reads a job's spec. Jobs queued before specs were (the raw request as the
// payload) are validated again here.
func decodeQueued(j jobs.Job) (queued, error) {
	var q queued
	if err := json.Unmarshal(j.Payload, &q); err != nil {
		return q, fmt.Errorf("the job's payload is not readable: %v", err)
	}
	if q.Version == 0 {
		switch j.Kind {
		case "rl":
			var req RLRequest
			if err := json.Unmarshal(j.Payload, &req); err != nil {
				return q, fmt.Errorf("the job's payload is not readable: %v", err)
			}
			spec, err := NewRLSpec(req)
			if err != nil {
				return q, err
			}
			q.RL = &spec
		case "sft":
			var req SFTRequest
			if err := json.Unmarshal(j.Payload, &req); err != nil {
				return q, fmt.Errorf("the job's payload is not readable: %v", err)
			}
			spec, err := NewSFTSpec(req)
			if err != nil {
				return q, err
			}
			q.SFT = &spec
		}
	}
	if (q.RL == nil) == (q.SFT == nil) || (j.Kind == "rl") != (q.RL != nil) {
		return q, fmt.Errorf("the job of kind %q has no spec of that kind", j.Kind)
	}
	return q, nil
}

// Run executes one job (the jobs.Runner of the queue): it loads the model's latest adapter
// (or a fresh one) and its optimizer state, trains, and saves the next checkpoint.
func (s *Service) Run(ctx context.Context, j jobs.Job, progress func(string, any)) (*int, error) {
	q, err := decodeQueued(j)
	if err != nil {
		return nil, err
	}
	m, err := s.Reg.Get(ctx, j.ModelID)
	if err != nil {
		return nil, fmt.Errorf("the job's model is gone: %v", err)
	}
	base, ok := s.Models.Get(m.BaseModel)
	if !ok {
		return nil, fmt.Errorf("the base model %s is not served by this process", m.BaseModel)
	}
	if base.Template == nil {
		return nil, fmt.Errorf("the base model %s has no chat template: start the server with --chat-template %s=FILE", m.BaseModel, m.BaseModel)
	}
	// The weights stay mapped until this run has stopped, however the process shuts down.
	release, err := base.Acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	// A lora artifact a client logged into the model (ART's fork) is taken up now.
	s.syncLoRALogged(ctx, m, true)
	chat := chatTokenizer(base)
	step, next := 0, 1
	var opt *train.AdamW
	var adapter *model.LoRA
	c, err := s.Reg.Latest(ctx, m.ID)
	if err == nil {
		next = c.Step + 1
	}
	if q.FromStep != nil && err == nil { // train from another checkpoint (loop.go)
		if *q.FromStep == 0 {
			err = registry.ErrNotFound
		} else if c, err = s.Reg.Step(ctx, m.ID, *q.FromStep); errors.Is(err, registry.ErrNotFound) {
			return nil, fmt.Errorf("checkpoint step %d, which the job trains from, is gone", *q.FromStep)
		}
	}
	if err == nil {
		step = c.Step
		dir, err := s.Reg.CheckpointPath(ctx, m.ID, c.Step)
		if err != nil {
			return nil, fmt.Errorf("loading checkpoint step %d: %v", c.Step, err)
		}
		a, o, err := train.LoadCheckpoint(dir, &base.Model.Config)
		if err != nil {
			return nil, fmt.Errorf("loading checkpoint step %d: %v", c.Step, err)
		}
		adapter, opt = a, o
	} else if !errors.Is(err, registry.ErrNotFound) {
		return nil, err
	}
	if adapter == nil {
		rank, alpha := s.LoRARank, s.LoRAAlpha
		if rank == 0 {
			rank, alpha = 8, 16
		}
		if adapter, err = train.NewLoRA(&base.Model.Config, train.LoRAConfig{Rank: rank, Alpha: alpha, Seed: uint64(time.Now().UnixNano())}); err != nil {
			return nil, err
		}
	}
	mode := ""
	if q.RL != nil {
		mode = q.RL.Tokens
	} else {
		mode = q.SFT.Tokens
	}
	tokens, err := prepareTokenRows(base, chat, adapter, mode)
	if err != nil {
		return nil, err
	}
	metrics := map[string]float64{}
	switch {
	case q.RL != nil:
		plan := *q.RL
		cfg, groups := plan.Config, plan.Groups
		if cfg.KLPenaltyCoef > 0 {
			// The reference: kl_penalty_reference_step, or kl_penalty_step_lag steps before
			// the step trained from, or the base model (step 0).
			refStep := 0
			switch {
			case plan.KLRefStep != nil:
				refStep = *plan.KLRefStep
			case plan.KLStepLag != nil:
				refStep = max(0, step-*plan.KLStepLag)
			}
			if refStep > 0 {
				dir, err := s.Reg.CheckpointPath(ctx, m.ID, refStep)
				if err != nil {
					return nil, fmt.Errorf("the KL reference, checkpoint step %d: %v", refStep, err)
				}
				ref, _, err := train.LoadCheckpoint(dir, &base.Model.Config)
				if err != nil {
					return nil, fmt.Errorf("the KL reference, checkpoint step %d: %v", refStep, err)
				}
				cfg.RefAdapter = ref
			} else {
				cfg.RefAdapter = emptyAdapter(base.Model.Config.NumLayers) // the base model
			}
		}
		stdDev := train.RewardStdDev(groups)
		if plan.ScaleLRByStd {
			if cfg.LRMultiplier, err = s.rewardStdLRMultiplier(ctx, m.ID, step, stdDev); err != nil {
				return nil, err
			}
		}
		n := 0
		if train.Trainable(groups) {
			n = 1
		}
		progress(jobs.EventStarted, startedEvent(n, tokens))
		for i, g := range groups {
			if !g.Trainable() {
				progress(jobs.EventGroupSkipped, skippedGroup(i, g))
			}
		}
		e, err := train.NewTrainer(base.Model, adapter)
		if err != nil {
			return nil, err
		}
		e.FrozenTokens = mode == TokensOff
		met, o, err := train.RLStep(ctx, e, chat, groups, cfg, opt)
		switch {
		case errors.Is(err, train.ErrNothingToTrain):
			// As ART's backends do, the step still advances: its checkpoint is the adapter
			// unchanged.
			metrics = map[string]float64{"reward": met.Reward, "reward_std_dev": met.RewardStdDev}
		case errors.Is(err, train.ErrDiverged):
			progress(jobs.EventStep, met) // its non-finite numbers as strings
			return nil, fmt.Errorf("step %d: %v; no checkpoint was saved", step+1, err)
		case err != nil:
			if ctx.Err() != nil {
				return nil, jobs.ErrCancelled
			}
			return nil, err
		default:
			opt = o
			progress(jobs.EventStep, met)
			metrics = map[string]float64{"reward": met.Reward, "reward_std_dev": met.RewardStdDev, "loss": met.Loss, "grad_norm": met.GradNorm}
		}
	case q.SFT != nil:
		if adapter, opt, metrics, err = s.runSFT(ctx, j, m, base, chat, step, adapter, opt, *q.SFT, tokens, progress); err != nil {
			return nil, err
		}
	}
	if ctx.Err() != nil {
		return nil, jobs.ErrCancelled
	}
	if err := train.SaveCheckpoint(s.Reg.CheckpointDir(m.ID, next), adapter, train.Checkpoint{BaseModel: m.BaseModel, Optimizer: opt}); err != nil {
		return nil, fmt.Errorf("saving checkpoint: %v", err)
	}
	if _, err := s.Reg.AddCheckpoint(ctx, m.ID, next, metrics); err != nil {
		return nil, err
	}
	if q.SFT != nil {
		s.dropResume(ctx, m.ID, j.ID)
	}
	s.syncLoRALogged(ctx, m, false)
	return &next, nil
}

// rewardStdLRMultiplier is ART's scale_learning_rate_by_reward_std_dev: a line fitted to the
// reward standard deviation of each step trained so far (recorded on the checkpoints) and of
// this one, the multiplier being its value at this step over its value at step 0 (1 with
// fewer than two steps or a line that starts at or below 0; never below 0).
func (s *Service) rewardStdLRMultiplier(ctx context.Context, modelID string, step int, current float64) (float64, error) {
	xs, ys := []float64{float64(step)}, []float64{current}
	for after := ""; ; {
		cs, more, err := s.Reg.Checkpoints(ctx, modelID, after, 100, "asc")
		if err != nil {
			return 0, err
		}
		for _, c := range cs {
			if v, ok := c.Metrics["reward_std_dev"]; ok && c.Step <= step {
				xs, ys = append(xs, float64(c.Step-1)), append(ys, v)
			}
		}
		if !more || len(cs) == 0 {
			break
		}
		after = cs[len(cs)-1].ID
	}
	slope, intercept, ok := fitLine(xs, ys)
	if !ok || intercept <= 0 {
		return 1, nil
	}
	return max(0, (slope*float64(step)+intercept)/intercept), nil
}

// fitLine is the least-squares line through the points; ok is false without two distinct x.
func fitLine(xs, ys []float64) (slope, intercept float64, ok bool) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	d := n*sxx - sx*sx
	if len(xs) < 2 || d <= 1e-12 {
		return 0, 0, false
	}
	slope = (n*sxy - sx*sy) / d
	return slope, (sy - slope*sx) / n, true
}

// startedEvent is the data of a training_started event: the job's sequences (SFT: steps)
// and, when it trains token rows, their tokens.
func startedEvent(n int, tokens []string) map[string]any {
	ev := map[string]any{"num_sequences": n}
	if len(tokens) > 0 {
		ev["trainable_tokens"] = tokens
	}
	return ev
}

// emptyAdapter adapts nothing: the base model, as a KL reference.
func emptyAdapter(layers int) *model.LoRA {
	a := &model.LoRA{Name: "base", Rank: 1, Scaling: 1, Layers: make([]map[string]*model.LoRAPair, layers)}
	for i := range a.Layers {
		a.Layers[i] = map[string]*model.LoRAPair{}
	}
	return a
}

// skippedGroup is the data of a group_skipped event: which group, and why it teaches nothing.
func skippedGroup(i int, g train.TrajectoryGroup) map[string]any {
	n := len(g.Trajectories)
	ev := map[string]any{"group_index": i, "num_trajectories": n}
	switch n {
	case 0:
		ev["message"] = fmt.Sprintf("trajectory group %d skipped: it has no trajectories", i)
	case 1:
		ev["reward"] = g.Trajectories[0].Reward
		ev["message"] = fmt.Sprintf("trajectory group %d skipped: its only trajectory has nothing to be compared with (reward %g), so its advantage is zero", i, g.Trajectories[0].Reward)
	default:
		ev["reward"] = g.Trajectories[0].Reward
		ev["message"] = fmt.Sprintf("trajectory group %d skipped: all %d trajectories have reward %g, so every advantage is zero and the group teaches nothing", i, n, g.Trajectories[0].Reward)
	}
	return ev
}

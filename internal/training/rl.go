package training

import (
	"context"
	"errors"
	"fmt"

	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/train"
	"github.com/honeai/hone/internal/trainingdata"
)

// runRL runs an RL job: one step of ART's training (train.RLStep) on its trajectory groups,
// from the model's checkpoint step (adapter, trained in place, and opt, nil for none), against
// the KL reference the spec names; it returns the optimizer state after the step and the
// checkpoint's metrics.
func (s *Service) runRL(ctx context.Context, m registry.Model, base *serving.Served, chat *trainingdata.ChatTokenizer,
	step int, adapter *model.LoRA, opt *train.AdamW, sp RLSpec, tokens []string, progress func(string, any)) (*train.AdamW, map[string]float64, error) {
	cfg, groups := sp.Config, sp.Groups
	if cfg.KLPenaltyCoef > 0 {
		// The reference: kl_penalty_reference_step, or kl_penalty_step_lag steps before
		// the step trained from, or the base model (step 0).
		refStep := 0
		switch {
		case sp.KLRefStep != nil:
			refStep = *sp.KLRefStep
		case sp.KLStepLag != nil:
			refStep = max(0, step-*sp.KLStepLag)
		}
		if refStep > 0 {
			dir, err := s.Reg.CheckpointPath(ctx, m.ID, refStep)
			if err != nil {
				return nil, nil, fmt.Errorf("the KL reference, checkpoint step %d: %w", refStep, err)
			}
			ref, _, err := train.LoadCheckpoint(dir, &base.Model.Config)
			if err != nil {
				return nil, nil, fmt.Errorf("the KL reference, checkpoint step %d: %w", refStep, err)
			}
			cfg.RefAdapter = ref
		} else {
			cfg.RefAdapter = emptyAdapter(base.Model.Config.NumLayers) // the base model
		}
	}
	stdDev := train.RewardStdDev(groups)
	if sp.ScaleLRByStd {
		var err error
		if cfg.LRMultiplier, err = s.rewardStdLRMultiplier(ctx, m.ID, step, stdDev); err != nil {
			return nil, nil, err
		}
	}
	n := 0
	if trainingdata.Trainable(groups) {
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
		return nil, nil, err
	}
	e.FrozenTokens = sp.Tokens == TokensOff
	met, o, err := train.RLStep(ctx, e, chat, groups, cfg, opt)
	switch {
	case errors.Is(err, train.ErrNothingToTrain):
		// As ART's backends do, the step still advances: its checkpoint is the adapter
		// unchanged.
		return opt, map[string]float64{"reward": met.Reward, "reward_std_dev": met.RewardStdDev}, nil
	case errors.Is(err, train.ErrDiverged):
		progress(jobs.EventStep, met) // its non-finite numbers as strings
		return nil, nil, fmt.Errorf("step %d: %w; no checkpoint was saved", step+1, err)
	case err != nil:
		if ctx.Err() != nil {
			return nil, nil, jobs.ErrCancelled
		}
		return nil, nil, err
	}
	progress(jobs.EventStep, met)
	return o, map[string]float64{"reward": met.Reward, "reward_std_dev": met.RewardStdDev, "loss": met.Loss, "grad_norm": met.GradNorm}, nil
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

// emptyAdapter adapts nothing: the base model, as a KL reference.
func emptyAdapter(layers int) *model.LoRA {
	a := &model.LoRA{Name: "base", Rank: 1, Scaling: 1, Layers: make([]map[string]*model.LoRAPair, layers)}
	for i := range a.Layers {
		a.Layers[i] = map[string]*model.LoRAPair{}
	}
	return a
}

// skippedGroup is the data of a group_skipped event: which group, and why it teaches nothing.
func skippedGroup(i int, g trainingdata.TrajectoryGroup) map[string]any {
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

package training

import (
	"context"
	"encoding/json"
	"time"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/trace"
)

// LogTrajectories stores trajectory groups in the model's trace project (one call per
// trajectory, op art.trajectory) and records {split}/reward and the mean of each trajectory
// metric as {split}/<metric> on the latest checkpoint.
func (s *Service) LogTrajectories(ctx context.Context, m registry.Model, split string, rawGroups []json.RawMessage) error {
	if split == "" {
		return fault.Invalid("split", "split is required (for example val or train)")
	}
	groups, err := ParseGroups(rawGroups)
	if err != nil {
		return err
	}
	sums, counts := map[string]float64{}, map[string]float64{}
	var calls []trace.RecordedCall
	project := m.Entity + "/" + m.Project
	now := time.Now()
	for gi, g := range groups {
		for ti, t := range g.Trajectories {
			sums["reward"] += t.Reward
			counts["reward"]++
			for k, v := range t.Metrics {
				sums[k] += v
				counts[k]++
			}
			if s.Trace == nil {
				continue
			}
			inputs, _ := json.Marshal(map[string]any{"messages_and_choices": t.MessagesAndChoices, "split": split, "group": gi, "index": ti, "model": m.Name})
			output, _ := json.Marshal(map[string]any{"reward": t.Reward, "metrics": t.Metrics})
			calls = append(calls, trace.RecordedCall{Project: project, OpName: "art.trajectory", Started: now, Ended: now,
				Attributes: map[string]any{"hone": map[string]any{"model_id": m.ID, "split": split}}, Inputs: inputs, Output: output})
		}
	}
	if s.Trace != nil {
		if _, err := s.Trace.RecordCalls(ctx, calls); err != nil {
			return err
		}
	}
	metrics := map[string]float64{}
	for k, v := range sums {
		metrics[split+"/"+k] = v / counts[k]
	}
	if c, err := s.Reg.Latest(ctx, m.ID); err == nil {
		return s.Reg.MergeMetrics(ctx, m.ID, c.Step, metrics)
	}
	return nil
}

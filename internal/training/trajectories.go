package training

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/db"
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
	var batch trace.CallCreateBatchReq
	project := m.Entity + "/" + m.Project
	now := db.FormatTime(time.Now())
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
			id, traceID := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
			inputs, _ := json.Marshal(map[string]any{"messages_and_choices": t.MessagesAndChoices, "split": split, "group": gi, "index": ti, "model": m.Name})
			output, _ := json.Marshal(map[string]any{"reward": t.Reward, "metrics": t.Metrics})
			attrs, _ := json.Marshal(map[string]any{"hone": map[string]any{"model_id": m.ID, "split": split}})
			st := trace.StartedCallSchemaForInsert{ProjectID: project, ID: &id, TraceID: &traceID, OpName: "art.trajectory", StartedAt: now, Attributes: attrs, Inputs: inputs}
			en := trace.EndedCallSchemaForInsert{ProjectID: project, ID: id, EndedAt: now, Output: output, Summary: json.RawMessage(`{}`), TraceID: &traceID, StartedAtHint: &now}
			var a, b trace.CallBatchItem
			a.Mode, a.Req.Start = "start", &st
			b.Mode, b.Req.End = "end", &en
			batch.Batch = append(batch.Batch, a, b)
		}
	}
	if len(batch.Batch) > 0 {
		if _, err := s.Trace.CallUpsertBatch(ctx, batch, func(string, string) error { return nil }); err != nil {
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

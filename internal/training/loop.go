package training

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/trace"
)

// What the improvement loop (internal/evaluation, internal/loop) needs of training: a job
// that names an evaluation to run on its new checkpoint, a job that trains from a chosen
// checkpoint rather than the latest, training run inline as part of another job (a policy
// run), and training data read by URL.

// EvaluationChecker validates the evaluation a training job names (internal/evaluation):
// evaluation is the request's field (an Evaluation ref, or an evaluation's fields), promote
// an alias to move by its rule; the answer is what the job's payload keeps (nil: none).
type EvaluationChecker interface {
	CheckJobEvaluation(ctx context.Context, m registry.Model, evaluation json.RawMessage, promote string) (json.RawMessage, error)
}

// jobEvaluation checks a request's evaluation and promote fields.
func (s *Service) jobEvaluation(ctx context.Context, m registry.Model, evaluation json.RawMessage, promote string) (json.RawMessage, error) {
	if (len(evaluation) == 0 || string(evaluation) == "null") && promote == "" {
		return nil, nil
	}
	if s.Evaluations == nil {
		return nil, fault.Invalid("evaluation", "this server runs no evaluations")
	}
	return s.Evaluations.CheckJobEvaluation(ctx, m, evaluation, promote)
}

// JobEvaluation is the evaluation a training job's payload names (nil: none).
func JobEvaluation(j jobs.Job) json.RawMessage {
	var q struct {
		Evaluation json.RawMessage `json:"evaluation"`
	}
	if json.Unmarshal(j.Payload, &q) != nil || len(q.Evaluation) == 0 || string(q.Evaluation) == "null" {
		return nil
	}
	return q.Evaluation
}

// ReadDataURL checks a data URL of entity as training_data_url is checked (a fault of
// param) and reads it.
func (s *Service) ReadDataURL(ctx context.Context, param, entity, u string) ([]byte, error) {
	if err := s.checkDataURLOf(ctx, param, entity, u); err != nil {
		return nil, err
	}
	data, err := s.readData(ctx, entity, u)
	if err != nil {
		return nil, fault.Invalid(param, "%s: %v", param, err)
	}
	return data, nil
}

// InlineJob is a training run inside another job (a policy run): an SFT job's request
// (SFT) or an RL job's (RL), trained from checkpoint FromStep (0: a fresh adapter on the
// base model; nil: the latest).
type InlineJob struct {
	SFT      *SFTRequest
	RL       *RLRequest
	FromStep *int
}

// TrainInline runs a training run as part of job j (its id keys an SFT run's resume
// state; its model is the one trained) and returns the checkpoint step it saved. The request
// is validated as a job's would be when created.
func (s *Service) TrainInline(ctx context.Context, j jobs.Job, in InlineJob, progress func(string, any)) (*int, error) {
	m, err := s.Reg.Get(ctx, j.ModelID)
	if err != nil {
		return nil, err
	}
	q := queued{Version: 1, FromStep: in.FromStep}
	kind := "sft"
	switch {
	case in.SFT != nil:
		spec, err := NewSFTSpec(*in.SFT)
		if err != nil {
			return nil, err
		}
		if err := s.checkDataURL(ctx, m.Entity, spec.DataURL); err != nil {
			return nil, err
		}
		q.SFT = &spec
	case in.RL != nil:
		kind = "rl"
		req := *in.RL
		if req.TrajectoryGroupsURL != "" {
			data, err := s.ReadDataURL(ctx, "trajectory_groups_url", m.Entity, req.TrajectoryGroupsURL)
			if err != nil {
				return nil, err
			}
			for _, line := range splitLines(data) {
				req.TrajectoryGroups = append(req.TrajectoryGroups, line)
			}
			req.TrajectoryGroupsURL = ""
		}
		spec, err := NewRLSpec(req)
		if err != nil {
			return nil, err
		}
		q.RL = &spec
	default:
		return nil, fault.Invalid("", "a training run needs an SFT or an RL request")
	}
	payload, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	run := j
	run.Kind, run.Payload = kind, payload
	return s.Run(ctx, run, progress)
}

// splitLines are the non-empty lines of JSONL data.
func splitLines(data []byte) []json.RawMessage {
	var out []json.RawMessage
	start := 0
	for i := 0; i <= len(data); i++ {
		if i == len(data) || data[i] == '\n' {
			line := data[start:i]
			start = i + 1
			trimmed := false
			for _, c := range line {
				if c != ' ' && c != '\t' && c != '\r' {
					trimmed = true
					break
				}
			}
			if trimmed {
				out = append(out, json.RawMessage(append([]byte(nil), line...)))
			}
		}
	}
	return out
}

// CheckFromCalls validates a datasets/from-calls request without reading any call: its
// project, name, kind, limit, feedback filter and query (a training policy's, checked when
// it is set).
func CheckFromCalls(req FromCallsRequest) error {
	if err := validName("project", req.Project); err != nil {
		return err
	}
	switch req.Kind {
	case "", "sft", "rl":
	default:
		return fault.Invalid("kind", "kind must be sft or rl, got %q", req.Kind)
	}
	if req.Name != "" {
		if err := validName("name", req.Name); err != nil {
			return err
		}
	}
	if req.Limit != nil && (*req.Limit < 1 || *req.Limit > maxFromCalls) {
		return fault.Invalid("limit", "limit must be from 1 to %d, got %d", maxFromCalls, *req.Limit)
	}
	if _, err := parseFeedbackFilter(req.Feedback); err != nil {
		return err
	}
	for i, op := range req.OpNames {
		if op == "" || strings.ContainsAny(op, " \t\n") {
			return fault.Invalid(fmt.Sprintf("op_names[%d]", i), "op_names[%d] %q is not an op name", i, op)
		}
	}
	_, err := trace.ParseQuery(req.Query)
	return err
}

// CheckRLConfig validates an RL job's experimental_config (a training policy's).
func CheckRLConfig(raw json.RawMessage) error {
	_, err := parseRLConfig(raw)
	return err
}

// MatchesFeedback reports whether a call's feedback (as include_feedback gives it, the
// call's summary) matches a datasets/from-calls feedback filter (nil: any feedback), the way
// DatasetFromCalls keeps calls; rl also asks for a reward (rewardOf).
func MatchesFeedback(summary json.RawMessage, filter json.RawMessage, rl bool) bool {
	fb := callFeedback(summary)
	if len(fb) == 0 {
		return false
	}
	ff, err := parseFeedbackFilter(filter)
	if err != nil {
		return false
	}
	if ff != nil && !ff.matches(fb) {
		return false
	}
	if rl {
		_, ok := rewardOf(fb)
		return ok
	}
	return true
}

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
	"github.com/honeai/hone/internal/serving"
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
		return q, fmt.Errorf("the job's payload is not readable: %w", err)
	}
	if q.Version == 0 {
		switch j.Kind {
		case "rl":
			var req RLRequest
			if err := json.Unmarshal(j.Payload, &req); err != nil {
				return q, fmt.Errorf("the job's payload is not readable: %w", err)
			}
			spec, err := NewRLSpec(req)
			if err != nil {
				return q, err
			}
			q.RL = &spec
		case "sft":
			var req SFTRequest
			if err := json.Unmarshal(j.Payload, &req); err != nil {
				return q, fmt.Errorf("the job's payload is not readable: %w", err)
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
// (or a fresh one) and its optimizer state (loadStart), trains (runRL in rl.go, runSFT in
// sft.go), and saves the next checkpoint.
func (s *Service) Run(ctx context.Context, j jobs.Job, progress func(string, any)) (*int, error) {
	q, err := decodeQueued(j)
	if err != nil {
		return nil, err
	}
	m, err := s.Reg.Get(ctx, j.ModelID)
	if err != nil {
		return nil, fmt.Errorf("the job's model is gone: %w", err)
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
	step, next, adapter, opt, err := s.loadStart(ctx, m, base, q.FromStep)
	if err != nil {
		return nil, err
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
	var metrics map[string]float64
	if q.RL != nil {
		opt, metrics, err = s.runRL(ctx, m, base, chat, step, adapter, opt, *q.RL, tokens, progress)
	} else {
		adapter, opt, metrics, err = s.runSFT(ctx, j, m, base, chat, step, adapter, opt, *q.SFT, tokens, progress)
	}
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, jobs.ErrCancelled
	}
	if err := train.SaveCheckpoint(s.Reg.CheckpointDir(m.ID, next), adapter, train.Checkpoint{BaseModel: m.BaseModel, Optimizer: opt}); err != nil {
		return nil, fmt.Errorf("saving checkpoint: %w", err)
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

// loadStart loads what a job trains from: the model's latest checkpoint, or the one the job
// names (fromStep; 0: none), with its optimizer state, or a fresh adapter. step is that
// checkpoint's (0: none), next the step of the checkpoint the job saves.
func (s *Service) loadStart(ctx context.Context, m registry.Model, base *serving.Served, fromStep *int) (step, next int, adapter *model.LoRA, opt *train.AdamW, err error) {
	step, next = 0, 1
	c, err := s.Reg.Latest(ctx, m.ID)
	if err == nil {
		next = c.Step + 1
	}
	if fromStep != nil && err == nil { // train from another checkpoint (loop.go)
		if *fromStep == 0 {
			err = registry.ErrNotFound
		} else if c, err = s.Reg.Step(ctx, m.ID, *fromStep); errors.Is(err, registry.ErrNotFound) {
			return 0, 0, nil, nil, fmt.Errorf("checkpoint step %d, which the job trains from, is gone", *fromStep)
		}
	}
	if err == nil {
		step = c.Step
		dir, err := s.Reg.CheckpointPath(ctx, m.ID, c.Step)
		if err != nil {
			return 0, 0, nil, nil, fmt.Errorf("loading checkpoint step %d: %w", c.Step, err)
		}
		a, o, err := train.LoadCheckpoint(dir, &base.Model.Config)
		if err != nil {
			return 0, 0, nil, nil, fmt.Errorf("loading checkpoint step %d: %w", c.Step, err)
		}
		adapter, opt = a, o
	} else if !errors.Is(err, registry.ErrNotFound) {
		return 0, 0, nil, nil, err
	}
	if adapter == nil {
		rank, alpha := s.LoRARank, s.LoRAAlpha
		if rank == 0 {
			rank, alpha = 8, 16
		}
		if adapter, err = train.NewLoRA(&base.Model.Config, train.LoRAConfig{Rank: rank, Alpha: alpha, Seed: uint64(time.Now().UnixNano())}); err != nil {
			return 0, 0, nil, nil, err
		}
	}
	return step, next, adapter, opt, nil
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

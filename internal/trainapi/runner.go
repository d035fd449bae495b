package trainapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/trace"
	"github.com/honeai/hone/internal/train"
)

// rlConfigFields are the ExperimentalTrainingConfig fields Hone accepts; any other is a 400
// that names it.
var rlConfigFields = map[string]bool{
	"learning_rate": true, "loss_fn": true, "ppo": true, "epsilon": true, "epsilon_high": true,
	"scale_rewards": true, "normalize_advantages": true, "importance_sampling_level": true,
	"max_negative_advantage_importance_sampling_weight": true, "kl_penalty_coef": true,
	"kl_penalty_reference_step": true, "allow_training_without_logprobs": true,
	"precalculate_logprobs": true, "logprob_calculation_chunk_size": true, "plot_tensors": true,
	"packed_sequence_length": true, "max_grad_norm": true, "weight_decay": true,
	// Sent by the ART client; accepted at their defaults (null, 0, false), else a 400.
	"advantage_balance": true, "mask_prob_ratio": true, "kimi_k2_tau": true,
	"truncated_importance_sampling": true, "kl_penalty_step_lag": true, "kl_penalty_source": true,
	"kl_ref_adapter_path": true, "num_trajectories_learning_rate_multiplier_power": true,
	"scale_learning_rate_by_reward_std_dev": true,
}

// atDefault are the accepted-only-at-default fields and their default JSON values.
var atDefault = map[string][]string{
	"advantage_balance": {"0", "0.0"}, "mask_prob_ratio": {"false"}, "kimi_k2_tau": {},
	"truncated_importance_sampling": {}, "kl_penalty_step_lag": {}, "kl_penalty_source": {},
	"kl_ref_adapter_path": {}, "num_trajectories_learning_rate_multiplier_power": {"0", "0.0"},
	"scale_learning_rate_by_reward_std_dev": {"false"},
}

type rlConfig struct {
	LearningRate        *float64 `json:"learning_rate"`
	LossFn              *string  `json:"loss_fn"`
	PPO                 *bool    `json:"ppo"`
	Epsilon             *float64 `json:"epsilon"`
	EpsilonHigh         *float64 `json:"epsilon_high"`
	ScaleRewards        *bool    `json:"scale_rewards"`
	NormalizeAdvantages *bool    `json:"normalize_advantages"`
	ISLevel             *string  `json:"importance_sampling_level"`
	MaxNegIS            *float64 `json:"max_negative_advantage_importance_sampling_weight"`
	KLCoef              *float64 `json:"kl_penalty_coef"`
	KLRefStep           *int     `json:"kl_penalty_reference_step"`
	AllowNoLogprobs     *bool    `json:"allow_training_without_logprobs"`
	PackedLen           *int     `json:"packed_sequence_length"`
	MaxGradNorm         *float64 `json:"max_grad_norm"`
	WeightDecay         *float64 `json:"weight_decay"`
}

func unknownFields(raw json.RawMessage, known map[string]bool, param string) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return apierror.BadRequest(param, "%s must be an object", param)
	}
	var bad []string
	for k := range m {
		if !known[k] {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return apierror.BadRequest(param, "%s has fields Hone does not support: %s", param, strings.Join(bad, ", "))
	}
	return nil
}

// parseRLConfig checks experimental_config and turns it into the trainer's configuration
// (the reference adapter is resolved when the job runs).
func parseRLConfig(raw json.RawMessage) (train.RLConfig, error) {
	cfg := train.RLConfig{ScaleRewards: true}
	if err := unknownFields(raw, rlConfigFields, "experimental_config"); err != nil {
		return cfg, err
	}
	var c rlConfig
	if len(raw) > 0 && string(raw) != "null" {
		if err := httpx.Unmarshal(raw, &c, httpx.DecodeOptions{}); err != nil {
			return cfg, err
		}
		var fields map[string]json.RawMessage
		json.Unmarshal(raw, &fields)
		var nonDefault []string
		for k, defaults := range atDefault {
			v, ok := fields[k]
			if !ok || string(v) == "null" {
				continue
			}
			isDefault := false
			for _, d := range defaults {
				isDefault = isDefault || strings.TrimSpace(string(v)) == d
			}
			if !isDefault {
				nonDefault = append(nonDefault, k)
			}
		}
		if len(nonDefault) > 0 {
			sort.Strings(nonDefault)
			return cfg, apierror.BadRequest("experimental_config", "experimental_config sets options Hone does not support (leave them unset): %s", strings.Join(nonDefault, ", "))
		}
	}
	if c.LearningRate != nil {
		if *c.LearningRate <= 0 || math.IsInf(*c.LearningRate, 0) {
			return cfg, apierror.BadRequest("experimental_config.learning_rate", "learning_rate must be positive")
		}
		cfg.LearningRate = *c.LearningRate
	}
	if c.PPO != nil && *c.PPO {
		cfg.Loss = "ppo"
	}
	if c.LossFn != nil {
		if *c.LossFn != "cispo" && *c.LossFn != "ppo" {
			return cfg, apierror.BadRequest("experimental_config.loss_fn", "loss_fn must be cispo or ppo, got %q", *c.LossFn)
		}
		cfg.Loss = *c.LossFn
	}
	if c.Epsilon != nil {
		cfg.Epsilon = *c.Epsilon
	}
	if c.EpsilonHigh != nil {
		cfg.EpsilonHigh = *c.EpsilonHigh
	}
	if c.ScaleRewards != nil {
		cfg.ScaleRewards = *c.ScaleRewards
	}
	if c.NormalizeAdvantages != nil {
		cfg.ScaleRewards = *c.NormalizeAdvantages
	}
	if c.ISLevel != nil {
		if *c.ISLevel != "token" && *c.ISLevel != "sequence" {
			return cfg, apierror.BadRequest("experimental_config.importance_sampling_level", "importance_sampling_level must be token or sequence, got %q", *c.ISLevel)
		}
		cfg.ImportanceSampling = *c.ISLevel
	}
	if c.MaxNegIS != nil {
		cfg.MaxNegativeAdvantageIS = *c.MaxNegIS
	}
	if c.KLCoef != nil {
		if *c.KLCoef < 0 {
			return cfg, apierror.BadRequest("experimental_config.kl_penalty_coef", "kl_penalty_coef must be non-negative")
		}
		cfg.KLPenaltyCoef = *c.KLCoef
	}
	if c.AllowNoLogprobs != nil {
		cfg.AllowWithoutLogprobs = *c.AllowNoLogprobs
	}
	if c.PackedLen != nil {
		cfg.MaxSeqLen = *c.PackedLen
	}
	if c.MaxGradNorm != nil {
		cfg.MaxGradNorm = *c.MaxGradNorm
	}
	if c.WeightDecay != nil {
		cfg.WeightDecay = *c.WeightDecay
	}
	return cfg, nil
}

func parseGroups(raw []json.RawMessage) ([]train.TrajectoryGroup, error) {
	out := make([]train.TrajectoryGroup, len(raw))
	for i, g := range raw {
		if err := json.Unmarshal(g, &out[i]); err != nil {
			return nil, apierror.BadRequest(fmt.Sprintf("trajectory_groups[%d]", i), "trajectory_groups[%d] is not a trajectory group: %v", i, err)
		}
		for k, t := range out[i].Trajectories {
			if t.Reward == nil {
				return nil, apierror.BadRequest(fmt.Sprintf("trajectory_groups[%d].trajectories[%d].reward", i, k), "trajectory_groups[%d].trajectories[%d].reward is required", i, k)
			}
			if len(t.MessagesAndChoices) == 0 {
				return nil, apierror.BadRequest(fmt.Sprintf("trajectory_groups[%d].trajectories[%d].messages_and_choices", i, k), "trajectory_groups[%d].trajectories[%d].messages_and_choices is required", i, k)
			}
		}
	}
	return out, nil
}

type sftConfig struct {
	BatchSize      json.RawMessage `json:"batch_size"`
	LearningRate   json.RawMessage `json:"learning_rate"`
	AssistantTurns *string         `json:"assistant_turns"`
	Epochs         *int            `json:"epochs"`
	MetricLogging  json.RawMessage `json:"metric_logging"`
}

var sftConfigFields = map[string]bool{"batch_size": true, "learning_rate": true, "assistant_turns": true, "epochs": true, "metric_logging": true}
var sftExperimentalFields = map[string]bool{"max_seq_len": true, "schedule": true, "warmup_steps": true, "weight_decay": true, "max_grad_norm": true, "seed": true, "shuffle": true}

type sftPlan struct {
	cfg   train.SFTConfig
	turns string
}

func parseSFTConfig(raw, experimental json.RawMessage) (sftPlan, error) {
	p := sftPlan{cfg: train.SFTConfig{MaxSeqLen: 2048}, turns: "all"}
	if err := unknownFields(raw, sftConfigFields, "config"); err != nil {
		return p, err
	}
	if err := unknownFields(experimental, sftExperimentalFields, "experimental_config"); err != nil {
		return p, err
	}
	var c sftConfig
	if len(raw) > 0 && string(raw) != "null" {
		if err := httpx.Unmarshal(raw, &c, httpx.DecodeOptions{}); err != nil {
			return p, err
		}
	}
	if len(c.BatchSize) > 0 && string(c.BatchSize) != "null" && string(c.BatchSize) != `"auto"` {
		var n int
		if json.Unmarshal(c.BatchSize, &n) != nil || n < 1 {
			return p, apierror.BadRequest("config.batch_size", "batch_size must be a positive integer or \"auto\", got %s", c.BatchSize)
		}
		p.cfg.BatchSize = n
	}
	if len(c.LearningRate) > 0 && string(c.LearningRate) != "null" {
		var one float64
		var list []float64
		switch {
		case json.Unmarshal(c.LearningRate, &one) == nil:
			list = []float64{one}
		case json.Unmarshal(c.LearningRate, &list) == nil && len(list) > 0:
		default:
			return p, apierror.BadRequest("config.learning_rate", "learning_rate must be a number or a non-empty list of numbers")
		}
		for _, v := range list {
			if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return p, apierror.BadRequest("config.learning_rate", "learning rates must be positive")
			}
		}
		p.cfg.LearningRates = list
	}
	if c.AssistantTurns != nil {
		if *c.AssistantTurns != "all" && *c.AssistantTurns != "last" {
			return p, apierror.BadRequest("config.assistant_turns", "assistant_turns must be all or last, got %q", *c.AssistantTurns)
		}
		p.turns = *c.AssistantTurns
	}
	if c.Epochs != nil {
		if *c.Epochs < 1 || *c.Epochs > 1000 {
			return p, apierror.BadRequest("config.epochs", "epochs must be from 1 to 1000")
		}
		p.cfg.Epochs = *c.Epochs
	}
	var x struct {
		MaxSeqLen   *int     `json:"max_seq_len"`
		Schedule    *string  `json:"schedule"`
		Warmup      *int     `json:"warmup_steps"`
		WeightDecay *float64 `json:"weight_decay"`
		MaxGradNorm *float64 `json:"max_grad_norm"`
		Seed        *uint64  `json:"seed"`
		Shuffle     *bool    `json:"shuffle"`
	}
	if len(experimental) > 0 && string(experimental) != "null" {
		if err := httpx.Unmarshal(experimental, &x, httpx.DecodeOptions{}); err != nil {
			return p, err
		}
	}
	if x.MaxSeqLen != nil {
		if *x.MaxSeqLen < 16 {
			return p, apierror.BadRequest("experimental_config.max_seq_len", "max_seq_len must be at least 16")
		}
		p.cfg.MaxSeqLen = *x.MaxSeqLen
	}
	if x.Schedule != nil {
		if !train.ValidSchedule(*x.Schedule) {
			return p, apierror.BadRequest("experimental_config.schedule", "schedule must be constant, linear or cosine, got %q", *x.Schedule)
		}
		p.cfg.Schedule = *x.Schedule
	}
	if x.Warmup != nil {
		p.cfg.Warmup = *x.Warmup
	}
	if x.WeightDecay != nil {
		p.cfg.WeightDecay = *x.WeightDecay
	}
	if x.MaxGradNorm != nil {
		p.cfg.MaxGradNorm = *x.MaxGradNorm
	}
	if x.Seed != nil {
		p.cfg.Seed = *x.Seed
	}
	if x.Shuffle != nil {
		p.cfg.Shuffle = *x.Shuffle
	}
	return p, nil
}

// checkDataURL validates training_data_url when the job is created: a weave:/// object ref of
// the caller's entity, an uploaded file (hone-file:///<id>), or a path under DataRoot.
func (s *Service) checkDataURL(ctx context.Context, entity, u string) error {
	const param = "training_data_url"
	switch {
	case u == "":
		return apierror.BadRequest(param, "training_data_url is required")
	case strings.HasPrefix(u, "weave:///"):
		ref, err := trace.ParseRef(u)
		if err != nil || ref.Kind != "object" {
			return apierror.BadRequest(param, "training_data_url %q is not a weave:///<entity>/<project>/object/<name>:<digest> ref", u)
		}
		if ref.Entity != entity {
			return apierror.Forbidden(param, "this API key may only use data of entity %q", entity)
		}
		if s.Trace == nil {
			return apierror.BadRequest(param, "this server has no trace store to read %s from", u)
		}
	case strings.HasPrefix(u, "hone-file:///"):
		id := strings.TrimPrefix(u, "hone-file:///")
		if !strings.HasPrefix(id, "file-") || strings.ContainsAny(id, "/\\.") {
			return apierror.BadRequest(param, "training_data_url %q does not name an uploaded file", u)
		}
		if _, err := os.Stat(filepath.Join(s.FilesDir, entity, id+".jsonl")); err != nil {
			return apierror.NotFound(param, "uploaded file %s not found", id)
		}
	default:
		p := strings.TrimPrefix(u, "file://")
		if _, err := s.localPath(p); err != nil {
			return apierror.BadRequest(param, "%v", err)
		}
	}
	return nil
}

// localPath accepts only a file under DataRoot (after resolving symlinks: no traversal).
func (s *Service) localPath(p string) (string, error) {
	if s.DataRoot == "" {
		return "", fmt.Errorf("training_data_url %q: local paths are not enabled on this server (start it with --train-data-root)", p)
	}
	root, err := filepath.EvalSymlinks(s.DataRoot)
	if err != nil {
		return "", fmt.Errorf("the training data root is not readable: %v", err)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("training_data_url %q: no such file", p)
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("training_data_url %q is outside the training data root", p)
	}
	return real, nil
}

// readData returns the JSONL bytes of training_data_url.
func (s *Service) readData(ctx context.Context, entity, u string) ([]byte, error) {
	switch {
	case strings.HasPrefix(u, "weave:///"):
		ref, err := trace.ParseRef(u)
		if err != nil {
			return nil, err
		}
		project := ref.Entity + "/" + ref.Project
		obj, err := s.Trace.ObjRead(ctx, trace.ObjReadReq{ProjectID: project, ObjectID: ref.Name, Digest: ref.Digest})
		if err != nil {
			return nil, fmt.Errorf("reading %s: %v", u, err)
		}
		var val struct {
			Rows string `json:"rows"`
		}
		json.Unmarshal(obj.Obj.Val, &val)
		table := val.Rows
		if table == "" {
			return nil, fmt.Errorf("%s is not a dataset (it has no rows table)", u)
		}
		digest := table[strings.LastIndex(table, "/")+1:]
		var buf bytes.Buffer
		for offset := 0; ; {
			limit := 1000
			off := offset
			res, err := s.Trace.TableQuery(ctx, trace.TableQueryReq{ProjectID: project, Digest: digest, Limit: &limit, Offset: &off})
			if err != nil {
				return nil, fmt.Errorf("reading the rows of %s: %v", u, err)
			}
			for _, row := range res.Rows {
				buf.Write(row.Val)
				buf.WriteByte('\n')
			}
			if len(res.Rows) < limit {
				break
			}
			offset += limit
		}
		return buf.Bytes(), nil
	case strings.HasPrefix(u, "hone-file:///"):
		return os.ReadFile(filepath.Join(s.FilesDir, entity, strings.TrimPrefix(u, "hone-file:///")+".jsonl"))
	}
	p, err := s.localPath(strings.TrimPrefix(u, "file://"))
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// Run executes one job (the jobs.Runner of the queue): it loads the model's latest adapter
// (or a fresh one) and its optimizer state, trains, and saves the next checkpoint.
func (s *Service) Run(ctx context.Context, j jobs.Job, progress func(string, any)) (*int, error) {
	m, err := s.Reg.Get(ctx, j.ModelID)
	if err != nil {
		return nil, fmt.Errorf("the job's model is gone: %v", err)
	}
	base, ok := s.Chat.Get(m.BaseModel)
	if !ok {
		return nil, fmt.Errorf("the base model %s is not served by this process", m.BaseModel)
	}
	if base.Template == nil {
		return nil, fmt.Errorf("the base model %s has no chat template", m.BaseModel)
	}
	chat := &train.Chat{Template: base.Template, Tok: base.Tok, Special: base.Tok.Config().SpecialTokens, Vocab: base.Model.Config.VocabSize}
	step := 0
	var opt *train.AdamW
	var adapter *model.LoRA
	if c, err := s.Reg.Latest(ctx, m.ID); err == nil {
		step = c.Step
		a, o, err := train.LoadCheckpoint(s.Reg.CheckpointDir(m.ID, c.Step), &base.Model.Config)
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
	e, err := train.NewEngine(base.Model, adapter)
	if err != nil {
		return nil, err
	}
	metrics := map[string]float64{}
	switch j.Kind {
	case "rl":
		var req rlJobReq
		json.Unmarshal(j.Payload, &req)
		cfg, err := parseRLConfig(req.ExperimentalConfig)
		if err != nil {
			return nil, err
		}
		groups, err := parseGroups(req.TrajectoryGroups)
		if err != nil {
			return nil, err
		}
		if cfg.KLPenaltyCoef > 0 {
			var x rlConfig
			json.Unmarshal(req.ExperimentalConfig, &x)
			refStep := 0
			if x.KLRefStep != nil {
				refStep = *x.KLRefStep
			}
			if refStep > 0 {
				ref, _, err := train.LoadCheckpoint(s.Reg.CheckpointDir(m.ID, refStep), &base.Model.Config)
				if err != nil {
					return nil, fmt.Errorf("kl_penalty_reference_step %d: %v", refStep, err)
				}
				cfg.RefAdapter = ref
			} else {
				cfg.RefAdapter = emptyAdapter(base.Model.Config.NumLayers) // the base model
			}
		}
		progress(jobs.EventStarted, map[string]any{"num_sequences": 1})
		met, o, err := train.RLStep(ctx, e, chat, groups, cfg, opt)
		if err != nil {
			return nil, err
		}
		opt = o
		progress(jobs.EventStep, met)
		metrics = map[string]float64{"reward": met.Reward, "loss": met.Loss, "grad_norm": met.GradNorm}
	case "sft":
		var req sftJobReq
		json.Unmarshal(j.Payload, &req)
		sp, err := parseSFTConfig(req.Config, req.ExperimentalConfig)
		if err != nil {
			return nil, err
		}
		data, err := s.readData(ctx, m.Entity, req.TrainingDataURL)
		if err != nil {
			return nil, fmt.Errorf("training data: %v", err)
		}
		xs, err := train.ReadSFT(bytes.NewReader(data), chat, sp.turns)
		if err != nil {
			return nil, fmt.Errorf("training data: %v", err)
		}
		plan, err := train.PlanSFT(xs, sp.cfg)
		if err != nil {
			return nil, err
		}
		progress(jobs.EventStarted, map[string]any{"num_sequences": plan.Steps()})
		opt, err = train.RunSFT(ctx, e, plan, opt, func(sm train.StepMetrics) error {
			progress(jobs.EventStep, sm)
			metrics = map[string]float64{"loss": sm.Loss, "grad_norm": sm.GradNorm}
			return nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, jobs.ErrCancelled
			}
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown job kind %q", j.Kind)
	}
	if ctx.Err() != nil {
		return nil, jobs.ErrCancelled
	}
	next := step + 1
	if err := train.SaveCheckpoint(s.Reg.CheckpointDir(m.ID, next), adapter, train.Checkpoint{BaseModel: m.BaseModel, Optimizer: opt}); err != nil {
		return nil, fmt.Errorf("saving checkpoint: %v", err)
	}
	if _, err := s.Reg.AddCheckpoint(ctx, m.ID, next, metrics); err != nil {
		return nil, err
	}
	return &next, nil
}

// logTrajectories stores trajectory groups in the model's trace project (one call per
// trajectory, op art.trajectory) and records {split}/reward and the mean of each trajectory
// metric as {split}/<metric> on the latest checkpoint.
func (s *Service) logTrajectories(w http.ResponseWriter, r *http.Request, m registry.Model) {
	var req struct {
		Split            string            `json:"split"`
		TrajectoryGroups []json.RawMessage `json:"trajectory_groups"`
	}
	if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{}); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if req.Split == "" {
		apierror.Write(w, r, apierror.BadRequest("split", "split is required (for example val or train)"))
		return
	}
	groups, err := parseGroups(req.TrajectoryGroups)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	sums, counts := map[string]float64{}, map[string]float64{}
	var batch trace.CallCreateBatchReq
	project := m.Entity + "/" + m.Project
	now := db.FormatTime(time.Now())
	for gi, g := range groups {
		for ti, t := range g.Trajectories {
			sums["reward"] += *t.Reward
			counts["reward"]++
			for k, v := range t.Metrics {
				sums[k] += v
				counts[k]++
			}
			if s.Trace == nil {
				continue
			}
			id, traceID := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
			inputs, _ := json.Marshal(map[string]any{"messages_and_choices": t.MessagesAndChoices, "split": req.Split, "group": gi, "index": ti, "model": m.Name})
			output, _ := json.Marshal(map[string]any{"reward": *t.Reward, "metrics": t.Metrics})
			attrs, _ := json.Marshal(map[string]any{"hone": map[string]any{"model_id": m.ID, "split": req.Split}})
			st := trace.StartedCallSchemaForInsert{ProjectID: project, ID: &id, TraceID: &traceID, OpName: "art.trajectory", StartedAt: now, Attributes: attrs, Inputs: inputs}
			en := trace.EndedCallSchemaForInsert{ProjectID: project, ID: id, EndedAt: now, Output: output, Summary: json.RawMessage(`{}`), TraceID: &traceID, StartedAtHint: &now}
			var a, b trace.CallBatchItem
			a.Mode, a.Req.Start = "start", &st
			b.Mode, b.Req.End = "end", &en
			batch.Batch = append(batch.Batch, a, b)
		}
	}
	if len(batch.Batch) > 0 {
		if _, err := s.Trace.CallUpsertBatch(r.Context(), batch, func(string, string) error { return nil }); err != nil {
			apierror.Write(w, r, err)
			return
		}
	}
	metrics := map[string]float64{}
	for k, v := range sums {
		metrics[req.Split+"/"+k] = v / counts[k]
	}
	if c, err := s.Reg.Latest(r.Context(), m.ID); err == nil {
		if err := s.Reg.MergeMetrics(r.Context(), m.ID, c.Step, metrics); err != nil {
			apierror.Write(w, r, err)
			return
		}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{})
}

// emptyAdapter adapts nothing: the base model, as a KL reference.
func emptyAdapter(layers int) *model.LoRA {
	a := &model.LoRA{Name: "base", Rank: 1, Scaling: 1, Layers: make([]map[string]*model.LoRAPair, layers)}
	for i := range a.Layers {
		a.Layers[i] = map[string]*model.LoRAPair{}
	}
	return a
}

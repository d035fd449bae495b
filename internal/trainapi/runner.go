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
	"reflect"
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

// rlConfig is ART's ExperimentalTrainingConfig: every field its clients send. A null field
// is its default.
type rlConfig struct {
	LearningRate        *float64 `json:"learning_rate"`
	LossFn              *string  `json:"loss_fn"`
	PPO                 *bool    `json:"ppo"`
	Epsilon             *float64 `json:"epsilon"`
	EpsilonHigh         *float64 `json:"epsilon_high"`
	AdvantageBalance    *float64 `json:"advantage_balance"`
	ScaleRewards        *bool    `json:"scale_rewards"`
	NormalizeAdvantages *bool    `json:"normalize_advantages"`
	ISLevel             *string  `json:"importance_sampling_level"`
	MaxNegIS            *float64 `json:"max_negative_advantage_importance_sampling_weight"`
	MaskProbRatio       *bool    `json:"mask_prob_ratio"`
	KimiK2Tau           *float64 `json:"kimi_k2_tau"`
	TruncatedIS         *float64 `json:"truncated_importance_sampling"`
	KLCoef              *float64 `json:"kl_penalty_coef"`
	KLRefStep           *int     `json:"kl_penalty_reference_step"`
	KLStepLag           *int     `json:"kl_penalty_step_lag"`
	KLSource            *string  `json:"kl_penalty_source"`
	KLRefAdapterPath    *string  `json:"kl_ref_adapter_path"`
	AllowNoLogprobs     *bool    `json:"allow_training_without_logprobs"`
	PrecalcLogprobs     *bool    `json:"precalculate_logprobs"`
	LogprobChunk        *int     `json:"logprob_calculation_chunk_size"`
	PlotTensors         *bool    `json:"plot_tensors"`
	PackedLen           *int     `json:"packed_sequence_length"`
	NumTrajLRPower      *float64 `json:"num_trajectories_learning_rate_multiplier_power"`
	ScaleLRByStd        *bool    `json:"scale_learning_rate_by_reward_std_dev"`
	MaxGradNorm         *float64 `json:"max_grad_norm"`
	WeightDecay         *float64 `json:"weight_decay"`
}

// rlConfigFields are the JSON names of rlConfig; any other field is a 400 that names it.
var rlConfigFields = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeOf(rlConfig{})
	for i := 0; i < t.NumField(); i++ {
		m[strings.Split(t.Field(i).Tag.Get("json"), ",")[0]] = true
	}
	return m
}()

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

// rlPlan is an RL job's configuration: the trainer's, and what the runner resolves when the
// job runs (the KL reference checkpoint, the learning rate scaled by the reward spread).
type rlPlan struct {
	cfg          train.RLConfig
	klRefStep    *int // kl_penalty_reference_step
	klStepLag    *int // kl_penalty_step_lag
	scaleLRByStd bool // scale_learning_rate_by_reward_std_dev
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// parseRLConfig checks experimental_config and turns it into the job's plan.
func parseRLConfig(raw json.RawMessage) (rlPlan, error) {
	p := rlPlan{cfg: train.RLConfig{ScaleRewards: true}}
	cfg := &p.cfg
	if err := unknownFields(raw, rlConfigFields, "experimental_config"); err != nil {
		return p, err
	}
	var c rlConfig
	if len(raw) > 0 && string(raw) != "null" {
		if err := httpx.Unmarshal(raw, &c, httpx.DecodeOptions{}); err != nil {
			return p, err
		}
	}
	bad := func(field, format string, args ...any) (rlPlan, error) {
		return p, apierror.BadRequest("experimental_config."+field, format, args...)
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"learning_rate", c.LearningRate}, {"epsilon", c.Epsilon}, {"epsilon_high", c.EpsilonHigh}, {"advantage_balance", c.AdvantageBalance},
		{"max_negative_advantage_importance_sampling_weight", c.MaxNegIS}, {"kimi_k2_tau", c.KimiK2Tau}, {"truncated_importance_sampling", c.TruncatedIS},
		{"kl_penalty_coef", c.KLCoef}, {"num_trajectories_learning_rate_multiplier_power", c.NumTrajLRPower}, {"max_grad_norm", c.MaxGradNorm}, {"weight_decay", c.WeightDecay}} {
		if f.v != nil && !finite(*f.v) {
			return bad(f.name, "%s must be a finite number", f.name)
		}
		if f.v != nil && *f.v < 0 && f.name != "advantage_balance" && f.name != "num_trajectories_learning_rate_multiplier_power" {
			return bad(f.name, "%s must not be negative", f.name)
		}
	}
	if c.LearningRate != nil {
		if *c.LearningRate <= 0 {
			return bad("learning_rate", "learning_rate must be positive")
		}
		cfg.LearningRate = *c.LearningRate
	}
	cfg.Loss = "cispo"
	if c.PPO != nil && *c.PPO {
		cfg.Loss = "ppo"
	}
	if c.LossFn != nil {
		if *c.LossFn != "cispo" && *c.LossFn != "ppo" {
			return bad("loss_fn", "loss_fn must be cispo or ppo, got %q", *c.LossFn)
		}
		if c.PPO != nil && *c.PPO != (*c.LossFn == "ppo") {
			return bad("loss_fn", "loss_fn %q and ppo %v disagree", *c.LossFn, *c.PPO)
		}
		cfg.Loss = *c.LossFn
	}
	if c.Epsilon != nil {
		cfg.Epsilon = *c.Epsilon
	}
	if c.EpsilonHigh != nil {
		cfg.EpsilonHigh = *c.EpsilonHigh
	}
	if c.AdvantageBalance != nil {
		if *c.AdvantageBalance < -1 || *c.AdvantageBalance > 1 {
			return bad("advantage_balance", "advantage_balance must be in [-1, 1], got %v", *c.AdvantageBalance)
		}
		cfg.AdvantageBalance = *c.AdvantageBalance
	}
	// ART centres rewards always and scales them by the group's spread when both
	// scale_rewards and its alias normalize_advantages are true (their default).
	if c.ScaleRewards != nil {
		cfg.ScaleRewards = *c.ScaleRewards
	}
	if c.NormalizeAdvantages != nil {
		cfg.ScaleRewards = cfg.ScaleRewards && *c.NormalizeAdvantages
	}
	if c.ISLevel != nil {
		switch *c.ISLevel {
		case "token", "sequence", "average", "geometric_average":
			cfg.ImportanceSampling = *c.ISLevel
		default:
			return bad("importance_sampling_level", "importance_sampling_level must be token, sequence, average or geometric_average, got %q", *c.ISLevel)
		}
	}
	if c.MaxNegIS != nil {
		cfg.MaxNegativeAdvantageIS = *c.MaxNegIS
	}
	if c.MaskProbRatio != nil {
		cfg.MaskProbRatio = *c.MaskProbRatio
	}
	if c.KimiK2Tau != nil {
		cfg.KimiK2Tau = *c.KimiK2Tau
	}
	if c.TruncatedIS != nil {
		if *c.TruncatedIS == 0 {
			return bad("truncated_importance_sampling", "truncated_importance_sampling must be positive (leave it null to turn it off)")
		}
		cfg.TruncatedIS = *c.TruncatedIS
	}
	if c.KLCoef != nil {
		cfg.KLPenaltyCoef = *c.KLCoef
	}
	if c.KLRefStep != nil {
		if *c.KLRefStep < 0 {
			return bad("kl_penalty_reference_step", "kl_penalty_reference_step must be >= 0")
		}
		p.klRefStep = c.KLRefStep
	}
	if c.KLStepLag != nil {
		if *c.KLStepLag < 1 {
			return bad("kl_penalty_step_lag", "kl_penalty_step_lag must be >= 1")
		}
		if c.KLRefStep != nil {
			return bad("kl_penalty_step_lag", "only one of kl_penalty_reference_step and kl_penalty_step_lag may be set")
		}
		p.klStepLag = c.KLStepLag
	}
	if c.KLSource != nil {
		if *c.KLSource != "current_learner" && *c.KLSource != "sample" {
			return bad("kl_penalty_source", "kl_penalty_source must be current_learner or sample, got %q", *c.KLSource)
		}
		cfg.KLPenaltySource = *c.KLSource
	}
	if c.KLRefAdapterPath != nil {
		return bad("kl_ref_adapter_path", "kl_ref_adapter_path is a path on the client's machine, which this server cannot read; name the reference checkpoint with kl_penalty_reference_step or kl_penalty_step_lag")
	}
	if c.AllowNoLogprobs != nil {
		cfg.AllowWithoutLogprobs = *c.AllowNoLogprobs
	}
	// precalculate_logprobs asks ART to compute the logprobs of the policy before its first
	// gradient step, for the steps after it; a Hone job takes one gradient step, whose policy
	// is that one, so either value trains the same.
	if c.LogprobChunk != nil && *c.LogprobChunk < 1 {
		return bad("logprob_calculation_chunk_size", "logprob_calculation_chunk_size must be positive")
	}
	if c.PlotTensors != nil && *c.PlotTensors {
		return bad("plot_tensors", "plot_tensors writes plots on the trainer's machine, which this server does not do; leave it false")
	}
	if c.PackedLen != nil {
		if *c.PackedLen < 16 {
			return bad("packed_sequence_length", "packed_sequence_length must be at least 16")
		}
		cfg.MaxSeqLen = *c.PackedLen
	}
	if c.NumTrajLRPower != nil {
		cfg.NumTrajectoriesLRPower = *c.NumTrajLRPower
	}
	if c.ScaleLRByStd != nil {
		p.scaleLRByStd = *c.ScaleLRByStd
	}
	if c.MaxGradNorm != nil {
		cfg.MaxGradNorm = *c.MaxGradNorm
	}
	if c.WeightDecay != nil {
		cfg.WeightDecay = *c.WeightDecay
	}
	return p, nil
}

// parseGroups reads trajectory groups; trajectories recorded as exchanges (ART's capture
// API) become messages and choices, and a missing reward is 0.0.
func parseGroups(raw []json.RawMessage) ([]train.TrajectoryGroup, error) {
	out := make([]train.TrajectoryGroup, len(raw))
	for i, g := range raw {
		if err := json.Unmarshal(g, &out[i]); err != nil {
			return nil, apierror.BadRequest(fmt.Sprintf("trajectory_groups[%d]", i), "trajectory_groups[%d] is not a trajectory group: %v", i, err)
		}
		for k := range out[i].Trajectories {
			if err := out[i].Trajectories[k].Normalize(); err != nil {
				where := fmt.Sprintf("trajectory_groups[%d].trajectories[%d]", i, k)
				var fe *train.FieldError
				if errors.As(err, &fe) {
					return nil, apierror.BadRequest(where+"."+fe.Field, "%s.%s %s", where, fe.Field, fe.Msg)
				}
				return nil, apierror.BadRequest(where, "%s: %v", where, err)
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

// checkDataURL validates training_data_url when the job is created: a weave:/// ref of the
// caller's entity (a Dataset object, by digest, version, alias or "latest", or a table), an
// uploaded file (hone-file:///<id>), or a path under DataRoot.
func (s *Service) checkDataURL(ctx context.Context, entity, u string) error {
	const param = "training_data_url"
	scheme, _, hasScheme := strings.Cut(u, "://")
	switch {
	case u == "":
		return apierror.BadRequest(param, "training_data_url is required")
	case strings.HasPrefix(u, "weave:///"):
		ref, err := trace.ParseRef(u)
		if err != nil || (ref.Kind != "object" && ref.Kind != "table") || len(ref.Extra) > 0 {
			return apierror.BadRequest(param, "training_data_url %q is not a weave:///<entity>/<project>/object/<name>:<digest> or weave:///<entity>/<project>/table/<digest> ref", u)
		}
		if ref.Entity != entity {
			return apierror.Forbidden(param, "this API key may only use data of entity %q", entity)
		}
		if s.Trace == nil {
			return apierror.BadRequest(param, "this server has no trace store to read %s from", u)
		}
		if err := s.weaveExists(ctx, ref); err != nil {
			return apierror.NotFound(param, "training_data_url %s: %v", u, err)
		}
	case strings.HasPrefix(u, "hone-file:///"):
		id := strings.TrimPrefix(u, "hone-file:///")
		if !strings.HasPrefix(id, "file-") || strings.ContainsAny(id, "/\\.") {
			return apierror.BadRequest(param, "training_data_url %q does not name an uploaded file", u)
		}
		if _, err := os.Stat(filepath.Join(s.FilesDir, entity, id+".jsonl")); err != nil {
			return apierror.NotFound(param, "uploaded file %s not found", id)
		}
	case strings.HasPrefix(u, "wandb-artifact://"):
		return apierror.BadRequest(param, "training_data_url %q is a W&B artifact, which this server cannot resolve yet; upload the data (POST /v1/preview/files) and pass the url it returns, or pass a weave:/// Dataset or table ref", u)
	case hasScheme && scheme != "file":
		return apierror.BadRequest(param, "training_data_url %q: the %s:// scheme is not supported (weave:///, hone-file:///, or a file path under the training data root)", u, scheme)
	default:
		p := strings.TrimPrefix(u, "file://")
		if _, err := s.localPath(p); err != nil {
			return apierror.BadRequest(param, "%v", err)
		}
	}
	return nil
}

// weaveExists checks that the object or table a ref names exists.
func (s *Service) weaveExists(ctx context.Context, ref trace.Ref) error {
	project := ref.Entity + "/" + ref.Project
	if ref.Kind == "table" {
		_, err := s.Trace.TableQueryStats(ctx, trace.TableQueryStatsReq{ProjectID: project, Digest: ref.Digest})
		return err
	}
	_, err := s.Trace.ObjRead(ctx, trace.ObjReadReq{ProjectID: project, ObjectID: ref.Name, Digest: ref.Digest, MetadataOnly: true})
	return err
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
		digest := ref.Digest
		if ref.Kind == "object" {
			// A Dataset: its rows are a table ref.
			obj, err := s.Trace.ObjRead(ctx, trace.ObjReadReq{ProjectID: project, ObjectID: ref.Name, Digest: ref.Digest})
			if err != nil {
				return nil, fmt.Errorf("reading %s: %v", u, err)
			}
			var val struct {
				Rows string `json:"rows"`
			}
			json.Unmarshal(obj.Obj.Val, &val)
			rows, err := trace.ParseRef(val.Rows)
			if err != nil || rows.Kind != "table" {
				return nil, fmt.Errorf("%s is not a dataset (it has no rows table)", u)
			}
			if rows.Entity+"/"+rows.Project != project {
				return nil, fmt.Errorf("the rows of %s are in another project (%s/%s)", u, rows.Entity, rows.Project)
			}
			digest = rows.Digest
		}
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
		plan, err := parseRLConfig(req.ExperimentalConfig)
		if err != nil {
			return nil, err
		}
		cfg := plan.cfg
		groups, err := parseGroups(req.TrajectoryGroups)
		if err != nil {
			return nil, err
		}
		if cfg.KLPenaltyCoef > 0 {
			// The reference: kl_penalty_reference_step, or kl_penalty_step_lag steps before
			// the step trained from, or the base model (step 0).
			refStep := 0
			switch {
			case plan.klRefStep != nil:
				refStep = *plan.klRefStep
			case plan.klStepLag != nil:
				refStep = max(0, step-*plan.klStepLag)
			}
			if refStep > 0 {
				ref, _, err := train.LoadCheckpoint(s.Reg.CheckpointDir(m.ID, refStep), &base.Model.Config)
				if err != nil {
					return nil, fmt.Errorf("the KL reference, checkpoint step %d: %v", refStep, err)
				}
				cfg.RefAdapter = ref
			} else {
				cfg.RefAdapter = emptyAdapter(base.Model.Config.NumLayers) // the base model
			}
		}
		stdDev := train.RewardStdDev(groups)
		if plan.scaleLRByStd {
			if cfg.LRMultiplier, err = s.rewardStdLRMultiplier(ctx, m.ID, step, stdDev); err != nil {
				return nil, err
			}
		}
		n := 0
		if train.Trainable(groups) {
			n = 1
		}
		progress(jobs.EventStarted, map[string]any{"num_sequences": n})
		met, o, err := train.RLStep(ctx, e, chat, groups, cfg, opt)
		switch {
		case errors.Is(err, train.ErrNothingToTrain):
			// As ART's backends do, the step still advances: its checkpoint is the adapter
			// unchanged.
			metrics = map[string]float64{"reward": met.Reward, "reward_std_dev": met.RewardStdDev}
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
			inputs, _ := json.Marshal(map[string]any{"messages_and_choices": t.MessagesAndChoices, "split": req.Split, "group": gi, "index": ti, "model": m.Name})
			output, _ := json.Marshal(map[string]any{"reward": t.Reward, "metrics": t.Metrics})
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

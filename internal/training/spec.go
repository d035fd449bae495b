package training

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/jsonfields"
	"github.com/honeai/hone/internal/train"
	"github.com/honeai/hone/internal/trainingdata"
)

// RLRequest is an RL job as ART's clients send it (POST /v1/preview/training-jobs).
type RLRequest struct {
	ModelID            string            `json:"model_id"`
	TrajectoryGroups   []json.RawMessage `json:"trajectory_groups"`
	ExperimentalConfig json.RawMessage   `json:"experimental_config"`
	// TrajectoryGroupsURL (a Hone addition) names the groups instead of sending them: a
	// training data URL (a weave:/// Dataset or table, as POST /v1/preview/datasets/from-calls
	// builds with kind "rl", an upload or a rooted path) whose rows are trajectory groups.
	TrajectoryGroupsURL string `json:"trajectory_groups_url,omitempty"`
	// Evaluation and Promote (Hone additions): an evaluation to run on the new checkpoint
	// and an alias to move to it by its promotion rule (loop.go).
	Evaluation json.RawMessage `json:"evaluation,omitempty"`
	Promote    string          `json:"promote,omitempty"`
}

// SFTRequest is an SFT job as clients send it (POST /v1/preview/sft-training-jobs).
type SFTRequest struct {
	ModelID            string          `json:"model_id"`
	TrainingDataURL    string          `json:"training_data_url"`
	Config             json.RawMessage `json:"config"`
	ExperimentalConfig json.RawMessage `json:"experimental_config"`
	// Evaluation and Promote (Hone additions): an evaluation to run on the new checkpoint
	// and an alias to move to it by its promotion rule (loop.go).
	Evaluation json.RawMessage `json:"evaluation,omitempty"`
	Promote    string          `json:"promote,omitempty"`
}

// RLSpec is a validated RL job: the groups it trains on (normalised: exchanges become
// messages and choices, a missing reward is 0) and the trainer's configuration. It is built
// once when the job is created and queued as such.
type RLSpec struct {
	Groups []trainingdata.TrajectoryGroup `json:"trajectory_groups"`
	Config train.RLConfig                 `json:"config"`
	// KLRefStep and KLStepLag name the KL reference checkpoint (resolved when the job runs).
	KLRefStep *int `json:"kl_penalty_reference_step,omitempty"`
	KLStepLag *int `json:"kl_penalty_step_lag,omitempty"`
	// ScaleLRByStd scales the learning rate by the trend of the reward spread.
	ScaleLRByStd bool `json:"scale_learning_rate_by_reward_std_dev,omitempty"`
	// Tokens is trainable_tokens: auto ("", the default), on or off (TokenRows).
	Tokens string `json:"trainable_tokens,omitempty"`
}

// SFTSpec is a validated SFT job: where its data is and how to train.
type SFTSpec struct {
	DataURL string          `json:"training_data_url"`
	Config  train.SFTConfig `json:"config"`
	Turns   string          `json:"assistant_turns"` // all or last
	// Tokens is trainable_tokens: auto ("", the default), on or off (TokenRows).
	Tokens string `json:"trainable_tokens,omitempty"`
}

// NewRLSpec validates an RL request's groups and configuration.
func NewRLSpec(req RLRequest) (RLSpec, error) {
	if len(req.TrajectoryGroups) == 0 {
		return RLSpec{}, fault.Invalid("trajectory_groups", "trajectory_groups must hold at least one group")
	}
	spec, err := parseRLConfig(req.ExperimentalConfig)
	if err != nil {
		return spec, err
	}
	spec.Groups, err = ParseGroups(req.TrajectoryGroups)
	return spec, err
}

// NewSFTSpec validates an SFT request's configuration (its data URL is checked by the
// service, which knows where data may come from).
func NewSFTSpec(req SFTRequest) (SFTSpec, error) {
	spec, err := parseSFTConfig(req.Config, req.ExperimentalConfig)
	spec.DataURL = req.TrainingDataURL
	return spec, err
}

// decode reads a JSON object into v; a value of the wrong type is a fault naming
// param.field.
func decode(raw json.RawMessage, v any, param string) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fault.JSON(err, param)
	}
	return nil
}

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
	// TrainableTokens (a Hone addition): whether the rows of the turn's tokens are trained.
	TrainableTokens *string `json:"trainable_tokens"`
}

// unknownFields refuses a field of the JSON object raw that the Go type known does not
// decode, naming it.
func unknownFields(raw json.RawMessage, known reflect.Type, param string) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fault.Invalid(param, "%s must be an object", param)
	}
	var bad []string
	for k := range m {
		if !jsonfields.Has(known, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fault.Invalid(param, "%s has fields Hone does not support: %s", param, strings.Join(bad, ", "))
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Bounds of the hyperparameters a job may ask (docs/training.md): values past them make
// AdamW's update or its decay factor (1 − lr·wd) overflow or flip sign, so training can only
// diverge.
const (
	MaxLearningRate = 1.0 // learning_rate in (0, 1]
	MaxWeightDecay  = 1.0 // weight_decay in [0, 1]
	MaxNumber       = 1e6 // any other number: |v| <= 1e6
	MaxWarmupSteps  = 1_000_000
	MaxBatchSize    = 1024
	MaxSeqLenLimit  = 1 << 20
)

// parseRLConfig checks experimental_config and turns it into a spec (without groups).
func parseRLConfig(raw json.RawMessage) (RLSpec, error) {
	p := RLSpec{Config: train.RLConfig{ScaleRewards: true}}
	cfg := &p.Config
	if err := unknownFields(raw, reflect.TypeOf(rlConfig{}), "experimental_config"); err != nil {
		return p, err
	}
	var c rlConfig
	if len(raw) > 0 && string(raw) != "null" {
		if err := decode(raw, &c, "experimental_config"); err != nil {
			return p, err
		}
	}
	bad := func(field, format string, args ...any) (RLSpec, error) {
		return p, fault.Invalid("experimental_config."+field, format, args...)
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
		if f.v != nil && math.Abs(*f.v) > MaxNumber {
			return bad(f.name, "%s must be at most %g in size, got %g", f.name, MaxNumber, *f.v)
		}
	}
	if c.WeightDecay != nil && *c.WeightDecay > MaxWeightDecay {
		return bad("weight_decay", "weight_decay must be from 0 to %g, got %g", MaxWeightDecay, *c.WeightDecay)
	}
	if c.NumTrajLRPower != nil && math.Abs(*c.NumTrajLRPower) > 10 {
		return bad("num_trajectories_learning_rate_multiplier_power", "num_trajectories_learning_rate_multiplier_power must be from -10 to 10, got %g", *c.NumTrajLRPower)
	}
	if c.LearningRate != nil {
		if *c.LearningRate <= 0 || *c.LearningRate > MaxLearningRate {
			return bad("learning_rate", "learning_rate must be greater than 0 and at most %g, got %g", MaxLearningRate, *c.LearningRate)
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
		p.KLRefStep = c.KLRefStep
	}
	if c.KLStepLag != nil {
		if *c.KLStepLag < 1 {
			return bad("kl_penalty_step_lag", "kl_penalty_step_lag must be >= 1")
		}
		if c.KLRefStep != nil {
			return bad("kl_penalty_step_lag", "only one of kl_penalty_reference_step and kl_penalty_step_lag may be set")
		}
		p.KLStepLag = c.KLStepLag
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
		p.ScaleLRByStd = *c.ScaleLRByStd
	}
	if c.MaxGradNorm != nil {
		cfg.MaxGradNorm = *c.MaxGradNorm
	}
	if c.WeightDecay != nil {
		cfg.WeightDecay = *c.WeightDecay
	}
	var err error
	if p.Tokens, err = tokenMode(c.TrainableTokens, "experimental_config"); err != nil {
		return p, err
	}
	return p, nil
}

// Values of a job's trainable_tokens: whether it trains rows of the embedding and LM head for
// the tokens that mark the assistant's turn (TokenRows).
const (
	TokensAuto = "auto"
	TokensOn   = "on"
	TokensOff  = "off"
)

// tokenMode checks a trainable_tokens field of the object param; auto is kept as "".
func tokenMode(v *string, param string) (string, error) {
	if v == nil || *v == TokensAuto {
		return "", nil
	}
	if *v != TokensOn && *v != TokensOff {
		return "", fault.Invalid(param+".trainable_tokens", "trainable_tokens must be auto, on or off, got %q", *v)
	}
	return *v, nil
}

// ParseGroups reads trajectory groups; trajectories recorded as exchanges (ART's capture
// API) become messages and choices, and a missing reward is 0.0.
func ParseGroups(raw []json.RawMessage) ([]trainingdata.TrajectoryGroup, error) {
	out := make([]trainingdata.TrajectoryGroup, len(raw))
	for i, g := range raw {
		if err := json.Unmarshal(g, &out[i]); err != nil {
			return nil, fault.Invalid(fmt.Sprintf("trajectory_groups[%d]", i), "trajectory_groups[%d] is not a trajectory group: %v", i, err)
		}
		for k := range out[i].Trajectories {
			if err := out[i].Trajectories[k].Normalize(); err != nil {
				where := fmt.Sprintf("trajectory_groups[%d].trajectories[%d]", i, k)
				var fe *trainingdata.FieldError
				if errors.As(err, &fe) {
					return nil, fault.Invalid(where+"."+fe.Field, "%s.%s %s", where, fe.Field, fe.Msg)
				}
				return nil, fault.Invalid(where, "%s: %v", where, err)
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
	// TrainableTokens (a Hone addition): whether the rows of the turn's tokens are trained.
	TrainableTokens *string         `json:"trainable_tokens"`
	MetricLogging   json.RawMessage `json:"metric_logging"`
}

// sftExperimental is an SFT job's experimental_config.
type sftExperimental struct {
	MaxSeqLen   *int     `json:"max_seq_len"`
	Schedule    *string  `json:"schedule"`
	Warmup      *int     `json:"warmup_steps"`
	WeightDecay *float64 `json:"weight_decay"`
	MaxGradNorm *float64 `json:"max_grad_norm"`
	Seed        *uint64  `json:"seed"`
	Shuffle     *bool    `json:"shuffle"`
}

func parseSFTConfig(raw, experimental json.RawMessage) (SFTSpec, error) {
	p := SFTSpec{Config: train.SFTConfig{MaxSeqLen: 2048}, Turns: "all"}
	if err := unknownFields(raw, reflect.TypeOf(sftConfig{}), "config"); err != nil {
		return p, err
	}
	if err := unknownFields(experimental, reflect.TypeOf(sftExperimental{}), "experimental_config"); err != nil {
		return p, err
	}
	var c sftConfig
	if len(raw) > 0 && string(raw) != "null" {
		if err := decode(raw, &c, "config"); err != nil {
			return p, err
		}
	}
	if len(c.BatchSize) > 0 && string(c.BatchSize) != "null" && string(c.BatchSize) != `"auto"` {
		var n int
		if json.Unmarshal(c.BatchSize, &n) != nil || n < 1 || n > MaxBatchSize {
			return p, fault.Invalid("config.batch_size", "batch_size must be an integer from 1 to %d or \"auto\", got %s", MaxBatchSize, c.BatchSize)
		}
		p.Config.BatchSize = n
	}
	if len(c.LearningRate) > 0 && string(c.LearningRate) != "null" {
		var one float64
		var list []float64
		switch {
		case json.Unmarshal(c.LearningRate, &one) == nil:
			list = []float64{one}
		case json.Unmarshal(c.LearningRate, &list) == nil && len(list) > 0:
		default:
			return p, fault.Invalid("config.learning_rate", "learning_rate must be a number or a non-empty list of numbers")
		}
		for _, v := range list {
			if !(v > 0 && v <= MaxLearningRate) {
				return p, fault.Invalid("config.learning_rate", "learning_rate must be greater than 0 and at most %g, got %g", MaxLearningRate, v)
			}
		}
		p.Config.LearningRates = list
	}
	if c.AssistantTurns != nil {
		if *c.AssistantTurns != "all" && *c.AssistantTurns != "last" {
			return p, fault.Invalid("config.assistant_turns", "assistant_turns must be all or last, got %q", *c.AssistantTurns)
		}
		p.Turns = *c.AssistantTurns
	}
	if c.Epochs != nil {
		if *c.Epochs < 1 || *c.Epochs > 1000 {
			return p, fault.Invalid("config.epochs", "epochs must be from 1 to 1000")
		}
		p.Config.Epochs = *c.Epochs
	}
	var err error
	if p.Tokens, err = tokenMode(c.TrainableTokens, "config"); err != nil {
		return p, err
	}
	var x sftExperimental
	if len(experimental) > 0 && string(experimental) != "null" {
		if err := decode(experimental, &x, "experimental_config"); err != nil {
			return p, err
		}
	}
	if x.MaxSeqLen != nil {
		if *x.MaxSeqLen < 16 || *x.MaxSeqLen > MaxSeqLenLimit {
			return p, fault.Invalid("experimental_config.max_seq_len", "max_seq_len must be from 16 to %d", MaxSeqLenLimit)
		}
		p.Config.MaxSeqLen = *x.MaxSeqLen
	}
	if x.Schedule != nil {
		if !train.ValidSchedule(*x.Schedule) {
			return p, fault.Invalid("experimental_config.schedule", "schedule must be constant, linear or cosine, got %q", *x.Schedule)
		}
		p.Config.Schedule = *x.Schedule
	}
	if x.Warmup != nil {
		if *x.Warmup < 0 || *x.Warmup > MaxWarmupSteps {
			return p, fault.Invalid("experimental_config.warmup_steps", "warmup_steps must be from 0 to %d, got %d", MaxWarmupSteps, *x.Warmup)
		}
		p.Config.Warmup = *x.Warmup
	}
	if x.WeightDecay != nil {
		if !(*x.WeightDecay >= 0 && *x.WeightDecay <= MaxWeightDecay) {
			return p, fault.Invalid("experimental_config.weight_decay", "weight_decay must be from 0 to %g, got %g", MaxWeightDecay, *x.WeightDecay)
		}
		p.Config.WeightDecay = *x.WeightDecay
	}
	if x.MaxGradNorm != nil {
		if !finite(*x.MaxGradNorm) || math.Abs(*x.MaxGradNorm) > MaxNumber {
			return p, fault.Invalid("experimental_config.max_grad_norm", "max_grad_norm must be a number from -%g to %g (negative: no clipping), got %g", MaxNumber, MaxNumber, *x.MaxGradNorm)
		}
		p.Config.MaxGradNorm = *x.MaxGradNorm
	}
	if x.Seed != nil {
		p.Config.Seed = *x.Seed
	}
	if x.Shuffle != nil {
		p.Config.Shuffle = *x.Shuffle
	}
	return p, nil
}

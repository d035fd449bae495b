package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/trainingdata"
)

// RLConfig is ART's ExperimentalTrainingConfig as far as Hone implements it.
type RLConfig struct {
	LearningRate         float64 // default 5e-6
	Loss                 string  // "cispo" (default) or "ppo"
	Epsilon, EpsilonHigh float64 // clip bounds (defaults: ppo 0.2/0.2, cispo 1.0/4.0)
	ScaleRewards         bool    // divide advantages by the group's standard deviation
	// AdvantageBalance in [-1, 1]: > 0 scales negative advantages by 1−b, < 0 positive ones
	// by 1+b (1: train on positive advantages only, −1: on negative ones only).
	AdvantageBalance float64
	// ImportanceSampling: "token" (default), "sequence" (exp of the trajectory's mean
	// log-ratio), "average" (their mean) or "geometric_average" (their geometric mean).
	ImportanceSampling string
	// MaskProbRatio zeroes ratios outside (1−ε, 1+ε_high) instead of clipping them.
	MaskProbRatio bool
	// KimiK2Tau > 0: each token's advantage becomes A − τ·(logπ − logπ_old) (not
	// differentiated).
	KimiK2Tau float64
	// TruncatedIS > 0: each token's loss is multiplied by min(ratio, TruncatedIS) (not
	// differentiated).
	TruncatedIS float64
	// KLPenaltyCoef > 0 (with RefAdapter): ART's KL penalty as an advantage adjustment: with
	// kl = logπ − logπ_ref per sampled token, A += coef·(mean(kl) − kl) over the trajectory.
	KLPenaltyCoef float64
	RefAdapter    *model.LoRA `json:"-"`
	// KLPenaltySource is whose logprobs the KL penalty compares with the reference's:
	// "current_learner" (default, logπ) or "sample" (the sampling logprobs).
	KLPenaltySource string
	// NumTrajectoriesLRPower: the learning rate is multiplied by N^power, N the number of
	// trajectories trained on (ART's num_trajectories_learning_rate_multiplier_power).
	NumTrajectoriesLRPower float64
	// LRMultiplier multiplies the learning rate (0: 1), as the job's
	// scale_learning_rate_by_reward_std_dev decides.
	LRMultiplier         float64
	AllowWithoutLogprobs bool // trajectories without sampling logprobs: Hone computes them
	MaxGradNorm          float64
	WeightDecay          float64
	MaxSeqLen            int
	// MaxNegativeAdvantageIS > 0 caps the ratio of negative-advantage tokens.
	MaxNegativeAdvantageIS float64
}

// RLMetrics are the metrics of one RL step (the keys ART maps).
type RLMetrics struct {
	Reward             float64 `json:"reward"`
	RewardStdDev       float64 `json:"reward_std_dev"`
	Loss               float64 `json:"loss"`
	Entropy            float64 `json:"entropy"`
	KLDiv              float64 `json:"kl_div"`        // mean k3 estimate of KL(new‖ref) (0 without a reference)
	KLPolicyRef        float64 `json:"kl_policy_ref"` // mean logπ − logπ_ref over sampled tokens
	GradNorm           float64 `json:"grad_norm"`
	LearningRate       float64 `json:"learning_rate"`
	NumGroupsSubmitted int     `json:"num_groups_submitted"`
	NumGroupsTrainable int     `json:"num_groups_trainable"`
	NumTrajectories    int     `json:"num_trajectories"`
	NumTrainableTokens int     `json:"num_trainable_tokens"`
	// NumUnknownTokens counts sampled tokens whose ids the choices did not say (trained
	// as context only; see internal/trainingdata/logprobs.go).
	NumUnknownTokens int     `json:"num_unknown_tokens,omitempty"`
	TokensPerSecond  float64 `json:"tokens_per_second"`
}

// ErrNothingToTrain is returned when every group's advantages are zero.
var ErrNothingToTrain = errors.New("no trajectory group has rewards that differ, so there is nothing to train on (every advantage is zero)")

// rlSeq is one tokenised trajectory conversation (trainingdata.Sequence) with its sampled
// tokens.
type rlSeq struct {
	seq       Seq
	sampled   []bool    // per token: sampled by the policy (trained)
	oldLogp   []float64 // per token: sampling logprob (NaN: unknown)
	advantage float64
	unknown   int // sampled tokens whose ids the choice did not say (context only)
	traj      int // the trajectory it belongs to (its histories share it)
}

func (c *RLConfig) defaults() error {
	if c.LearningRate == 0 {
		c.LearningRate = DefaultRLLearningRate
	}
	switch c.Loss {
	case "", "cispo":
		c.Loss = "cispo"
		if c.Epsilon == 0 {
			c.Epsilon = 1
		}
		if c.EpsilonHigh == 0 {
			c.EpsilonHigh = 4
		}
	case "ppo":
		if c.Epsilon == 0 {
			c.Epsilon = 0.2
		}
		if c.EpsilonHigh == 0 {
			c.EpsilonHigh = c.Epsilon
		}
	default:
		return fmt.Errorf("loss_fn %q is not supported (cispo or ppo)", c.Loss)
	}
	switch c.ImportanceSampling {
	case "":
		c.ImportanceSampling = "token"
	case "token", "sequence", "average", "geometric_average":
	default:
		return fmt.Errorf("importance_sampling_level %q is not supported (token, sequence, average or geometric_average)", c.ImportanceSampling)
	}
	if c.AdvantageBalance < -1 || c.AdvantageBalance > 1 {
		return fmt.Errorf("advantage_balance must be in [-1, 1], got %v", c.AdvantageBalance)
	}
	if c.Epsilon < 0 || c.EpsilonHigh < 0 {
		return errors.New("epsilon and epsilon_high must not be negative")
	}
	if c.KimiK2Tau < 0 || c.TruncatedIS < 0 || c.KLPenaltyCoef < 0 || c.MaxNegativeAdvantageIS < 0 {
		return errors.New("kimi_k2_tau, truncated_importance_sampling, kl_penalty_coef and max_negative_advantage_importance_sampling_weight must not be negative")
	}
	if c.MaxGradNorm == 0 {
		c.MaxGradNorm = 1
	}
	if c.MaxSeqLen == 0 {
		c.MaxSeqLen = 4096
	}
	if c.KLPenaltyCoef > 0 && c.RefAdapter == nil {
		return errors.New("kl_penalty_coef needs a reference checkpoint")
	}
	switch c.KLPenaltySource {
	case "":
		c.KLPenaltySource = "current_learner"
	case "current_learner", "sample":
	default:
		return fmt.Errorf("kl_penalty_source %q is not supported (current_learner or sample)", c.KLPenaltySource)
	}
	if c.LRMultiplier == 0 {
		c.LRMultiplier = 1
	}
	if c.LRMultiplier < 0 || math.IsNaN(c.NumTrajectoriesLRPower) || math.IsInf(c.NumTrajectoriesLRPower, 0) {
		return errors.New("the learning-rate multipliers must be finite and not negative")
	}
	return nil
}

// RLStep runs one RL step (one ART training job) on groups: group-relative advantages, the
// configured loss over the sampled tokens, one optimizer update. It returns the metrics, or
// ErrNothingToTrain when no group has differing rewards.
func RLStep(ctx context.Context, e *Trainer, chat *trainingdata.ChatTokenizer, groups []trainingdata.TrajectoryGroup, cfg RLConfig, o *AdamW) (RLMetrics, *AdamW, error) {
	if err := cfg.defaults(); err != nil {
		return RLMetrics{}, o, err
	}
	if o == nil {
		o = NewAdamW(cfg.WeightDecay)
	}
	if chat.Vocab == 0 {
		chat.Vocab = e.M.Config.VocabSize
	}
	start := time.Now()
	met := RLMetrics{NumGroupsSubmitted: len(groups), LearningRate: cfg.LearningRate * cfg.LRMultiplier}
	trained := 0 // trajectories with an advantage
	var seqs []*rlSeq
	var rewards []float64
	stdSum := 0.0
	for gi, g := range groups {
		if len(g.Trajectories) == 0 {
			continue
		}
		rs := make([]float64, len(g.Trajectories))
		for ti, t := range g.Trajectories {
			rs[ti] = t.Reward
		}
		mean, std := meanStd(rs)
		rewards = append(rewards, rs...)
		stdSum += std
		trainable := false
		for ti, t := range g.Trajectories {
			adv := rs[ti] - mean
			if cfg.ScaleRewards {
				adv /= std + 1e-6
			}
			switch b := cfg.AdvantageBalance; {
			case b > 0 && adv < 0:
				adv *= 1 - b
			case b < 0 && adv > 0:
				adv *= 1 + b
			}
			if adv == 0 {
				continue
			}
			trainable = true
			trained++
			if err := t.Normalize(); err != nil {
				return met, o, fmt.Errorf("trajectory_groups[%d].trajectories[%d]: %w", gi, ti, err)
			}
			for hi, h := range t.Histories() {
				d, err := chat.TokenizeTrajectory(h.MessagesAndChoices, h.Tools, cfg.AllowWithoutLogprobs)
				if err != nil {
					where := fmt.Sprintf("trajectory_groups[%d].trajectories[%d]", gi, ti)
					if hi > 0 {
						where += fmt.Sprintf(".additional_histories[%d]", hi-1)
					}
					return met, o, fmt.Errorf("%s: %w", where, err)
				}
				if len(d.Tokens) > cfg.MaxSeqLen {
					return met, o, fmt.Errorf("trajectory_groups[%d].trajectories[%d] has %d tokens, more than %d", gi, ti, len(d.Tokens), cfg.MaxSeqLen)
				}
				s := &rlSeq{seq: Seq{Tokens: d.Tokens}, sampled: d.Sampled, oldLogp: d.OldLogp, unknown: d.Unknown,
					advantage: adv, traj: trained - 1}
				met.NumUnknownTokens += s.unknown
				seqs = append(seqs, s)
			}
		}
		if trainable {
			met.NumGroupsTrainable++
		}
	}
	met.Reward, _ = meanStd(rewards)
	if len(groups) > 0 {
		met.RewardStdDev = stdSum / float64(len(groups))
	}
	if len(seqs) == 0 {
		return met, o, ErrNothingToTrain
	}
	met.NumTrajectories = len(seqs)
	w := rlWeights(seqs)
	lr := cfg.LearningRate * cfg.LRMultiplier
	if cfg.NumTrajectoriesLRPower != 0 {
		lr *= math.Pow(float64(trained), cfg.NumTrajectoriesLRPower)
	}
	met.LearningRate = lr
	tokens, err := e.rlPasses(ctx, seqs, &cfg, w, &met)
	if err != nil {
		return met, o, err
	}
	met.GradNorm = e.G.Clip(cfg.MaxGradNorm)
	if err := checkGradStep(met.Loss, met.GradNorm); err != nil {
		return met, o, err
	}
	o.UpdateRates(e.A, e.G, lr, e.tokenLR(lr))
	if err := CheckFinite(e.A); err != nil {
		return met, o, fmt.Errorf("%w (after the update at learning rate %g)", err, lr)
	}
	met.TokensPerSecond = float64(tokens) / time.Since(start).Seconds()
	return met, o, nil
}

// rlWeights weights the sampled tokens and scales the advantages as ART's packing does
// (preprocessing/pack.py): every sampled token of a trajectory (over all its histories) weighs
// 1/n, n its sampled tokens, and the weights of the step average 1 over its tokens; then the
// advantages are divided by the mean of |A|·weight over those tokens. With the loss the sum of
// the weighted token losses over the step's tokens, a trajectory counts 1/T of the step (T
// trajectories with sampled tokens) and its advantage is A / mean over trajectories of |A|.
// It scales the seqs' advantages and answers each trajectory's token weight, 1/n/T.
func rlWeights(seqs []*rlSeq) map[int]float64 {
	tokens := map[int]int{} // trajectories with sampled tokens only
	adv := map[int]float64{}
	for _, s := range seqs {
		for _, sm := range s.sampled {
			if sm {
				tokens[s.traj]++
			}
		}
		adv[s.traj] = s.advantage
	}
	w := map[int]float64{}
	if len(tokens) == 0 {
		return w
	}
	sumAbs := 0.0
	for t, n := range tokens {
		sumAbs += math.Abs(adv[t])
		w[t] = 1 / float64(n) / float64(len(tokens))
	}
	meanAbs := sumAbs / float64(len(tokens))
	for _, s := range seqs {
		s.advantage /= meanAbs
	}
	return w
}

// rlLoss is the loss of one trajectory sequence and its gradient.
type rlLoss struct {
	g                  []float32 // dLoss/dlogp per position
	entropy, k3, klRef float64   // weighted sums of the metrics
}

// compute evaluates ART's loss for s given the current statistics st, the sampling logprobs
// old (per predicting position) and the reference's statistics ref (when the KL penalty is
// on), each sampled token weighted w; it fills l and returns the weighted loss.
//
// Per sampled token t with r_t = exp(logπ_t − old_t) and the trajectory's ratio
// R = exp(mean(logπ − old)), the ratio ρ_t is r_t, R, (r_t+R)/2 or √(r_t·R) by importance-
// sampling level, then capped (negative advantages), masked, and used by the loss: ppo
// −min(ρA, clip(ρ)A), cispo −clip(sg(ρ))·A·logπ. The gradient takes R's dependence on every
// token into account.
func (l *rlLoss) compute(cfg *RLConfig, s *rlSeq, st TokenStats, old []float64, ref TokenStats, w float64) float64 {
	T := len(s.seq.Tokens)
	l.g = make([]float32, T)
	var idx []int
	logR := 0.0
	for t := 0; t+1 < T; t++ {
		if s.sampled[t+1] {
			idx = append(idx, t)
			logR += float64(st.Logp[t]) - old[t]
		}
	}
	n := float64(len(idx))
	if n == 0 {
		return 0
	}
	R := math.Exp(logR / n)
	// The KL adjustment's mean over the trajectory.
	// kl of position t: logπ − logπ_ref, or old − logπ_ref with kl_penalty_source "sample"
	// (not differentiated either way).
	kl := func(t int) float64 {
		if cfg.KLPenaltySource == "sample" {
			return old[t] - float64(ref.Logp[t])
		}
		return float64(st.Logp[t] - ref.Logp[t])
	}
	klMean := 0.0
	if cfg.KLPenaltyCoef > 0 {
		for _, t := range idx {
			klMean += kl(t) / n
		}
		l.klRef = klMean * n * w
	}
	lo, hi := 1-cfg.Epsilon, 1+cfg.EpsilonHigh
	loss := 0.0
	sumR := 0.0 // Σ_t dL_t/dρ_t · ∂ρ_t/∂R, for R's share of every token's gradient
	own := make([]float64, len(idx))
	for i, t := range idx {
		lp := float64(st.Logp[t])
		diff := lp - old[t]
		r := math.Exp(diff)
		// ρ and its partial derivatives times r (own token) and times R (the trajectory).
		var rho, dOwn, dSeq float64
		switch cfg.ImportanceSampling {
		case "sequence":
			rho, dOwn, dSeq = R, 0, R
		case "average":
			rho, dOwn, dSeq = (r+R)/2, r/2, R/2
		case "geometric_average":
			rho = math.Sqrt(r * R)
			dOwn, dSeq = rho/2, rho/2
		default:
			rho, dOwn, dSeq = r, r, 0
		}
		A := s.advantage
		if cfg.MaxNegativeAdvantageIS > 0 && A < 0 && rho > cfg.MaxNegativeAdvantageIS {
			rho, dOwn, dSeq = cfg.MaxNegativeAdvantageIS, 0, 0
		}
		if cfg.MaskProbRatio && (rho <= lo || rho >= hi) {
			rho, dOwn, dSeq = 0, 0, 0
		}
		if cfg.KimiK2Tau > 0 {
			A -= cfg.KimiK2Tau * diff
		}
		if cfg.KLPenaltyCoef > 0 {
			A += cfg.KLPenaltyCoef * (klMean - kl(t))
		}
		clipped := math.Max(lo, math.Min(hi, rho))
		var lt, dRho, direct float64 // loss, dL/dρ, dL/dlogπ other than through ρ
		switch cfg.Loss {
		case "ppo":
			if un, cl := rho*A, clipped*A; un <= cl {
				lt, dRho = -un, -A
			} else {
				lt = -cl
				if rho > lo && rho < hi {
					dRho = -A
				}
			}
		default: // cispo
			lt, direct = -clipped*A*lp, -clipped*A
		}
		if cfg.TruncatedIS > 0 {
			c := math.Min(rho, cfg.TruncatedIS)
			lt, dRho, direct = lt*c, dRho*c, direct*c
		}
		loss += lt * w
		own[i] = dRho*dOwn + direct
		sumR += dRho * dSeq
		l.entropy += float64(st.Entropy[t]) * w
		if ref.Logp != nil {
			d := float64(ref.Logp[t]) - lp
			l.k3 += (math.Exp(d) - d - 1) * w
		}
	}
	for i, t := range idx {
		l.g[t] = float32((own[i] + sumR/n) * w)
	}
	return loss
}

// RewardStdDev is the mean over groups of their rewards' population standard deviation
// (ART's reward_std_dev).
func RewardStdDev(groups []trainingdata.TrajectoryGroup) float64 {
	if len(groups) == 0 {
		return 0
	}
	sum := 0.0
	for _, g := range groups {
		rs := make([]float64, len(g.Trajectories))
		for i, t := range g.Trajectories {
			rs[i] = t.Reward
		}
		_, std := meanStd(rs)
		sum += std
	}
	return sum / float64(len(groups))
}

// meanStd is the mean and population standard deviation.
func meanStd(x []float64) (float64, float64) {
	if len(x) == 0 {
		return 0, 0
	}
	m := 0.0
	for _, v := range x {
		m += v
	}
	m /= float64(len(x))
	s := 0.0
	for _, v := range x {
		s += (v - m) * (v - m)
	}
	return m, math.Sqrt(s / float64(len(x)))
}

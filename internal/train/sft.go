package train

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/honeai/hone/internal/trainingdata"
)

// Packed is examples packed into one sequence.
type Packed struct {
	Seq   Seq
	Train []bool // per token, as in trainingdata.Example
}

// Pack places examples one after another into sequences of at most maxLen tokens (an example
// longer than maxLen is cut to its first maxLen tokens), in order.
func Pack(xs []trainingdata.Example, maxLen int) []Packed {
	var out []Packed
	var cur Packed
	for _, x := range xs {
		toks, tr := x.Tokens, x.Train
		if len(toks) > maxLen {
			toks, tr = toks[:maxLen], tr[:maxLen]
		}
		if len(cur.Seq.Tokens)+len(toks) > maxLen && len(cur.Seq.Tokens) > 0 {
			out = append(out, cur)
			cur = Packed{}
		}
		cur.Seq.Segments = append(cur.Seq.Segments, len(cur.Seq.Tokens))
		cur.Seq.Tokens = append(cur.Seq.Tokens, toks...)
		tr0 := append([]bool(nil), tr...)
		if len(tr0) > 0 {
			tr0[0] = false // nothing before it in its segment
		}
		cur.Train = append(cur.Train, tr0...)
	}
	if len(cur.Seq.Tokens) > 0 {
		out = append(out, cur)
	}
	return out
}

// SFTConfig configures supervised fine-tuning.
type SFTConfig struct {
	Epochs int // passes over the data (default 1)
	// BatchSize is examples per optimizer step; 0 means auto (AutoBatchSize).
	BatchSize int
	// LearningRates holds one rate for every step, or a single rate for all (default 5e-5),
	// shaped by Schedule.
	LearningRates []float64
	Schedule      string // constant (default), linear or cosine (after Warmup steps)
	Warmup        int
	WeightDecay   float64
	MaxGradNorm   float64 // default 1.0; negative: no clipping
	MaxSeqLen     int     // default 2048
	Seed          uint64  // shuffling
	Shuffle       bool
}

// StepMetrics are reported after every optimizer step.
type StepMetrics struct {
	Step               int     `json:"step"`
	Loss               float64 `json:"loss"`
	GradNorm           float64 `json:"grad_norm"`
	LearningRate       float64 `json:"learning_rate"`
	NumTokens          int     `json:"num_tokens"`
	NumTrainableTokens int     `json:"num_trainable_tokens"`
	TokensPerSecond    float64 `json:"tokens_per_second"`
}

// SFTPlan is the batches of a run, computed before it starts (so that the number of steps is
// known: ART's training_started event reports it).
type SFTPlan struct {
	Batches [][]Packed
	cfg     SFTConfig
}

// Defaults of a job's hyperparameters when the request leaves them out: ART's (its client
// sends its own learning rate, 5e-5, with every SFT job).
const (
	DefaultSFTLearningRate = 5e-5
	DefaultSFTEpochs       = 1
	DefaultRLLearningRate  = 5e-6
)

// AutoBatchSize is the batch size of batch_size "auto" (or none) for n examples: n/8, at
// least 1 and at most 8, so that a small data set still takes several optimizer steps per
// epoch (a fact taught by 8 examples needs steps, not one packed batch) and a large one
// averages 8 examples per step.
func AutoBatchSize(n int) int { return min(max(n/8, 1), 8) }

// PlanSFT splits examples into optimizer steps.
func PlanSFT(xs []trainingdata.Example, cfg SFTConfig) (*SFTPlan, error) {
	if cfg.Epochs <= 0 {
		cfg.Epochs = DefaultSFTEpochs
	}
	if cfg.MaxSeqLen <= 0 {
		cfg.MaxSeqLen = 2048
	}
	if cfg.MaxGradNorm == 0 {
		cfg.MaxGradNorm = 1
	}
	if len(cfg.LearningRates) == 0 {
		cfg.LearningRates = []float64{DefaultSFTLearningRate}
	}
	if !ValidSchedule(cfg.Schedule) {
		return nil, fmt.Errorf("unknown learning-rate schedule %q (constant, linear or cosine)", cfg.Schedule)
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = AutoBatchSize(len(xs))
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	p := &SFTPlan{cfg: cfg}
	for ep := 0; ep < cfg.Epochs; ep++ {
		order := make([]trainingdata.Example, len(xs))
		copy(order, xs)
		if cfg.Shuffle {
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		for i := 0; i < len(order); i += cfg.BatchSize {
			p.Batches = append(p.Batches, Pack(order[i:min(i+cfg.BatchSize, len(order))], cfg.MaxSeqLen))
		}
	}
	if n := len(cfg.LearningRates); n > 1 && n != len(p.Batches) {
		return nil, fmt.Errorf("learning_rate lists %d rates but the run has %d batches", n, len(p.Batches))
	}
	return p, nil
}

// Steps is the number of optimizer steps.
func (p *SFTPlan) Steps() int { return len(p.Batches) }

// lr is the learning rate of step i.
func (p *SFTPlan) lr(i int) float64 {
	if len(p.cfg.LearningRates) > 1 {
		return p.cfg.LearningRates[i]
	}
	return Schedule{Kind: p.cfg.Schedule, Peak: p.cfg.LearningRates[0], Warmup: p.cfg.Warmup, Total: len(p.Batches)}.At(i)
}

// Fingerprint identifies the plan's steps: their tokens, which tokens are learned, where the
// packed examples start, and each step's learning rate, clipping and weight decay. A run
// resumed from a saved state (RunSFTFrom) is the run it continues only when the plans'
// fingerprints are equal.
func (p *SFTPlan) Fingerprint() string {
	h := sha256.New()
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	put(uint64(len(p.Batches)))
	put(math.Float64bits(p.cfg.MaxGradNorm))
	put(math.Float64bits(p.cfg.WeightDecay))
	for i, batch := range p.Batches {
		put(math.Float64bits(p.lr(i)))
		put(uint64(len(batch)))
		for _, pk := range batch {
			put(uint64(len(pk.Seq.Tokens)))
			for t, tok := range pk.Seq.Tokens {
				v := uint64(uint32(tok)) << 1
				if pk.Train[t] {
					v |= 1
				}
				put(v)
			}
			put(uint64(len(pk.Seq.Segments)))
			for _, s := range pk.Seq.Segments {
				put(uint64(s))
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// RunSFT trains e's adapter on the plan with optimizer o (created when nil), calling onStep
// after each step. The loss of a step is the mean cross-entropy over its learned tokens.
func RunSFT(ctx context.Context, e *Trainer, p *SFTPlan, o *AdamW, onStep func(StepMetrics) error) (*AdamW, error) {
	return RunSFTFrom(ctx, e, p, o, 0, func(m StepMetrics, _ *AdamW) error {
		if onStep == nil {
			return nil
		}
		return onStep(m)
	})
}

// RunSFTFrom is RunSFT from step first+1 of the plan on: e's adapter and o must be those
// after its first steps (as saved when an earlier run stopped there), and the result equals
// the uninterrupted run's. onStep also gets the optimizer, whose state (with the adapter)
// is the run's after that step.
func RunSFTFrom(ctx context.Context, e *Trainer, p *SFTPlan, o *AdamW, first int, onStep func(StepMetrics, *AdamW) error) (*AdamW, error) {
	if o == nil {
		o = NewAdamW(p.cfg.WeightDecay)
	}
	if first < 0 || first > len(p.Batches) {
		return o, fmt.Errorf("the run cannot start after step %d of %d", first, len(p.Batches))
	}
	for i := first; i < len(p.Batches); i++ {
		batch := p.Batches[i]
		if err := ctx.Err(); err != nil {
			return o, err
		}
		start := time.Now()
		n, tokens := 0, 0
		for _, pk := range batch {
			tokens += len(pk.Seq.Tokens)
			for t := 1; t < len(pk.Train); t++ {
				if pk.Train[t] {
					n++
				}
			}
		}
		e.G.Zero()
		loss := 0.0
		for _, pk := range batch {
			pk := pk
			if n == 0 {
				break
			}
			// A shutdown does not wait for the rest of a long step: the step is dropped
			// (nothing of it applied) and the run stops after the one before.
			if err := ctx.Err(); err != nil {
				return o, err
			}
			g := make([]float32, len(pk.Seq.Tokens))
			for t := 0; t+1 < len(g); t++ {
				if pk.Train[t+1] {
					g[t] = -1 / float32(n)
				}
			}
			st := e.ForwardBackwardWeights(pk.Seq, g)
			for t := 0; t+1 < len(pk.Seq.Tokens); t++ {
				if pk.Train[t+1] && pk.Seq.HasTarget(t) {
					loss -= float64(st.Logp[t]) / float64(n)
				}
			}
		}
		norm := e.G.Clip(p.cfg.MaxGradNorm)
		lr := p.lr(i)
		m := StepMetrics{Step: i + 1, Loss: loss, GradNorm: norm, LearningRate: lr, NumTokens: tokens,
			NumTrainableTokens: n}
		if n > 0 {
			err := checkGradStep(loss, norm)
			if err == nil {
				o.UpdateRates(e.A, e.G, lr, e.tokenLR(lr))
				if err = CheckFinite(e.A); err != nil {
					err = fmt.Errorf("%w (after the update at learning rate %g)", err, lr)
				}
			}
			if err != nil { // the step is reported, then the run stops
				if onStep != nil {
					_ = onStep(m, o)
				}
				return o, fmt.Errorf("step %d: %w", i+1, err)
			}
		}
		m.TokensPerSecond = float64(tokens) / time.Since(start).Seconds()
		if onStep != nil {
			if err := onStep(m, o); err != nil {
				return o, err
			}
		}
	}
	return o, nil
}

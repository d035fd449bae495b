package train

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"github.com/honeai/hone/internal/kernels"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/safetensors"
)

// AdamW is Adam with decoupled weight decay (Loshchilov & Hutter; PyTorch's torch.optim.AdamW):
// p ← p·(1 − lr·wd); m ← β1·m + (1−β1)·g; v ← β2·v + (1−β2)·g²;
// p ← p − lr·m̂/(√v̂ + eps) with bias-corrected m̂, v̂.
//
// The adapter's token rows (model.TokenRows) have moments and a step count of their own
// (TokenStep: rows given to an adapter after its first steps start from zero moments with
// their own bias correction) and no weight decay: they hold the rows' values, not a change
// from the base's, and decaying them would shrink the rows of the turn's tokens towards zero.
type AdamW struct {
	Beta1, Beta2, Eps, WeightDecay float64
	Step                           int // steps taken
	m, v                           [][]float32
	TokenStep                      int // steps the token rows took
	tm, tv                         [][]float32
}

// NewAdamW returns AdamW with PyTorch's defaults (0.9, 0.999, 1e-8) and weight decay wd.
func NewAdamW(wd float64) *AdamW {
	return &AdamW{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: wd}
}

// Update applies one step with learning rate lr to the adapter's parameters.
func (o *AdamW) Update(a *model.LoRA, g *Grads, lr float64) { o.UpdateRates(a, g, lr, lr) }

// UpdateRates is Update with learning rate tokenLR for the adapter's token rows (0: they
// are left as they are, their moments too).
func (o *AdamW) UpdateRates(a *model.LoRA, g *Grads, lr, tokenLR float64) {
	ps := params(a)
	o.m, o.v = moments(o.m, o.v, ps)
	o.Step++
	o.step(ps, g.list(), o.m, o.v, o.Step, lr, o.WeightDecay)
	if tps := tokenParams(a); len(tps) > 0 && tokenLR > 0 {
		if !sameShapes(o.tm, tps) {
			o.tm, o.tv, o.TokenStep = nil, nil, 0
		}
		o.tm, o.tv = moments(o.tm, o.tv, tps)
		o.TokenStep++
		o.step(tps, g.tokens(), o.tm, o.tv, o.TokenStep, tokenLR, 0)
	}
	a.Changed()
}

// moments returns m and v, made (zero) for the parameters ps when nil.
func moments(m, v, ps [][]float32) ([][]float32, [][]float32) {
	if m != nil {
		return m, v
	}
	m, v = make([][]float32, len(ps)), make([][]float32, len(ps))
	for i, p := range ps {
		m[i], v[i] = make([]float32, len(p)), make([]float32, len(p))
	}
	return m, v
}

// sameShapes reports whether the moments ms are shaped like the parameters ps.
func sameShapes(ms, ps [][]float32) bool {
	if len(ms) != len(ps) {
		return false
	}
	for i := range ms {
		if len(ms[i]) != len(ps[i]) {
			return false
		}
	}
	return true
}

// step is one AdamW step (the step-th) of the parameters ps with gradients gs and moments ms,
// vs: in float32 arithmetic in PyTorch's order (torch.optim.AdamW's single-tensor update:
// the decay, lerp of m, addcmul of v, √v / √(1−β2ᵗ) + eps as the denominator, addcdiv), with
// the bias corrections and step size computed once in float64 as PyTorch does in Python
// (kernels.AdamW: on AVX-512 where the CPU has it). It was in float64 per element, whose
// square root and two divisions made it 5% of a 135M model's SFT step on two cores.
func (o *AdamW) step(ps, gs, ms, vs [][]float32, step int, lr, wd float64) {
	s := &kernels.AdamWStep{W1: float32(1 - o.Beta1), B2: float32(o.Beta2), W2: float32(1 - o.Beta2),
		BC2Sqrt:  float32(math.Sqrt(1 - math.Pow(o.Beta2, float64(step)))),
		StepSize: float32(lr / (1 - math.Pow(o.Beta1, float64(step)))),
		Decay:    float32(1 - lr*wd), Eps: float32(o.Eps)}
	// The tensors on every core (an element's update depends on that element alone): on two
	// cores a serial update of a 135M model's rank-16 adapter was 2% of an SFT step.
	kernels.ParallelFor(len(ps), 1, func(i int) {
		kernels.AdamW(ps[i], gs[i], ms[i], vs[i], s)
	})
}

// optimizerFile is where Save keeps the optimizer state beside the adapter.
const optimizerFile = "optimizer.safetensors"

// Save writes the moments and step to dir/optimizer.safetensors (atomically).
func (o *AdamW) Save(dir string) error {
	var ts []safetensors.Tensor
	for i := range o.m {
		ts = append(ts, safetensors.FromF32(fmt.Sprintf("exp_avg.%d", i), []int{len(o.m[i])}, o.m[i]),
			safetensors.FromF32(fmt.Sprintf("exp_avg_sq.%d", i), []int{len(o.v[i])}, o.v[i]))
	}
	for i := range o.tm {
		ts = append(ts, safetensors.FromF32(fmt.Sprintf("token_rows.exp_avg.%d", i), []int{len(o.tm[i])}, o.tm[i]),
			safetensors.FromF32(fmt.Sprintf("token_rows.exp_avg_sq.%d", i), []int{len(o.tv[i])}, o.tv[i]))
	}
	meta := map[string]string{"step": strconv.Itoa(o.Step), "beta1": fmt.Sprint(o.Beta1), "beta2": fmt.Sprint(o.Beta2),
		"eps": fmt.Sprint(o.Eps), "weight_decay": fmt.Sprint(o.WeightDecay), "format": "hone-adamw-v1"}
	if o.tm != nil {
		meta["token_rows_step"] = strconv.Itoa(o.TokenStep)
	}
	return safetensors.Write(filepath.Join(dir, optimizerFile), ts, meta)
}

// LoadAdamW reads the state Save wrote, for an adapter shaped like a.
func LoadAdamW(dir string, a *model.LoRA) (*AdamW, error) {
	f, err := safetensors.Open(filepath.Join(dir, optimizerFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	meta := f.Metadata()
	o := &AdamW{}
	if o.Step, err = strconv.Atoi(meta["step"]); err != nil {
		return nil, fmt.Errorf("train: optimizer state: bad step %q", meta["step"])
	}
	for k, dst := range map[string]*float64{"beta1": &o.Beta1, "beta2": &o.Beta2, "eps": &o.Eps, "weight_decay": &o.WeightDecay} {
		if *dst, err = strconv.ParseFloat(meta[k], 64); err != nil {
			return nil, fmt.Errorf("train: optimizer state: bad %s %q", k, meta[k])
		}
	}
	ps := params(a)
	o.m, o.v = make([][]float32, len(ps)), make([][]float32, len(ps))
	for i, p := range ps {
		for _, which := range []struct {
			name string
			dst  *[]float32
		}{{fmt.Sprintf("exp_avg.%d", i), &o.m[i]}, {fmt.Sprintf("exp_avg_sq.%d", i), &o.v[i]}} {
			t, ok := f.Tensor(which.name)
			if !ok {
				return nil, fmt.Errorf("train: optimizer state has no %s", which.name)
			}
			v, err := t.F32()
			if err != nil {
				return nil, err
			}
			if len(v) != len(p) {
				return nil, fmt.Errorf("train: optimizer state %s has %d values, the adapter %d", which.name, len(v), len(p))
			}
			*which.dst = append([]float32(nil), v...)
		}
	}
	o.loadTokenMoments(f, tokenParams(a))
	return o, nil
}

// loadTokenMoments reads the token rows' moments, when the state has them for rows shaped
// like tps (otherwise the rows start from zero moments: rows given to the adapter later, or
// a state written before it had any).
func (o *AdamW) loadTokenMoments(f *safetensors.File, tps [][]float32) {
	step, err := strconv.Atoi(f.Metadata()["token_rows_step"])
	if err != nil || len(tps) == 0 {
		return
	}
	tm, tv := make([][]float32, len(tps)), make([][]float32, len(tps))
	for i, p := range tps {
		for _, which := range []struct {
			name string
			dst  *[]float32
		}{{fmt.Sprintf("token_rows.exp_avg.%d", i), &tm[i]}, {fmt.Sprintf("token_rows.exp_avg_sq.%d", i), &tv[i]}} {
			t, ok := f.Tensor(which.name)
			if !ok {
				return
			}
			v, err := t.F32()
			if err != nil || len(v) != len(p) {
				return
			}
			*which.dst = append([]float32(nil), v...)
		}
	}
	o.tm, o.tv, o.TokenStep = tm, tv, step
}

// Schedule is a learning-rate schedule over a run of Total steps.
type Schedule struct {
	Kind   string  // "constant" (default), "linear" (warm-up then linear decay to 0), "cosine"
	Peak   float64 // the learning rate after warm-up
	Warmup int     // steps of linear warm-up from 0
	Total  int     // steps in the run (for the decays)
	// MinRatio is the floor of the decays as a fraction of Peak (default 0).
	MinRatio float64
}

// At is the learning rate of step (0-based).
func (s Schedule) At(step int) float64 {
	if s.Warmup > 0 && step < s.Warmup {
		return s.Peak * float64(step+1) / float64(s.Warmup)
	}
	floor := s.Peak * s.MinRatio
	span := s.Total - s.Warmup
	if span <= 0 {
		return s.Peak
	}
	frac := math.Min(1, float64(step-s.Warmup)/float64(span))
	switch s.Kind {
	case "linear":
		return floor + (s.Peak-floor)*(1-frac)
	case "cosine":
		return floor + (s.Peak-floor)*0.5*(1+math.Cos(math.Pi*frac))
	}
	return s.Peak
}

// ValidSchedule reports whether kind names a schedule.
func ValidSchedule(kind string) bool {
	return kind == "" || kind == "constant" || kind == "linear" || kind == "cosine"
}

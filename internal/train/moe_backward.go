package train

import (
	"fmt"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/kernels"
	"github.com/honeai/hone/internal/model"
)

// moeTargets checks LoRA targets against a Qwen3-MoE config: Hone adapts its attention (and
// the dense MLPs of mlp_only layers); the experts are not adapted. Default targets (all seven
// modules) become the four attention projections; an explicit MLP target is refused, since
// peft would put it on the experts' 3-D weights (target_parameters), a layout Hone does not
// train.
func moeTargets(cfg *model.Config, targets []string, defaulted bool) ([]string, error) {
	if cfg.MoE == nil {
		return targets, nil
	}
	var out []string
	for _, t := range targets {
		switch t {
		case "gate_proj", "up_proj", "down_proj":
			if !defaulted {
				return nil, fmt.Errorf("train: LoRA target %s on a Qwen3-MoE model: Hone adapts the attention projections (q/k/v/o_proj), not the experts", t)
			}
		default:
			out = append(out, t)
		}
	}
	return out, nil
}

// newMoEBuffers gives a sparse layer's forward pass the buffers the backward pass reads.
func (e *Trainer) newMoEBuffers(ac *acts) *model.MoEBuffers {
	c := &e.M.Config
	mc := c.MoE
	T, H, I, E, K := ac.T, c.HiddenSize, mc.Intermediate, mc.NumExperts, mc.TopK
	ar := ac.ar
	n := T * K
	return &model.MoEBuffers{Probs: ar.raw(T * E), Wt: ar.raw(n), X: ar.raw(n * H), Gate: ar.raw(n * I), Up: ar.raw(n * I),
		ExpGate: ar.raw(n * I), Act: ar.raw(n * I), Y: ar.raw(n * H), Tmp: ar.raw(n * 2 * I)}
}

// dropMoEScratch returns what the backward pass does not read.
func (e *Trainer) dropMoEScratch(ac *acts) {
	if mb := ac.MoE; mb != nil {
		ac.ar.drop(mb.X, mb.Act, mb.Tmp)
		mb.X, mb.Act, mb.Tmp = nil, nil, nil
	}
}

// accT adds dy·W (rows × In) to dx for a frozen weight, as linearBackward does.
func (e *Trainer) accT(lin *model.Linear, dy []float32, rows int, dx []float32) {
	in, out := lin.In(), lin.Out()
	switch {
	case lin.W.Q != nil:
		lin.W.Q.MatMulAcc(dy, rows, dx)
	case e.BF16 && lin.PairsPacked(false) != nil:
		gemm.GemmPacked(false, rows, 1, dy, out, lin.PairsPacked(false), 1, dx, in)
		lin.ReleasePaired()
	default:
		if w := lin.Dense(); w.F32 != nil {
			gemm.Sgemm(false, false, rows, in, out, 1, dy, out, w.F32, in, 1, dx, in)
		} else {
			gemm.GemmHalfB(w.Kind, false, false, rows, in, out, 1, dy, out, w.Half, in, 1, dx, in)
		}
	}
}

// moeBackward takes dL/d(layer output) of a sparse layer and returns dL/dh2 (the gradient at
// the MLP norm's output): through each expert (the rows of a group at once) and through the
// routing weights the forward pass used (softmax, top-k selection held fixed, the
// normalisation), into the frozen router's input.
//
//	x_out = x_mid + Σ_k w_k·y_k, y_k = down(silu(gate(h2))·up(h2))
//	dy_k = w_k·dout, dw_k = dout·y_k; w = p[top]/Σp[top] (or p[top]); p = softmax(h2·Wrᵀ)
func (e *Trainer) moeBackward(ac *acts, dout []float32) []float32 {
	c := &e.M.Config
	mc := c.MoE
	ml := e.M.Layers[ac.layer].MoE
	mb := ac.MoE
	T, H, I, E, K := ac.T, c.HiddenSize, mc.Intermediate, mc.NumExperts, mc.TopK
	ar := ac.ar
	dh2 := ar.get(T * H)
	dw := ar.get(T * K)
	for ex := range E {
		j0, j1 := mb.Start[ex], mb.Start[ex+1]
		n := j1 - j0
		if n == 0 {
			continue
		}
		X := &ml.Experts[ex]
		dY := ar.raw(n * H)
		for r := range n {
			a := mb.Order[j0+r]
			t := int(a) / K
			d := dout[t*H : (t+1)*H]
			dw[a] = kernels.Dot(d, mb.Y[(j0+r)*H:(j0+r+1)*H])
			w := mb.Wt[a]
			row := dY[r*H : (r+1)*H]
			for i, v := range d {
				row[i] = w * v
			}
		}
		dact := ar.get(n * I)
		e.accT(&X.Down, dY, n, dact)
		g, u, eg := mb.Gate[j0*I:j1*I], mb.Up[j0*I:j1*I], mb.ExpGate[j0*I:j1*I]
		dg, du := ar.raw(n*I), ar.raw(n*I)
		kernels.SwiGLUBackward(dg, du, dact, g, u, eg)
		dX := ar.get(n * H)
		e.accT(&X.Gate, dg, n, dX)
		e.accT(&X.Up, du, n, dX)
		for r := range n {
			t := int(mb.Order[j0+r]) / K
			kernels.Add(dh2[t*H:(t+1)*H], dX[r*H:(r+1)*H])
		}
		ar.drop(dY, dact, dg, du, dX)
	}
	// Routing weights to router logits: dp at the selected experts, then the softmax.
	dz := ar.get(T * E)
	kernels.ParallelFor(T, 16, func(t int) {
		p, idx, wt := mb.Probs[t*E:(t+1)*E], mb.Idx[t*K:(t+1)*K], mb.Wt[t*K:(t+1)*K]
		dwt, z := dw[t*K:(t+1)*K], dz[t*E:(t+1)*E]
		if mc.NormTopK {
			var s, sum float64
			for k := range K {
				s += float64(dwt[k]) * float64(wt[k])
				sum += float64(p[idx[k]])
			}
			for k := range K {
				z[idx[k]] = float32((float64(dwt[k]) - s) / sum)
			}
		} else {
			for k := range K {
				z[idx[k]] = dwt[k]
			}
		}
		var dot float64
		for k := range K {
			dot += float64(z[idx[k]]) * float64(p[idx[k]])
		}
		for i := range z {
			z[i] = p[i] * (z[i] - float32(dot))
		}
	})
	gemm.Sgemm(false, false, T, H, E, 1, dz, E, ml.Router, H, 1, dh2, H)
	ar.drop(dw, dz)
	return dh2
}

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGradKernels: SwiGLUBackward, RMSNormBackward and AdamW against their formulas in
// float64, on lengths around the vector kernels' blocks.
func TestGradKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1, 7, 16, 33, 100, 1000} {
		dy, g, u := randVec(rng, n), randVec(rng, n), randVec(rng, n)
		e := make([]float32, n)
		ExpAffine(e, g, -1, 0)
		dg, du := make([]float32, n), make([]float32, n)
		SwiGLUBackward(dg, du, dy, g, u, e)
		for i := range g {
			s := 1 / (1 + math.Exp(-float64(g[i])))
			near(t, "du", float64(du[i]), float64(dy[i])*float64(g[i])*s, 1e-5)
			near(t, "dg", float64(dg[i]), float64(dy[i])*float64(u[i])*s*(1+float64(g[i])*(1-s)), 1e-5)
		}

		// y = x·inv·w with inv = 1/√(mean(x²) + eps): dL/dx for L = Σ dy·y.
		x, w := randVec(rng, n), randVec(rng, n)
		ss := 0.0
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(n)+1e-5)
		dot := 0.0
		for i := range x {
			dot += float64(dy[i]) * float64(w[i]) * float64(x[i])
		}
		dx, acc := make([]float32, n), randVec(rng, n)
		acc0 := append([]float32(nil), acc...)
		RMSNormBackward(dx, dy, x, w, inv, false)
		RMSNormBackward(acc, dy, x, w, inv, true)
		for i := range x {
			want := inv*float64(dy[i])*float64(w[i]) - inv*inv*inv*dot/float64(n)*float64(x[i])
			near(t, "rmsnorm dx", float64(dx[i]), want, 1e-5)
			near(t, "rmsnorm dx accumulated", float64(acc[i]), float64(acc0[i])+want, 1e-5)
		}

		p, m, v := randVec(rng, n), randVec(rng, n), randVec(rng, n)
		for i := range v {
			v[i] *= v[i]
		}
		p0, m0, v0 := append([]float32(nil), p...), append([]float32(nil), m...), append([]float32(nil), v...)
		const b1, b2, lr, wd, eps, step = 0.9, 0.999, 1e-3, 0.01, 1e-8, 4
		c1, c2 := 1-math.Pow(b1, step), 1-math.Pow(b2, step)
		AdamW(p, dy, m, v, &AdamWStep{W1: 1 - b1, B2: b2, W2: 1 - b2, BC2Sqrt: float32(math.Sqrt(c2)),
			StepSize: float32(lr / c1), Decay: 1 - lr*wd, Eps: eps})
		for i := range p {
			gi := float64(dy[i])
			mi := b1*float64(m0[i]) + (1-b1)*gi
			vi := b2*float64(v0[i]) + (1-b2)*gi*gi
			near(t, "adamw m", float64(m[i]), mi, 1e-6)
			near(t, "adamw v", float64(v[i]), vi, 1e-6)
			near(t, "adamw p", float64(p[i]), float64(p0[i])*(1-lr*wd)-lr*(mi/c1)/(math.Sqrt(vi/c2)+eps), 1e-6)
		}
	}
}

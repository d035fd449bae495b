package kernels

import "math"

// The element-wise parts of training's backward pass and of its optimizer, on the AVX-512
// kernels where the CPU has them (the same bits as the Go loops below, except the sum of
// RMSNormBackward, which adds in another order).

// SwiGLUBackward writes the gradients of out = silu(gate)·up (SwiGLU) with respect to gate
// and up, given dy = dL/dout and expNeg = e^(−gate) as SwiGLU keeps it: with
// s = 1/(1 + e^(−gate)), du = dy·gate·s and dg = dy·up·s·(1 + gate·(1 − s)), left to right.
func SwiGLUBackward(dg, du, dy, gate, up, expNeg []float32) {
	n := len(dg)
	du, dy, gate, up, expNeg = du[:n], dy[:n], gate[:n], up[:n], expNeg[:n]
	if hasVector && n > 0 {
		swigluBackVector(dg, du, dy, gate, up, expNeg)
		return
	}
	swigluBackGo(dg, du, dy, gate, up, expNeg)
}

func swigluBackGo(dg, du, dy, gate, up, expNeg []float32) {
	n := len(dg)
	du, dy, gate, up, expNeg = du[:n], dy[:n], gate[:n], up[:n], expNeg[:n]
	for i := range dg {
		g, s := gate[i], 1/(1+expNeg[i])
		du[i] = dy[i] * g * s
		dg[i] = dy[i] * up[i] * s * (1 + float32(g*(1-s)))
	}
}

// RMSNormBackward writes (or adds, when accumulate) dL/dx of y = x·inv·w for one row of n
// values given dy and the scale inv RMSNorm applied: dx = inv·dy·w − k·x with
// k = inv³·Σ(dy·w·x)/n, in float64, rounded to float32 (dx may alias dy). With AVX-512 the
// sum runs over sixteen lanes, an order fixed by n.
func RMSNormBackward(dx, dy, x, w []float32, inv float64, accumulate bool) {
	n := len(x)
	dx, dy, w = dx[:n], dy[:n], w[:n]
	if n == 0 {
		return
	}
	var dot float64
	if hasVector {
		dot = dot3F64Vector(dy, w, x)
	} else {
		dot = dot3F64Go(dy, w, x)
	}
	k := inv * inv * inv * dot / float64(n)
	if hasVector {
		rmsBackVector(dx, dy, x, w, inv, k, accumulate)
		return
	}
	rmsBackGo(dx, dy, x, w, inv, k, accumulate)
}

// dot3F64Go is Σ a[i]·b[i]·c[i] in float64.
func dot3F64Go(a, b, c []float32) float64 {
	b, c = b[:len(a)], c[:len(a)]
	var s float64
	for i := range a {
		s += float64(float64(a[i]) * float64(b[i]) * float64(c[i]))
	}
	return s
}

// rmsBackGo writes (or adds) float32(inv·dy[i]·w[i] − k·x[i]) to dx[i].
func rmsBackGo(dx, dy, x, w []float32, inv, k float64, accumulate bool) {
	dx, dy, w = dx[:len(x)], dy[:len(x)], w[:len(x)]
	for i := range x {
		v := float32(float64(inv*float64(dy[i])*float64(w[i])) - float64(k*float64(x[i])))
		if accumulate {
			dx[i] += v
		} else {
			dx[i] = v
		}
	}
}

// AdamWStep holds the scalars of one AdamW step, in float32 (PyTorch computes them in
// float64 once per step, as internal/train does).
type AdamWStep struct {
	W1, B2, W2 float32 // 1 − β1, β2, 1 − β2
	BC2Sqrt    float32 // √(1 − β2ᵗ)
	StepSize   float32 // lr/(1 − β1ᵗ)
	Decay      float32 // 1 − lr·weight_decay
	Eps        float32
}

// AdamW applies one AdamW update to the parameters p given their gradients g, updating the
// moments m and v, in float32 in the order of torch.optim.AdamW's single-tensor update:
// p ·= decay, m += (1−β1)·(g − m), v = v·β2 + (1−β2)·g·g, and
// p −= step·(m/(√v/√(1−β2ᵗ) + ε)).
func AdamW(p, g, m, v []float32, s *AdamWStep) {
	n := len(p)
	g, m, v = g[:n], m[:n], v[:n]
	if n == 0 {
		return
	}
	if hasVector {
		k := [7]float32{s.W1, s.B2, s.W2, s.BC2Sqrt, s.StepSize, s.Decay, s.Eps}
		adamwVector(p, g, m, v, &k)
		return
	}
	adamwGo(p, g, m, v, s)
}

func adamwGo(p, g, m, v []float32, s *AdamWStep) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	for j, gj := range g {
		mj := m[j] + float32(s.W1*(gj-m[j]))
		vj := float32(v[j]*s.B2) + float32((s.W2*gj)*gj)
		m[j], v[j] = mj, vj
		denom := float32(math.Sqrt(float64(vj)))/s.BC2Sqrt + s.Eps
		p[j] = float32(p[j]*s.Decay) - float32(s.StepSize*(mj/denom))
	}
}

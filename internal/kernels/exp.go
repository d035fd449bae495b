package kernels

import "math"

// Exp is e^x in float32 for the softmax and SiLU kernels: range reduction x = n·ln2 + r with
// |r| ≤ ln2/2 (ln2 split in two parts for exactness), a degree-6 polynomial for e^r, and the
// exponent n put in directly. Relative error under 2e-7 (about 2 ulp) over the whole range;
// below -87.3 it returns 0 (float32 subnormals are flushed), above 88.72 +Inf; NaN stays NaN.
// It is several times faster than math.Exp through float64.
func Exp(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88.72283:
		return float32(math.Inf(1))
	case x < -87.33654:
		return 0
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	t := x * log2e
	if t >= 0 {
		t += 0.5
	} else {
		t -= 0.5
	}
	e := int32(t) // round to nearest
	n := float32(e)
	r := x - n*ln2hi - n*ln2lo
	// e^r ≈ 1 + r + r²/2! + ... + r⁶/6! (Horner).
	p := float32(1.0 / 720)
	p = p*r + 1.0/120
	p = p*r + 1.0/24
	p = p*r + 1.0/6
	p = p*r + 0.5
	p = p*r + 1
	p = p*r + 1
	if e > 127 { // x just below the overflow bound
		p *= 2
		e--
	}
	return p * math.Float32frombits(uint32(e+127)<<23)
}

// ExpAffine sets dst[i] = e^(a·src[i]+b) for every i < len(src) and returns the sum of the
// results (dst may be src). Where the CPU has AVX-512 every element runs on the vector kernel
// (the algorithm of Exp, sixteen lanes at a time, within 2 ulp of Exp; it also returns
// subnormal results where Exp returns 0, between -103.3 and -87.34): blocks of 16, then the
// rest padded to 16, so that an element's exponential is the same bits wherever it falls in
// src (SwiGLU's flat rows: batch invariance). Elsewhere Exp. −Inf gives 0, as masked logits
// need. The sum adds the blocks' lanes, then the rest one by one. Softmax, log-sum-exp and
// sigmoid use it.
func ExpAffine(dst, src []float32, a, b float32) float32 {
	dst = dst[:len(src)]
	n := 0
	var s float32
	if hasVector && len(src) >= 16 {
		n = len(src) &^ 15
		s = expVector(n, &dst[0], &src[0], a, b)
	}
	if hasVector && n < len(src) {
		var in, out [16]float32
		copy(in[:], src[n:])
		expVector(16, &out[0], &in[0], a, b)
		for i, e := range out[:len(src)-n] {
			dst[n+i] = e
			s += e
		}
		return s
	}
	for i := n; i < len(src); i++ {
		e := Exp(a*src[i] + b)
		dst[i] = e
		s += e
	}
	return s
}

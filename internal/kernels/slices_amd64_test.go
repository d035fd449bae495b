//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// vecLens are lengths around the kernels' blocks of 16 and 64, and a few long ones.
var vecLens = func() []int {
	var ns []int
	for n := 1; n <= 70; n++ {
		ns = append(ns, n)
	}
	return append(ns, 127, 128, 129, 576, 1000, 1536, 4099)
}()

func needVector(t testing.TB) {
	if !hasVector {
		t.Skip("no AVX-512 on this CPU")
	}
}

// guarded returns a slice of n random values whose backing array has 33 sentinels after it,
// and a function that fails the test if a kernel wrote one of them.
func guarded(t *testing.T, rng *rand.Rand, n int) ([]float32, func(string)) {
	t.Helper()
	full := randVec(rng, n+33)
	for i := n; i < len(full); i++ {
		full[i] = 12345
	}
	return full[:n], func(what string) {
		t.Helper()
		for i := n; i < len(full); i++ {
			if full[i] != 12345 {
				t.Fatalf("%s, n %d: wrote past the end (element %d = %v)", what, n, i, full[i])
			}
		}
	}
}

func sameBits(t *testing.T, what string, n int, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s, n %d: element %d = %v, Go %v", what, n, i, got[i], want[i])
		}
	}
}

// TestSliceKernelsMatchGo: the AVX-512 element-wise kernels give the Go loops' bits on every
// length (whole blocks and a masked rest), write nothing past the end, and the reductions
// agree with float64 sums.
func TestSliceKernelsMatchGo(t *testing.T) {
	needVector(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range vecLens {
		a, b := randVec(rng, n), randVec(rng, n)
		for i := range a {
			a[i] *= float32(math.Exp(rng.NormFloat64() * 3)) // a wide range of magnitudes
		}

		dst, check := guarded(t, rng, n)
		want := append([]float32(nil), dst...)
		Add(dst, a)
		addGo(want, a)
		sameBits(t, "add", n, dst, want)
		check("add")
		Axpy(-0.37, a, dst)
		axpyGo(-0.37, a, want)
		sameBits(t, "axpy", n, dst, want)
		check("axpy")

		out, check := guarded(t, rng, n)
		mulScaleVector(out, a, b, 0.123)
		mulScaleGo(want, a, b, 0.123)
		sameBits(t, "rmsnorm scaling", n, out, want)
		check("rmsnorm scaling")
		inPlace := append([]float32(nil), a...)
		mulScaleVector(inPlace, inPlace, b, 0.123)
		sameBits(t, "rmsnorm scaling in place", n, inPlace, want)

		var exact, abs float64
		for i := range a {
			exact += float64(a[i]) * float64(b[i])
			abs += math.Abs(float64(a[i]) * float64(b[i]))
		}
		if d := math.Abs(float64(Dot(a, b)) - exact); d > 1e-6*abs {
			t.Fatalf("dot, n %d: %v, exact %v (Go %v)", n, Dot(a, b), exact, dotGo(a, b))
		}

		// SwiGLU: the fused pass keeps ExpAffine's exponentials and gives swiglu's values.
		g, u := randVec(rng, n), randVec(rng, n)
		for i := range g {
			g[i] *= 4
		}
		e := make([]float32, n)
		ExpAffine(e, g, -1, 0)
		swiglu(want, e, g, u)
		ev, check := guarded(t, rng, n)
		swigluVector(out, ev, g, u)
		sameBits(t, "swiglu e", n, ev, e)
		sameBits(t, "swiglu", n, out, want)
		check("swiglu e")
		clear(out)
		swigluVector(out, nil, g, u)
		sameBits(t, "swiglu without e", n, out, want)

		dg, du := make([]float32, n), make([]float32, n)
		wdg, wdu := make([]float32, n), make([]float32, n)
		SwiGLUBackward(dg, du, a, g, u, e)
		swigluBackGo(wdg, wdu, a, g, u, e)
		sameBits(t, "swiglu backward dg", n, dg, wdg)
		sameBits(t, "swiglu backward du", n, du, wdu)

		// RMSNorm backward: the sum within float64 rounding, the rest the Go loop's bits.
		x, w := randVec(rng, n), randVec(rng, n)
		dot := dot3F64Go(a, w, x)
		if d := math.Abs(dot3F64Vector(a, w, x) - dot); d > 1e-12*math.Max(1, math.Abs(dot)) {
			t.Fatalf("dot3, n %d: %v, Go %v", n, dot3F64Vector(a, w, x), dot)
		}
		for _, acc := range []bool{false, true} {
			dx, check := guarded(t, rng, n)
			copy(want, dx)
			rmsBackVector(dx, a, x, w, 0.9, 0.01, acc)
			rmsBackGo(want, a, x, w, 0.9, 0.01, acc)
			sameBits(t, fmt.Sprint("rmsnorm backward, accumulate ", acc), n, dx, want)
			check("rmsnorm backward")
		}
		alias := append([]float32(nil), a...)
		rmsBackVector(alias, alias, x, w, 0.9, 0.01, false)
		rmsBackGo(want, a, x, w, 0.9, 0.01, false)
		sameBits(t, "rmsnorm backward in place", n, alias, want)

		// AdamW.
		p, m, v := randVec(rng, n), randVec(rng, n), randVec(rng, n)
		for i := range v {
			v[i] = v[i] * v[i] * 1e-4
			m[i] *= 1e-2
		}
		gp, gm, gv := append([]float32(nil), p...), append([]float32(nil), m...), append([]float32(nil), v...)
		st := &AdamWStep{W1: 0.1, B2: 0.999, W2: 0.001, BC2Sqrt: float32(math.Sqrt(1 - math.Pow(0.999, 3))),
			StepSize: float32(1e-4 / (1 - math.Pow(0.9, 3))), Decay: 1 - 1e-4*0.01, Eps: 1e-8}
		AdamW(p, a, m, v, st)
		adamwGo(gp, a, gm, gv, st)
		sameBits(t, "adamw p", n, p, gp)
		sameBits(t, "adamw m", n, m, gm)
		sameBits(t, "adamw v", n, v, gv)
	}
}

// TestRopeVectorMatchesGo: Table.Apply and ApplyInverse give the Go loop's bits for head
// sizes whose half is and is not a multiple of 16, leaving the values past the head alone.
func TestRopeVectorMatchesGo(t *testing.T) {
	needVector(t)
	rng := rand.New(rand.NewPCG(13, 14))
	for _, hd := range []int{6, 32, 64, 80, 96, 128, 256} {
		tab := NewRope(hd, 10000).Table(300)
		for _, pos := range []int{0, 1, 17, 299} {
			x := randVec(rng, hd+5)
			want := append([]float32(nil), x...)
			c, s := tab.at(pos)
			tab.Apply(x, pos)
			ropeGo(want[:hd/2], want[hd/2:hd], c, s, false)
			sameBits(t, fmt.Sprintf("rope head %d pos %d", hd, pos), hd+5, x, want)
			tab.ApplyInverse(x, pos)
			ropeGo(want[:hd/2], want[hd/2:hd], c, s, true)
			sameBits(t, fmt.Sprintf("inverse rope head %d pos %d", hd, pos), hd+5, x, want)
		}
	}
}

// BenchmarkSliceKernels: each AVX-512 kernel against its Go loop on rows of 1536 values (a
// 135M model's MLP width: in L1/L2), in GB/s of the slices read and written.
// (RoPE: a 1536-value row rotated by 768 angles; RMSNorm backward: its sum and its pass.)
func BenchmarkSliceKernels(b *testing.B) {
	needVector(b)
	const n = 1536
	rng := rand.New(rand.NewPCG(1, 1))
	v := make([][]float32, 6)
	for i := range v {
		v[i] = randVec(rng, n)
	}
	v[5] = make([]float32, n)
	ExpAffine(v[5], v[2], -1, 0)
	type kernel struct {
		name   string
		slices int // read and written
		vec    func()
		goLoop func()
	}
	adams := AdamWStep{W1: 0.1, B2: 0.999, W2: 0.001, BC2Sqrt: 0.1, StepSize: 1e-4, Decay: 1, Eps: 1e-8}
	adamk := [7]float32{adams.W1, adams.B2, adams.W2, adams.BC2Sqrt, adams.StepSize, adams.Decay, adams.Eps}
	vs := make([][]float32, 4)
	for i := range vs {
		vs[i] = randVec(rng, n)
		for j := range vs[i] {
			vs[i][j] = vs[i][j] * vs[i][j]
		}
	}
	kernels := []kernel{
		{"dot", 2, func() { dotVector(v[0], v[1]) }, func() { dotGo(v[0], v[1]) }},
		{"add", 3, func() { addVector(v[0], v[1]) }, func() { addGo(v[0], v[1]) }},
		{"axpy", 3, func() { axpyVector(1e-9, v[1], v[0]) }, func() { axpyGo(1e-9, v[1], v[0]) }},
		{"rmsnorm-scale", 3, func() { mulScaleVector(v[0], v[1], v[2], 1) }, func() { mulScaleGo(v[0], v[1], v[2], 1) }},
		{"swiglu", 4, func() { swigluVector(v[0], v[5], v[2], v[3]) }, func() {
			ExpAffine(v[5], v[2], -1, 0) // the Go path's exponentials run on the vector kernel too
			swiglu(v[0], v[5], v[2], v[3])
		}},
		{"swiglu-backward", 6, func() { swigluBackVector(v[0], v[1], v[4], v[2], v[3], v[5]) }, func() { swigluBackGo(v[0], v[1], v[4], v[2], v[3], v[5]) }},
		{"rope", 3, func() { ropeVector(v[0][:n/2], v[0][n/2:], v[1], v[2], 1) }, func() { ropeGo(v[0][:n/2], v[0][n/2:], v[1], v[2], false) }},
		{"rmsnorm-backward", 8, func() {
			rmsBackVector(v[0], v[1], v[2], v[3], 1, dot3F64Vector(v[1], v[3], v[2])*1e-9, true)
		}, func() { rmsBackGo(v[0], v[1], v[2], v[3], 1, dot3F64Go(v[1], v[3], v[2])*1e-9, true) }},
		{"adamw", 7, func() { adamwVector(vs[0], v[1], vs[2], vs[3], &adamk) }, func() {
			adamwGo(vs[0], v[1], vs[2], vs[3], &adams)
		}},
	}
	for _, k := range kernels {
		for _, side := range []string{"avx512", "go"} {
			run := k.vec
			if side == "go" {
				run = k.goLoop
			}
			b.Run(k.name+"/"+side, func(b *testing.B) {
				for b.Loop() {
					run()
				}
				b.ReportMetric(float64(4*n*k.slices)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

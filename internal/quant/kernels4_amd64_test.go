//go:build amd64 && !purego

package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/honeai/hone/internal/gguf"
)

// multiRowKernels is one implementation of every multi-row kernel, with whether this CPU
// can run it.
type multiRowKernels struct {
	name                    string
	ok                      bool
	q80, q40, q41, q50, q51 kern4
}

func allMultiRowKernels() []multiRowKernels {
	return []multiRowKernels{
		{"go", true, dot4Q8_0Go, dot4Q4_0Go, dot4Q4_1Go, dot4Q5_0Go, dot4Q5_1Go},
		{"avx512", asmVNNI, dot4Q8_0AVX512, dot4Q4_0AVX512, dot4Q4_1AVX512, dot4Q5_0AVX512, dot4Q5_1AVX512},
		{"avx2", asmAVX2, dot4Q8_0AVX2, dot4Q4_0AVX2, dot4Q4_1AVX2, dot4Q5_0AVX2, dot4Q5_1AVX2},
		{"dispatch", true, dot4Q8_0, dot4Q4_0, dot4Q4_1, dot4Q5_0, dot4Q5_1},
	}
}

func (k multiRowKernels) get(typ gguf.TensorType) kern4 {
	switch typ {
	case gguf.Q8_0:
		return k.q80
	case gguf.Q4_0:
		return k.q40
	case gguf.Q4_1:
		return k.q41
	case gguf.Q5_0:
		return k.q50
	case gguf.Q5_1:
		return k.q51
	}
	panic(typ)
}

var multiRowTypes = []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1}

// checkMultiRow compares every multi-row kernel on w against 4 activation rows with the Go
// row kernel on each row. The offset kernels (Q8_0, Q4_0, Q5_0) subtract o·d·s from
// d·dx·Σ(q+o)·x, so their tolerance adds the rounding of that term.
func checkMultiRow(t *testing.T, typ gguf.TensorType, w []byte, rows [4]testActs, what string) {
	t.Helper()
	nb := len(rows[0].d)
	var q []int8
	var d, s []float32
	for _, a := range rows {
		q, d, s = append(q, a.q...), append(d, a.d...), append(s, a.s...)
	}
	for _, im := range allMultiRowKernels() {
		if !im.ok {
			continue
		}
		out := [4]float32{9, 9, 9, 9}
		im.get(typ)(w, q, d, s, &out)
		for r, a := range rows {
			want := goRowKernels.call(typ, w, a)
			off := 0.0
			for b := range nb {
				off += 128 * math.Abs(float64(f16(w[typ.BlockBytes()*b:]))*float64(a.s[b]))
			}
			tol := 1e-5*absDotRef(t, typ, w, a) + 1e-6*off + 1e-6
			if diff := math.Abs(float64(out[r]) - float64(want)); !(diff <= tol) {
				t.Errorf("%v %s, %s row %d: %g, Go row kernel %g (tolerance %g)", typ, what, im.name, r, out[r], want, tol)
			}
		}
	}
}

func TestMultiRowKernelsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, typ := range multiRowTypes {
		for _, nb := range asmBlockCounts(typ) {
			for rep := range 3 {
				var rows [4]testActs
				for i := range rows {
					rows[i] = randomTestActs(r, typ, nb*32)
				}
				checkMultiRow(t, typ, randomBlocks(r, typ, nb), rows, fmt.Sprintf("%d blocks #%d", nb, rep))
			}
		}
	}
}

func TestMultiRowKernelsExtreme(t *testing.T) {
	for _, typ := range multiRowTypes {
		for _, nb := range []int{1, 2, 3, 6, 17} {
			var rows [4]testActs
			for p := range rows {
				q := make([]int8, nb*32)
				for i := range q {
					switch p {
					case 0:
						q[i] = 127
					case 1:
						q[i] = -127
					case 2:
						q[i] = int8(127 - 254*(i&1))
					default:
						q[i] = int8(127 - 254*(i/16&1))
					}
				}
				d := make([]float32, nb)
				for i := range d {
					d[i] = 0.02
				}
				rows[p] = testActsFrom(q, d, 32)
			}
			for _, low := range []bool{false, true} {
				checkMultiRow(t, typ, extremeTestBlocks(typ, nb, low), rows, fmt.Sprintf("%d blocks, weights low=%v", nb, low))
			}
		}
	}
}

// TestMultiRowKernelsCheckLengths: the dispatched assembly kernels panic on short slices.
func TestMultiRowKernelsCheckLengths(t *testing.T) {
	if !asmAVX2 {
		t.Skip("no assembly kernels on this CPU")
	}
	for _, typ := range multiRowTypes {
		k := allMultiRowKernels()[3].get(typ)
		w, q, d, s := make([]byte, 2*typ.BlockBytes()), make([]int8, 4*64), make([]float32, 8), make([]float32, 8)
		var out [4]float32
		for _, c := range []func(){
			func() { k(w[:len(w)-1], q, d, s, &out) },
			func() { k(w, q[:len(q)-1], d, s, &out) },
			func() { k(w, q, d, s[:7], &out) },
			func() { k(w, q, d[:7], s, &out) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%v: short slices: no panic", typ)
					}
				}()
				c()
			}()
		}
	}
}

// TestQuantizeActs32Asm: the assembly quantizer gives the Go one's values exactly (random
// rows of several scales, blocks of zeros, halves that round to even).
func TestQuantizeActs32Asm(t *testing.T) {
	if !asmVNNI {
		t.Skip("no AVX-512 on this CPU")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, nb := range []int{0, 1, 2, 3, 7, 18, 48} {
		for rep := range 6 {
			x := make([]float32, 32*nb)
			for i := range x {
				x[i] = float32(r.NormFloat64()) * float32(math.Pow(10, float64(rep-3)))
				switch {
				case rep == 4 && i/32 == 1:
					x[i] = 0 // a block of zeros
				case rep == 5:
					x[i] = float32(r.IntN(252)-126) + 0.5 // with max 127, D = 1: ties
				}
			}
			if rep == 5 && nb > 0 {
				x[0] = 127
			}
			q1, d1, s1 := make([]int8, len(x)), make([]float32, nb), make([]float32, nb)
			q2, d2, s2 := make([]int8, len(x)), make([]float32, nb), make([]float32, nb)
			for i := range q2 {
				q2[i] = 99
			}
			quantizeActs32Go(q1, d1, s1, x)
			quantizeActs32AVX512(q2, d2, s2, x)
			for i := range q1 {
				if q1[i] != q2[i] {
					t.Fatalf("%d blocks #%d: q[%d] = %d, Go %d (x %g, d %g)", nb, rep, i, q2[i], q1[i], x[i], d1[i/32])
				}
			}
			for b := range d1 {
				if d1[b] != d2[b] || s1[b] != s2[b] {
					t.Fatalf("%d blocks #%d: block %d d, s = %g, %g; Go %g, %g", nb, rep, b, d2[b], s2[b], d1[b], s1[b])
				}
			}
		}
	}
}

// multiRowKernelsK are the K-quants' multi-row kernels, Go and assembly, by type.
func multiRowKernelsK(typ gguf.TensorType) []struct {
	name string
	ok   bool
	k    kern4K
} {
	type impl = struct {
		name string
		ok   bool
		k    kern4K
	}
	switch typ {
	case gguf.Q4_K:
		return []impl{{"go", true, dot4Q4_KGo}, {"avx512", asmVNNI, dot4Q4_KAVX512}, {"dispatch", dot4Q4_K != nil, dot4Q4_K}}
	case gguf.Q6_K:
		return []impl{{"go", true, dot4Q6_KGo}, {"avx512", asmVNNI, dot4Q6_KAVX512}, {"dispatch", dot4Q6_K != nil, dot4Q6_K}}
	}
	return nil
}

func checkMultiRowK(t *testing.T, typ gguf.TensorType, w []byte, rows [4]testActs, what string) {
	t.Helper()
	var q []int8
	var d []float32
	var bs []int16
	for _, a := range rows {
		q, d, bs = append(q, a.q...), append(d, a.d...), append(bs, a.bsums...)
	}
	for _, im := range multiRowKernelsK(typ) {
		if !im.ok {
			continue
		}
		out := [4]float32{9, 9, 9, 9}
		im.k(w, q, d, bs, &out)
		for r, a := range rows {
			want := goRowKernels.call(typ, w, a)
			tol := 1e-5*absDotRef(t, typ, w, a) + 1e-6
			if diff := math.Abs(float64(out[r]) - float64(want)); !(diff <= tol) {
				t.Errorf("%v %s, %s row %d: %g, Go row kernel %g (tolerance %g)", typ, what, im.name, r, out[r], want, tol)
			}
		}
	}
}

func TestMultiRowKernelsK(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range []gguf.TensorType{gguf.Q4_K, gguf.Q6_K} {
		for _, nb := range asmBlockCounts(typ) {
			for rep := range 3 {
				var rows [4]testActs
				for i := range rows {
					rows[i] = randomTestActs(r, typ, nb*256)
				}
				checkMultiRowK(t, typ, randomBlocks(r, typ, nb), rows, fmt.Sprintf("%d super-blocks #%d", nb, rep))
			}
		}
		for _, nb := range []int{1, 3} {
			var rows [4]testActs
			for p := range rows {
				q := make([]int8, nb*256)
				for i := range q {
					q[i] = int8(127 - 254*((i>>p)&1))
				}
				d := make([]float32, nb)
				for i := range d {
					d[i] = 0.02
				}
				rows[p] = testActsFrom(q, d, 256)
			}
			for _, low := range []bool{false, true} {
				checkMultiRowK(t, typ, extremeTestBlocks(typ, nb, low), rows, fmt.Sprintf("%d super-blocks, weights low=%v", nb, low))
			}
		}
	}
}

func TestMultiRowKernelsKCheckLengths(t *testing.T) {
	for _, typ := range []gguf.TensorType{gguf.Q4_K, gguf.Q6_K} {
		k := kernel4K(typ)
		if k == nil {
			continue
		}
		w, q, d, bs := make([]byte, 2*typ.BlockBytes()), make([]int8, 4*512), make([]float32, 8), make([]int16, 4*32)
		var out [4]float32
		for _, c := range []func(){
			func() { k(w[:len(w)-1], q, d, bs, &out) },
			func() { k(w, q[:len(q)-1], d, bs, &out) },
			func() { k(w, q, d, bs[:len(bs)-1], &out) },
			func() { k(w, q, d[:7], bs, &out) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%v: short slices: no panic", typ)
					}
				}()
				c()
			}()
		}
	}
}

//go:build amd64 && !purego

package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
)

// rowKernels is one implementation of every row kernel.
type rowKernels struct {
	q80, q40, q50 func(w []byte, q []int8, d []float32) float32
	q41, q51      func(w []byte, q []int8, d, s []float32) float32
	q4k, q5k, q6k func(w []byte, q []int8, d []float32, bsums []int16) float32
}

var goRowKernels = rowKernels{dotQ8_0Go, dotQ4_0Go, dotQ5_0Go, dotQ4_1Go, dotQ5_1Go, dotQ4_KGo, dotQ5_KGo, dotQ6_KGo}

// asmRowKernels are the assembly implementations, each with whether this CPU can run it, and the
// dispatch in use.
func asmRowKernels() []struct {
	name string
	ok   bool
	k    rowKernels
} {
	return []struct {
		name string
		ok   bool
		k    rowKernels
	}{
		{"avx512", asmVNNI, rowKernels{dotQ8_0AVX512, dotQ4_0AVX512, dotQ5_0AVX512, dotQ4_1AVX512, dotQ5_1AVX512,
			dotQ4_KAVX512, dotQ5_KAVX512, dotQ6_KAVX512}},
		{"avx2", asmAVX2, rowKernels{dotQ8_0AVX2, dotQ4_0AVX2, dotQ5_0AVX2, dotQ4_1AVX2, dotQ5_1AVX2,
			dotQ4_KAVX2, dotQ5_KAVX2, dotQ6_KAVX2}},
		{"dispatch", true, rowKernels{dotQ8_0, dotQ4_0, dotQ5_0, dotQ4_1, dotQ5_1, dotQ4_K, dotQ5_K, dotQ6_K}},
	}
}

var rowKernelTypes = []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}

// testActs is a row of quantized activations in both layouts' fields (those of its type's
// block size are filled in).
type testActs struct {
	q     []int8
	d, s  []float32
	bsums []int16
}

// testActsFrom builds the activations of q with the per-block scales d (block size bs),
// computing the sums the kernels take.
func testActsFrom(q []int8, d []float32, bs int) testActs {
	a := testActs{q: q, d: d, s: make([]float32, len(d)), bsums: make([]int16, len(q)/16)}
	for b := range d {
		sum := 0
		for _, v := range q[bs*b : bs*b+bs] {
			sum += int(v)
		}
		a.s[b] = d[b] * float32(sum)
	}
	for g := range a.bsums {
		sum := 0
		for _, v := range q[16*g : 16*g+16] {
			sum += int(v)
		}
		a.bsums[g] = int16(sum)
	}
	return a
}

func (k rowKernels) call(typ gguf.TensorType, w []byte, a testActs) float32 {
	switch typ {
	case gguf.Q8_0:
		return k.q80(w, a.q, a.d)
	case gguf.Q4_0:
		return k.q40(w, a.q, a.d)
	case gguf.Q5_0:
		return k.q50(w, a.q, a.d)
	case gguf.Q4_1:
		return k.q41(w, a.q, a.d, a.s)
	case gguf.Q5_1:
		return k.q51(w, a.q, a.d, a.s)
	case gguf.Q4_K:
		return k.q4k(w, a.q, a.d, a.bsums)
	case gguf.Q5_K:
		return k.q5k(w, a.q, a.d, a.bsums)
	case gguf.Q6_K:
		return k.q6k(w, a.q, a.d, a.bsums)
	}
	panic(typ)
}

// absDotRef is Σ|w·x| over the dequantized row, the scale of the kernels' rounding errors.
func absDotRef(t *testing.T, typ gguf.TensorType, w []byte, a testActs) float64 {
	t.Helper()
	if len(a.d) == 0 {
		return 0
	}
	x, err := gguf.Dequantize(typ, w, len(a.q))
	if err != nil {
		t.Fatal(err)
	}
	bs := len(a.q) / len(a.d)
	s := 0.0
	for i, v := range x {
		s += math.Abs(float64(v) * float64(a.d[i/bs]) * float64(a.q[i]))
	}
	return s
}

// checkAsmKernels compares every assembly implementation the CPU has with the Go kernel on w, a.
func checkAsmKernels(t *testing.T, typ gguf.TensorType, w []byte, a testActs, what string) {
	t.Helper()
	want := goRowKernels.call(typ, w, a)
	tol := 1e-5*absDotRef(t, typ, w, a) + 1e-6
	for _, im := range asmRowKernels() {
		if !im.ok {
			continue
		}
		got := im.k.call(typ, w, a)
		if diff := math.Abs(float64(got) - float64(want)); !(diff <= tol) {
			t.Errorf("%v %s, %s: %g, Go %g (tolerance %g)", typ, what, im.name, got, want, tol)
		}
	}
}

func TestAsmImplsAvailable(t *testing.T) {
	for _, im := range asmRowKernels() {
		if !im.ok {
			t.Logf("%s kernels: not supported by this CPU, skipped", im.name)
		}
	}
}

// randomTestActs quantizes n normal values for typ's block size.
func randomTestActs(r *rand.Rand, typ gguf.TensorType, n int) testActs {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	if typ.BlockSize() == 32 {
		var a Acts32
		QuantizeActs32(&a, x)
		return testActsFrom(a.Q, a.D, 32)
	}
	var a ActsK
	QuantizeActsK(&a, x)
	return testActsFrom(a.Q, a.D, 256)
}

func asmBlockCounts(typ gguf.TensorType) []int {
	if typ.BlockSize() == 32 {
		return []int{0, 1, 2, 3, 4, 5, 7, 9, 17, 18, 33, 48}
	}
	return []int{0, 1, 2, 3, 5, 6, 7}
}

func TestAsmKernelsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, typ := range rowKernelTypes {
		for _, nb := range asmBlockCounts(typ) {
			for rep := range 3 {
				a := randomTestActs(r, typ, nb*typ.BlockSize())
				w := randomBlocks(r, typ, nb)
				checkAsmKernels(t, typ, w, a, fmt.Sprintf("%d blocks #%d", nb, rep))
			}
		}
	}
}

// extremeTestBlocks is nb blocks of typ with every quantized value at its maximum (Q8_0: all
// −128) and every scale and min at its largest magnitude, scales positive.
func extremeTestBlocks(typ gguf.TensorType, nb int, low bool) []byte {
	size := typ.BlockBytes()
	w := make([]byte, nb*size)
	fill := byte(0xff)
	if low {
		fill = 0
	}
	for i := range w {
		w[i] = fill
	}
	h := gemm.Float32ToF16(0.03)
	put := func(o int) { w[o], w[o+1] = byte(h), byte(h>>8) }
	for b := range nb {
		o := b * size
		switch typ {
		case gguf.Q8_0:
			put(o)
			for i := 2; i < 34; i++ {
				w[o+i] = 0x80
				if low {
					w[o+i] = 0x7f
				}
			}
		case gguf.Q4_0, gguf.Q5_0:
			put(o)
		case gguf.Q4_1, gguf.Q5_1, gguf.Q4_K, gguf.Q5_K:
			put(o)
			put(o + 2)
			if typ == gguf.Q4_K || typ == gguf.Q5_K {
				for i := 4; i < 16; i++ {
					w[o+i] = 0xff // scales and mins 63
				}
			}
		case gguf.Q6_K:
			for i := 192; i < 208; i++ {
				w[o+i] = 0x80 // scales −128
				if low {
					w[o+i] = 0x7f
				}
			}
			put(o + 208)
		}
	}
	return w
}

func TestAsmKernelsExtreme(t *testing.T) {
	for _, typ := range rowKernelTypes {
		bs := typ.BlockSize()
		for _, nb := range []int{1, 2, 3, 6, 17} {
			n := nb * bs
			for _, pattern := range []string{"+127", "-127", "±127", "127 then -127"} {
				q := make([]int8, n)
				for i := range q {
					switch pattern {
					case "+127":
						q[i] = 127
					case "-127":
						q[i] = -127
					case "±127":
						q[i] = int8(127 - 254*(i&1))
					default:
						q[i] = int8(127 - 254*(i/16&1))
					}
				}
				d := make([]float32, nb)
				for i := range d {
					d[i] = 0.02
				}
				a := testActsFrom(q, d, bs)
				for _, low := range []bool{false, true} {
					w := extremeTestBlocks(typ, nb, low)
					checkAsmKernels(t, typ, w, a, fmt.Sprintf("%d blocks, weights low=%v, testActs %s", nb, low, pattern))
				}
			}
		}
	}
}

// TestAsmKernelsUnaligned runs the kernels on sub-slices starting at odd offsets.
func TestAsmKernelsUnaligned(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range rowKernelTypes {
		for _, nb := range []int{1, 3, 6, 19} {
			for _, off := range []int{1, 3, 7} {
				a := randomTestActs(r, typ, nb*typ.BlockSize())
				w := randomBlocks(r, typ, nb)
				wb := make([]byte, len(w)+off)
				w = wb[off:][:len(w):len(w)]
				copy(w, randomBlocks(r, typ, nb))
				qb := make([]int8, len(a.q)+off)
				copy(qb[off:], a.q)
				db := make([]float32, len(a.d)+1)
				copy(db[1:], a.d)
				sb := make([]float32, len(a.s)+1)
				copy(sb[1:], a.s)
				bb := make([]int16, len(a.bsums)+1)
				copy(bb[1:], a.bsums)
				u := testActs{q: qb[off:][:len(a.q):len(a.q)], d: db[1:][:len(a.d):len(a.d)], s: sb[1:][:len(a.s):len(a.s)],
					bsums: bb[1:][:len(a.bsums):len(a.bsums)]}
				checkAsmKernels(t, typ, w, u, fmt.Sprintf("%d blocks at offset %d", nb, off))
			}
		}
	}
}

// TestAsmKernelsCheckLengths: the dispatched assembly kernels panic, as the Go ones do,
// rather than read past slices too short for len(d) blocks.
func TestAsmKernelsCheckLengths(t *testing.T) {
	if !asmAVX2 {
		t.Skip("no assembly kernels on this CPU")
	}
	k := asmRowKernels()[len(asmRowKernels())-1].k // the dispatch
	for _, typ := range rowKernelTypes {
		a := testActsFrom(make([]int8, 2*typ.BlockSize()), []float32{1, 1}, typ.BlockSize())
		w := make([]byte, 2*typ.BlockBytes())
		type shortCase struct {
			what string
			w    []byte
			a    testActs
		}
		short := []shortCase{
			{"weights", w[:len(w)-1], a},
			{"activations", w, testActs{q: a.q[:len(a.q)-1], d: a.d, s: a.s, bsums: a.bsums}},
		}
		switch typ {
		case gguf.Q4_1, gguf.Q5_1:
			short = append(short, shortCase{"sums", w, testActs{q: a.q, d: a.d, s: a.s[:1], bsums: a.bsums}})
		case gguf.Q4_K, gguf.Q5_K, gguf.Q6_K:
			short = append(short, shortCase{"sums", w, testActs{q: a.q, d: a.d, s: a.s, bsums: a.bsums[:len(a.bsums)-1]}})
		}
		for _, c := range short {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%v: short %s: no panic", typ, c.what)
					}
				}()
				k.call(typ, c.w, c.a)
			}()
		}
		if got := k.call(typ, w, a); got != 0 {
			t.Errorf("%v: zero row: %g", typ, got)
		}
	}
}

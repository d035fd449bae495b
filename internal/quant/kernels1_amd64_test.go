//go:build amd64 && !purego

package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/honeai/hone/internal/gguf"
)

// singleRowKernels are the single-row versions of one assembly set's multi-row kernels,
// beside those (a nil kern4 or kern4K where the set has none).
type singleRowKernels struct {
	name string
	ok   bool
	x4   map[gguf.TensorType]kern4
	x1   map[gguf.TensorType]kern1
	x4K  map[gguf.TensorType]kern4K
	x1K  map[gguf.TensorType]kern1K
}

func allSingleRowKernels() []singleRowKernels {
	return []singleRowKernels{
		{"avx512", asmVNNI,
			map[gguf.TensorType]kern4{gguf.Q8_0: dot4Q8_0AVX512, gguf.Q4_0: dot4Q4_0AVX512, gguf.Q4_1: dot4Q4_1AVX512, gguf.Q5_0: dot4Q5_0AVX512, gguf.Q5_1: dot4Q5_1AVX512},
			map[gguf.TensorType]kern1{gguf.Q8_0: dot1Q8_0AVX512, gguf.Q4_0: dot1Q4_0AVX512, gguf.Q4_1: dot1Q4_1AVX512, gguf.Q5_0: dot1Q5_0AVX512, gguf.Q5_1: dot1Q5_1AVX512},
			map[gguf.TensorType]kern4K{gguf.Q4_K: dot4Q4_KAVX512, gguf.Q6_K: dot4Q6_KAVX512},
			map[gguf.TensorType]kern1K{gguf.Q4_K: dot1Q4_KAVX512, gguf.Q6_K: dot1Q6_KAVX512}},
		{"avx2", asmAVX2,
			map[gguf.TensorType]kern4{gguf.Q8_0: dot4Q8_0AVX2, gguf.Q4_0: dot4Q4_0AVX2, gguf.Q4_1: dot4Q4_1AVX2, gguf.Q5_0: dot4Q5_0AVX2, gguf.Q5_1: dot4Q5_1AVX2},
			map[gguf.TensorType]kern1{gguf.Q8_0: dot1Q8_0AVX2, gguf.Q4_0: dot1Q4_0AVX2, gguf.Q4_1: dot1Q4_1AVX2, gguf.Q5_0: dot1Q5_0AVX2, gguf.Q5_1: dot1Q5_1AVX2},
			nil, nil},
	}
}

// TestSingleRowKernelsMatchMultiRow: each single-row kernel gives, bit for bit, what its set's
// multi-row kernel gives the same activation row among four, in every position, for block
// counts around the two-block unrolling, random and extreme weights and activations.
func TestSingleRowKernelsMatchMultiRow(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	for _, set := range allSingleRowKernels() {
		if !set.ok {
			continue
		}
		for typ, k4 := range set.x4 {
			k1 := set.x1[typ]
			for _, nb := range []int{1, 2, 3, 4, 5, 18, 19} {
				for rep := range 4 {
					var rows [4]testActs
					for i := range rows {
						rows[i] = randomTestActs(r, typ, nb*32)
						if rep == 3 { // extreme activations
							for j := range rows[i].q {
								rows[i].q[j] = int8(127 - 254*((j>>i)&1))
							}
							rows[i] = testActsFrom(rows[i].q, rows[i].d, 32)
						}
					}
					w := randomBlocks(r, typ, nb)
					if rep == 2 {
						w = extremeTestBlocks(typ, nb, nb%2 == 0)
					}
					var q []int8
					var d, s []float32
					for _, a := range rows {
						q, d, s = append(q, a.q...), append(d, a.d...), append(s, a.s...)
					}
					var out [4]float32
					k4(w, q, d, s, &out)
					for i, a := range rows {
						var v float32
						k1(w, a.q, a.d, a.s, &v)
						if math.Float32bits(v) != math.Float32bits(out[i]) {
							t.Errorf("%s %v, %d blocks #%d, row %d: single-row %v, among four %v", set.name, typ, nb, rep, i, v, out[i])
						}
					}
				}
			}
		}
		for typ, k4 := range set.x4K {
			k1 := set.x1K[typ]
			for _, nb := range []int{1, 2, 3} {
				for rep := range 3 {
					var rows [4]testActs
					for i := range rows {
						rows[i] = randomTestActs(r, typ, nb*256)
					}
					w := randomBlocks(r, typ, nb)
					if rep == 2 {
						w = extremeTestBlocks(typ, nb, nb%2 == 0)
					}
					var q []int8
					var d []float32
					var bs []int16
					for _, a := range rows {
						q, d, bs = append(q, a.q...), append(d, a.d...), append(bs, a.bsums...)
					}
					var out [4]float32
					k4(w, q, d, bs, &out)
					for i, a := range rows {
						var v float32
						k1(w, a.q, a.d, a.bsums, &v)
						if math.Float32bits(v) != math.Float32bits(out[i]) {
							t.Errorf("%s %v, %d super-blocks #%d, row %d: single-row %v, among four %v", set.name, typ, nb, rep, i, v, out[i])
						}
					}
				}
			}
		}
	}
}

// TestSingleRowKernelsCheckLengths: the dispatched single-row kernels panic on short slices.
func TestSingleRowKernelsCheckLengths(t *testing.T) {
	if !asmAVX2 {
		t.Skip("no assembly kernels on this CPU")
	}
	for _, typ := range multiRowTypes {
		k := kernel1(typ)
		w, q, d, s := make([]byte, 2*typ.BlockBytes()), make([]int8, 64), make([]float32, 2), make([]float32, 2)
		var out float32
		for i, c := range []func(){
			func() { k(w[:len(w)-1], q, d, s, &out) },
			func() { k(w, q[:len(q)-1], d, s, &out) },
			func() { k(w, q, d, s[:1], &out) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%v case %d: short slices: no panic", typ, i)
					}
				}()
				c()
			}()
		}
	}
	for _, typ := range []gguf.TensorType{gguf.Q4_K, gguf.Q6_K} {
		k := kernel1K(typ)
		if k == nil {
			continue
		}
		w, q, d, bs := make([]byte, 2*typ.BlockBytes()), make([]int8, 512), make([]float32, 2), make([]int16, 32)
		var out float32
		for i, c := range []func(){
			func() { k(w[:len(w)-1], q, d, bs, &out) },
			func() { k(w, q[:len(q)-1], d, bs, &out) },
			func() { k(w, q, d, bs[:len(bs)-1], &out) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%v case %d: short slices: no panic", typ, i)
					}
				}()
				c()
			}()
		}
	}
}

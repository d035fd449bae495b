//go:build amd64 && !purego

package quant

import (
	"fmt"
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
						v := k1(w, a.q, a.d, a.s)
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
						v := k1(w, a.q, a.d, a.bsums)
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
	dispatch := map[gguf.TensorType]kern1{gguf.Q8_0: dot1Q8_0, gguf.Q4_0: dot1Q4_0, gguf.Q4_1: dot1Q4_1, gguf.Q5_0: dot1Q5_0, gguf.Q5_1: dot1Q5_1}
	for _, typ := range multiRowTypes {
		k := dispatch[typ]
		w, q, d, s := make([]byte, 2*typ.BlockBytes()), make([]int8, 64), make([]float32, 2), make([]float32, 2)
		for i, c := range []func(){
			func() { k(w[:len(w)-1], q, d, s) },
			func() { k(w, q[:len(q)-1], d, s) },
			func() { k(w, q, d, s[:1]) },
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
	for typ, k := range map[gguf.TensorType]kern1K{gguf.Q4_K: dot1Q4_K, gguf.Q6_K: dot1Q6_K} {
		if k == nil {
			continue
		}
		w, q, d, bs := make([]byte, 2*typ.BlockBytes()), make([]int8, 512), make([]float32, 2), make([]int16, 32)
		for i, c := range []func(){
			func() { k(w[:len(w)-1], q, d, bs) },
			func() { k(w, q[:len(q)-1], d, bs) },
			func() { k(w, q, d, bs[:len(bs)-1]) },
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

// BenchmarkSingleRowKernels times the single-row kernels (what decode and the rows left over
// from groups of four run on an unpacked matrix) beside the row kernels, over benchRows rows
// of 1536 elements against one activation row: ns per row.
//
//	go test ./internal/quant/ -run '^$' -bench SingleRowKernels -benchtime 200x
func BenchmarkSingleRowKernels(b *testing.B) {
	const benchRows, n = 1024, 1536
	r := rand.New(rand.NewPCG(7, 10))
	for _, set := range allSingleRowKernels() {
		if !set.ok {
			continue
		}
		for _, typ := range []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q4_K, gguf.Q6_K} {
			nb := n / typ.BlockSize()
			w := randomBlocks(r, typ, nb*benchRows)
			rowBytes := nb * typ.BlockBytes()
			a := randomTestActs(r, typ, n)
			rowK := asmRowKernels()[map[string]int{"avx512": 0, "avx2": 1}[set.name]].k
			k1, k1K := set.x1[typ], set.x1K[typ]
			for _, which := range []string{"row", "single"} {
				if which == "single" && k1 == nil && k1K == nil {
					continue
				}
				b.Run(fmt.Sprintf("%s/%v/%s", set.name, typ, which), func(b *testing.B) {
					var sink, v float32
					for b.Loop() {
						for i := range benchRows {
							row := w[i*rowBytes : (i+1)*rowBytes]
							switch {
							case which == "row":
								v = rowK.call(typ, row, a)
							case k1 != nil:
								v = k1(row, a.q, a.d, a.s)
							default:
								v = k1K(row, a.q, a.d, a.bsums)
							}
							sink += v
						}
					}
					rowKernelSink = sink
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
					b.ReportMetric(0, "ns/op")
				})
			}
		}
	}
}

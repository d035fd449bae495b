//go:build amd64 && !purego

package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/honeai/hone/internal/gguf"
)

// TestPackedKernelAsm: the assembly packed kernels equal the Go row kernels on random
// blocks of every length from 0 blocks, and on extreme ones (every value and scale at its
// largest magnitude, activations ±127); the one-row kernels with and without prefetch.
func TestPackedKernelAsm(t *testing.T) {
	if !asmVNNI {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	// Both sets of one-row kernels: with and without software prefetch (gemm.DecodePrefetch).
	defer func(pf bool) { prefetchX1 = pf }(prefetchX1)
	for _, pf := range []bool{false, true} {
		prefetchX1 = pf
		r := rand.New(rand.NewPCG(25, 26))
		for _, typ := range packedTypes {
			for _, nbt := range asmBlockCounts(typ) {
				nb := nbt * typ.BlockSize() / 32 // blocks of 32
				for _, n := range []int{1, 4} {
					q, d, s, rows := packedActs(r, typ, n, nb)
					ws := randomBlocks(r, typ, packRows*nbt)
					if nb == 0 {
						out := make([]float32, packRows*n)
						for i := range out {
							out[i] = 9
						}
						packed16AVX512(typ, nil, nil, make([]float32, 0), nil, n, out)
						for i, v := range out {
							if v != 0 {
								t.Fatalf("%v, 0 blocks: out[%d] = %g", typ, i, v)
							}
						}
						continue
					}
					checkPacked(t, "avx512", packed16AVX512, typ, ws, n, q, d, s, rows, fmt.Sprintf("%d blocks", nb))
				}
			}
			for _, nbt := range []int{1, 3, 17} {
				nb := nbt * typ.BlockSize() / 32
				var q []int8
				var d, s []float32
				var rows []testActs
				for p := range 4 {
					qp := make([]int8, nb*32)
					for i := range qp {
						qp[i] = int8(127 - 254*((i>>p)&1))
					}
					dp := make([]float32, nb)
					for i := range dp {
						dp[i] = 0.02
					}
					a := testActsFrom(qp, dp, 32)
					q, d, s, rows = append(q, a.q...), append(d, a.d...), append(s, packedSums(typ, a)...), append(rows, a)
				}
				for _, low := range []bool{false, true} {
					var ws []byte
					for range packRows {
						ws = append(ws, extremeTestBlocks(typ, nbt, low)...)
					}
					checkPacked(t, "avx512", packed16AVX512, typ, ws, 4, q, d, s, rows, fmt.Sprintf("%d blocks, weights low=%v", nb, low))
					checkPacked(t, "avx512", packed16AVX512, typ, ws, 1, q[:32*nb], d[:nb], s[:len(s)/4], rows[:1], fmt.Sprintf("%d blocks, weights low=%v", nb, low))
				}
			}
		}
	}
}

func TestPackedKernelCheckLengths(t *testing.T) {
	if !asmVNNI {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	for _, typ := range packedTypes {
		w, q, d, s, out := make([]byte, 2*packedBlockBytes(typ)), make([]int8, 4*64), make([]float32, 8), make([]float32, 8), make([]float32, 64)
		for _, c := range []func(){
			func() { packed16AVX512(typ, w[:len(w)-1], q, d, s, 4, out) },
			func() { packed16AVX512(typ, w, q[:len(q)-1], d, s, 4, out) },
			func() { packed16AVX512(typ, w, q, d, s[:7], 4, out) },
			func() { packed16AVX512(typ, w, q, d[:7], s, 4, out) },
			func() { packed16AVX512(typ, w, q, d, s, 4, out[:63]) },
			func() { packed16AVX512(typ, w, q, d, s, 2, out) },
			func() { packed16AVX512(gguf.Q5_1, w, q, d, s, 4, out) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%v: bad arguments: no panic", typ)
					}
				}()
				c()
			}()
		}
	}
}

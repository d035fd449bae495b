//go:build amd64 && !purego

package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
)

// TestPackedKernelAsm: the assembly packed kernels equal the Go row kernels on random
// blocks of every length from 0 blocks, and on extreme ones (every value and scale at its
// largest magnitude, activations ±127); the one-row kernels with and without prefetch.
func TestPackedKernelAsm(t *testing.T) {
	if !asmVNNI {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	// Both sets of one-row kernels: with and without software prefetch (x1Tuners).
	for _, kernel := range []func(gguf.TensorType, []byte, []int8, []float32, []float32, int, []float32){packed16AVX512, packed16AVX512PF} {
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
						kernel(typ, nil, nil, make([]float32, 0), nil, n, out)
						for i, v := range out {
							if v != 0 {
								t.Fatalf("%v, 0 blocks: out[%d] = %g", typ, i, v)
							}
						}
						continue
					}
					checkPacked(t, "avx512", kernel, typ, ws, n, q, d, s, rows, fmt.Sprintf("%d blocks", nb))
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
					checkPacked(t, "avx512", kernel, typ, ws, 4, q, d, s, rows, fmt.Sprintf("%d blocks, weights low=%v", nb, low))
					checkPacked(t, "avx512", kernel, typ, ws, 1, q[:32*nb], d[:nb], s[:len(s)/4], rows[:1], fmt.Sprintf("%d blocks, weights low=%v", nb, low))
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

// TestPackedPrefetchLive: one-row products of a packed matrix run under a fresh tuner until
// it settles (its warm-up and pairs), every one equal to the first bit for bit whichever
// mode it took; products of 4 rows are not timed.
func TestPackedPrefetchLive(t *testing.T) {
	if !packedKernelsInUse {
		t.Skip("no packed kernels on this CPU")
	}
	t.Setenv("HONE_DECODE_PREFETCH", "")
	defer func(old *gemm.PrefetchTuner) { x1Tuners[gguf.Q8_0] = old }(x1Tuners[gguf.Q8_0])
	tuner := gemm.NewPrefetchTuner("Q8_0 (test)", gemm.DecodePrefetchPrior())
	x1Tuners[gguf.Q8_0] = tuner
	r := rand.New(rand.NewPCG(27, 28))
	m, _ := randomMatrix(t, r, gguf.Q8_0, 512, 1024) // 544 KiB packed
	if !m.Pack() {
		t.Fatal("Pack did not pack")
	}
	x := randomActs(r, 4*1024)
	out := make([]float32, 4*512)
	m.MatMulT(x, 4, out, 512, false)
	if _, settled, _ := tuner.Choice(); settled {
		t.Fatal("settled by a 4-row product")
	}
	want := make([]float32, 512)
	m.MatMulT(x, 1, want, 512, false)
	got := make([]float32, 512)
	for it := 0; ; it++ {
		if _, settled, _ := tuner.Choice(); settled {
			break
		}
		if it > 1000 {
			t.Fatal("not settled after 1000 products")
		}
		m.MatMulT(x, 1, got, 512, false)
		for j := range got {
			if got[j] != want[j] {
				t.Fatalf("product %d: out[%d] = %v, first product %v", it, j, got[j], want[j])
			}
		}
	}
	pf, _, ratio := tuner.Choice()
	t.Logf("Q8_0 one-row products in L2: prefetch %v, time with ÷ without %.3f", pf, ratio)
}

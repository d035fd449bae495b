package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// invariantRows are the row counts TestRowInvariance multiplies a row among: every count to
// past the decode kernels, the dot kernels and two row panels, then the blocked path's
// panel and row-block edges (14-row panels, 140-row blocks).
var invariantRows = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 16, 17, 20, 29, 33, 64, 141, 150}

// invariantPositions are the positions a row takes among m: all of them up to 17 rows, else
// the first, the last and a few between (panel and block edges among them).
func invariantPositions(m int) []int {
	if m <= 17 {
		p := make([]int, m)
		for i := range p {
			p[i] = i
		}
		return p
	}
	var p []int
	for _, i := range []int{0, 1, 13, 14, m / 2, 139, 140, m - 2, m - 1} {
		if i >= 0 && i < m && (len(p) == 0 || i > p[len(p)-1]) {
			p = append(p, i)
		}
	}
	return p
}

// rowOperand is one way of multiplying rows by a B: mul computes C (m × n, stride n) from
// op(A) (m × k, row i of op(A) at a[i*k:], or column i of a stored k × m when transA).
type rowOperand struct {
	name string
	mul  func(transA bool, m int, alpha float32, a []float32, beta float32, c []float32)
}

// rowOperands are every B operand of the API for an n × k product: Sgemm and GemmHalfB with
// B stored transposed (y = x·Wᵀ) and not, and the packs of GemmPacked (f32, bf16, f16 and
// bf16 pairs).
func rowOperands(rng *rand.Rand, n, k int) []rowOperand {
	var ops []rowOperand
	for _, h := range kinds {
		bt := newMatrix(rng, n, k, 0, h) // n × k: y = x·Wᵀ
		bn := newMatrix(rng, k, n, 0, h) // k × n
		name := kindName(h)
		ops = append(ops,
			rowOperand{name + " Wᵀ", func(transA bool, m int, alpha float32, a []float32, beta float32, c []float32) {
				lda := k
				if transA {
					lda = m
				}
				if h == 0 {
					Sgemm(transA, true, m, n, k, alpha, a, lda, bt.f, k, beta, c, n)
				} else {
					GemmHalfB(h, transA, true, m, n, k, alpha, a, lda, bt.h, k, beta, c, n)
				}
			}},
			rowOperand{name + " B", func(transA bool, m int, alpha float32, a []float32, beta float32, c []float32) {
				lda := k
				if transA {
					lda = m
				}
				if h == 0 {
					Sgemm(transA, false, m, n, k, alpha, a, lda, bn.f, n, beta, c, n)
				} else {
					GemmHalfB(h, transA, false, m, n, k, alpha, a, lda, bn.h, n, beta, c, n)
				}
			}})
		var pb *PackedB
		if h == 0 {
			pb = PackB(true, n, k, bt.f, k)
		} else {
			pb = PackHalfB(h, true, n, k, bt.h, k)
		}
		ops = append(ops, packedOperand(name+" packed", pb, k))
		if h == BF16 {
			ops = append(ops, packedOperand("bf16 pairs", PackBF16Pairs(true, n, k, bt.h, k), k))
		}
	}
	return ops
}

func packedOperand(name string, pb *PackedB, k int) rowOperand {
	return rowOperand{name, func(transA bool, m int, alpha float32, a []float32, beta float32, c []float32) {
		lda := k
		if transA {
			lda = m
		}
		GemmPacked(transA, m, alpha, a, lda, pb, beta, c, pb.N())
	}}
}

// forcePrefetch makes decode's tuners choose the kernels with software prefetch (on) or
// without until the test ends.
func forcePrefetch(t *testing.T, on bool) {
	t.Helper()
	old := decodeTuners
	t.Cleanup(func() { decodeTuners = old })
	mode := map[bool]string{true: "on", false: "off"}[on]
	t.Setenv("HONE_DECODE_PREFETCH", mode)
	for r := range decodeTuners {
		for i, tn := range decodeTuners[r] {
			if tn != nil {
				decodeTuners[r][i] = NewPrefetchTuner(tn.name, on)
			}
		}
	}
}

// TestRowInvariance: a row of C is computed from its row of op(A), of C (beta) and B alone,
// bit for bit, whatever the number of rows in the product and the row's position among them:
// for every implementation, thread count, B operand (Sgemm and GemmHalfB, B transposed or
// not, the f32, bf16, f16 and bf16-pair packs of GemmPacked, A transposed or not), the decode
// kernels with and without software prefetch, the depth past a block and the columns past a
// panel. This is what lets a model's output for a sequence not depend on how many rows, and
// whose, share a forward pass with it (docs/engine.md, "Batch invariance").
func TestRowInvariance(t *testing.T) {
	shapes := [][2]int{{70, 300}, {64, 576}, {33, 17}, {40, 1100}, {96, 8}, {16, 40}} // {96, 8}: a LoRA product of rank 8; {16, 40}: of its gradient
	if testing.Short() {
		shapes = shapes[:2]
	}
	forEachImpl(t, func(t *testing.T) {
		im := current.Load()
		for _, threads := range []int{1, 2} {
			for _, pf := range []bool{false, true} {
				if pf && im.streamPF == nil && im.pairStreamPF == nil {
					continue // no prefetching kernels: the same products again
				}
				if threads == 1 && im == genericImpl {
					continue // the pure-Go kernels are slow; 2 threads split the work too
				}
				t.Run(fmt.Sprintf("threads=%d/prefetch=%v", threads, pf), func(t *testing.T) {
					defer SetThreads(0)
					SetThreads(threads)
					forcePrefetch(t, pf)
					rng := rand.New(rand.NewPCG(41, uint64(threads)))
					for _, s := range shapes {
						for _, op := range rowOperands(rng, s[0], s[1]) {
							checkRowInvariance(t, rng, op, s[0], s[1])
						}
					}
				})
			}
		}
	})
}

func checkRowInvariance(t *testing.T, rng *rand.Rand, op rowOperand, n, k int) {
	t.Helper()
	maxRows := invariantRows[len(invariantRows)-1]
	x := make([]float32, (maxRows+1)*k) // row 0 is the row under test
	c0 := make([]float32, (maxRows+1)*n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for i := range c0 {
		c0[i] = float32(rng.NormFloat64())
	}
	a := make([]float32, maxRows*k)
	c := make([]float32, maxRows*n)
	for _, sc := range []scaling{{1, 0}, {-1.5, 0.25}} {
		for _, transA := range []bool{false, true} {
			// fill lays out m rows with the row under test at pos, stored as op(A) asks.
			fill := func(m, pos int) {
				for i := range m {
					src := 1 + i
					if i == pos {
						src = 0
					}
					row, crow := x[src*k:(src+1)*k], c0[src*n:(src+1)*n]
					if transA {
						for p, v := range row {
							a[p*m+i] = v
						}
					} else {
						copy(a[i*k:], row)
					}
					copy(c[i*n:], crow)
				}
			}
			fill(1, 0)
			op.mul(transA, 1, sc.alpha, a, sc.beta, c)
			want := append([]float32(nil), c[:n]...)
			for _, m := range invariantRows {
				for _, pos := range invariantPositions(m) {
					fill(m, pos)
					op.mul(transA, m, sc.alpha, a, sc.beta, c)
					for j, v := range c[pos*n : pos*n+n] {
						if math.Float32bits(v) != math.Float32bits(want[j]) {
							t.Errorf("%s %d×%d transA=%v alpha=%v beta=%v: row %d of %d: C[%d] = %v, alone %v",
								op.name, n, k, transA, sc.alpha, sc.beta, pos, m, j, v, want[j])
							return
						}
					}
				}
			}
		}
	}
}

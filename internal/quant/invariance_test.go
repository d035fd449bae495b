package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
)

// kernelSet is one set of kernels MatMulT can run with: the one in use, and others this CPU
// runs too (the pure-Go ones; on amd64 the AVX2 ones of a CPU with AVX-512), installed by use
// until the test ends.
type kernelSet struct {
	name string
	use  func(t *testing.T)
}

// moreKernelSets are the assembly sets besides the one in use (invariance_amd64_test.go).
var moreKernelSets []kernelSet

func kernelSets() []kernelSet {
	sets := []kernelSet{{"in use", func(*testing.T) {}}}
	sets = append(sets, moreKernelSets...)
	if asmKernelsInUse {
		sets = append(sets, kernelSet{"go", goKernels})
	}
	return sets
}

// forceX1Prefetch makes the packed one-row kernels prefetch (on) or not until the test ends.
func forceX1Prefetch(t *testing.T, on bool) {
	t.Helper()
	old := x1Tuners
	t.Cleanup(func() { x1Tuners = old })
	t.Setenv("HONE_DECODE_PREFETCH", map[bool]string{true: "on", false: "off"}[on])
	x1Tuners = map[gguf.TensorType]*gemm.PrefetchTuner{}
	for typ := range old {
		x1Tuners[typ] = gemm.NewPrefetchTuner(typ.String(), on)
	}
}

// invariantRows are the activation row counts TestMatMulTRowInvariance multiplies a row
// among: every count past a tile of 16 rows and its groups of four, then further tiles.
var invariantRows = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 18, 19, 20, 21, 31, 32, 33, 40, 67, 130}

func invariantPositions(n int) []int {
	if n <= 40 {
		p := make([]int, n)
		for i := range p {
			p[i] = i
		}
		return p
	}
	return []int{0, 1, 15, 16, 17, n/2 - 1, n / 2, n - 5, n - 4, n - 1}
}

// rowProduct is one way of multiplying rows: out (n rows of width) from x (n rows of cols).
type rowProduct struct {
	name        string
	cols, width int
	mul         func(x []float32, n int, out []float32, acc bool)
}

// TestMatMulTRowInvariance: a row's product with a quantized matrix is the same bits alone
// and among 1..130 rows at every position (a sample above 40), for every type, packed (where
// Pack packs it) and not, a matrix quantized at load (Quantize, --quantize), the fused
// products (MatMulTMany over a packed, an unpacked and a K-quant matrix) and the experts'
// (MatMulTEach), with every kernel set this CPU runs (the one in use, AVX2 on an AVX-512 CPU,
// the pure-Go ones), 1 and 2 threads, the packed one-row kernels with and without software
// prefetch, overwriting and accumulating. This is what lets a sequence's logits not depend
// on how its prompt is split into forward passes or what else shares them (docs/engine.md,
// "Batch invariance").
func TestMatMulTRowInvariance(t *testing.T) {
	for _, set := range kernelSets() {
		t.Run(set.name, func(t *testing.T) {
			set.use(t)
			rows := invariantRows
			if set.name == "go" { // slow kernels: one thread count, tiles of 16 and groups of 4
				rows = []int{1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 20, 33}
			}
			for _, threads := range []int{1, 2} {
				for _, pf := range []bool{false, true} {
					if pf && (!packedKernelsInUse || packedKernelPF == nil) || set.name == "go" && threads == 1 {
						continue
					}
					t.Run(fmt.Sprintf("threads=%d/prefetch=%v", threads, pf), func(t *testing.T) {
						defer gemm.SetThreads(0)
						gemm.SetThreads(threads)
						forceX1Prefetch(t, pf)
						r := rand.New(rand.NewPCG(61, uint64(threads)))
						for _, p := range rowProducts(t, r) {
							checkMatMulTRowInvariance(t, r, p, rows)
						}
					})
				}
			}
		})
	}
}

func rowProducts(t *testing.T, r *rand.Rand) []rowProduct {
	t.Helper()
	var ps []rowProduct
	for _, typ := range allTypes {
		const rows = 48
		cols := 512
		if kQuant(typ) {
			cols = 768
		}
		m, _ := randomMatrix(t, r, typ, rows, cols)
		ps = append(ps, rowProduct{typ.String(), cols, rows, func(x []float32, n int, out []float32, acc bool) {
			m.MatMulT(x, n, out, rows, acc)
		}})
		if p := *m; p.Pack() {
			ps = append(ps, rowProduct{typ.String() + " packed", cols, rows, func(x []float32, n int, out []float32, acc bool) {
				p.MatMulT(x, n, out, rows, acc)
			}})
		}
	}
	for _, typ := range []gguf.TensorType{gguf.Q8_0, gguf.Q4_K} { // hone serve --quantize's
		const rows, cols = 32, 512
		data, err := Quantize(typ, randomActs(r, rows*cols), cols)
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewMatrix(typ, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, rowProduct{typ.String() + " quantized at load", cols, rows, func(x []float32, n int, out []float32, acc bool) {
			m.MatMulT(x, n, out, rows, acc)
		}})
	}
	// Fused: a packed Q4_1, an unpacked Q5_1 and a K-quant (Q6_K: packed where Q4_1 is, its
	// activations' sums per 16) over the same 768 columns.
	const cols = 768
	var ms []*Matrix
	width := 0
	for _, s := range []struct {
		typ  gguf.TensorType
		rows int
		pack bool
	}{{gguf.Q4_1, 32, true}, {gguf.Q5_1, 20, false}, {gguf.Q6_K, 16, true}, {gguf.Q5_K, 8, false}} {
		m, _ := randomMatrix(t, r, s.typ, s.rows, cols)
		if s.pack {
			m.Pack()
		}
		ms = append(ms, m)
		width += s.rows
	}
	ps = append(ps, rowProduct{"MatMulTMany", cols, width, func(x []float32, n int, out []float32, acc bool) {
		MatMulTMany(x, n, ms, out, width, acc)
	}})
	// Each: row i through matrix i of n (the experts of a decode step), the same matrix at
	// every position so that a row's product can be compared wherever it falls.
	each := ms[:1]
	ps = append(ps, rowProduct{"MatMulTEach", cols, 32, func(x []float32, n int, out []float32, acc bool) {
		if acc {
			return // MatMulTEach overwrites
		}
		es := make([]*Matrix, n)
		for i := range es {
			es[i] = each[0]
		}
		MatMulTEach(x, es, out, 32)
	}})
	return ps
}

func checkMatMulTRowInvariance(t *testing.T, r *rand.Rand, p rowProduct, rows []int) {
	t.Helper()
	maxRows := rows[len(rows)-1]
	x := randomActs(r, (maxRows+1)*p.cols) // row 0 is the row under test
	for i := range x[:p.cols] {
		x[i] *= 3 // a larger scale than its neighbours'
	}
	o0 := randomActs(r, (maxRows+1)*p.width)
	xs := make([]float32, maxRows*p.cols)
	out := make([]float32, maxRows*p.width)
	for _, acc := range []bool{false, true} {
		fill := func(n, pos int) {
			for i := range n {
				src := 1 + i
				if i == pos {
					src = 0
				}
				copy(xs[i*p.cols:(i+1)*p.cols], x[src*p.cols:])
				copy(out[i*p.width:(i+1)*p.width], o0[src*p.width:])
			}
		}
		fill(1, 0)
		p.mul(xs, 1, out, acc)
		want := append([]float32(nil), out[:p.width]...)
		for _, n := range rows {
			for _, pos := range invariantPositions(n) {
				fill(n, pos)
				p.mul(xs, n, out, acc)
				for j, v := range out[pos*p.width : (pos+1)*p.width] {
					if math.Float32bits(v) != math.Float32bits(want[j]) {
						t.Errorf("%s (accumulate %v): row %d of %d: out[%d] = %v, alone %v", p.name, acc, pos, n, j, v, want[j])
						return
					}
				}
			}
		}
	}
}

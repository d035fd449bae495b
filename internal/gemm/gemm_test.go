package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// operand kinds under test: 0 = f32 B, BF16, F16.
var kinds = []Half{0, BF16, F16}

func kindName(h Half) string {
	if h == 0 {
		return "f32"
	}
	return h.String()
}

// matrix is a stored matrix with leading dimension ld; the padding past each row holds NaN
// so that a kernel reading it corrupts the result.
type matrix struct {
	rows, cols, ld int
	f              []float32 // f32 storage (also the exact values of a half matrix)
	h              []uint16  // half storage when the operand is 16-bit
}

func newMatrix(rng *rand.Rand, rows, cols, pad int, h Half) *matrix {
	ld := max(cols, 1) + pad
	mt := &matrix{rows: rows, cols: cols, ld: ld}
	n := 0
	if rows > 0 {
		n = (rows-1)*ld + max(cols, 1)
	}
	mt.f = make([]float32, n)
	if h != 0 {
		mt.h = make([]uint16, n)
	}
	nan := float32(math.NaN())
	for i := range mt.f {
		if i%ld >= cols {
			mt.f[i] = nan
			if h != 0 {
				mt.h[i] = h.FromFloat32(nan)
			}
			continue
		}
		v := float32(rng.NormFloat64())
		if h != 0 {
			mt.h[i] = h.FromFloat32(v)
			v = h.ToFloat32(mt.h[i]) // the exact value the kernel sees
		}
		mt.f[i] = v
	}
	return mt
}

func (mt *matrix) at(i, j int) float64 { return float64(mt.f[i*mt.ld+j]) }

// refProduct returns op(A)·op(B) in float64 and, per element, Σ|a·b| for the error bound.
func refProduct(transA, transB bool, m, n, k int, a, b *matrix) (prod, mag []float64) {
	prod = make([]float64, m*n)
	mag = make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, sa float64
			for p := 0; p < k; p++ {
				var av, bv float64
				if transA {
					av = a.at(p, i)
				} else {
					av = a.at(i, p)
				}
				if transB {
					bv = b.at(j, p)
				} else {
					bv = b.at(p, j)
				}
				s += av * bv
				sa += math.Abs(av * bv)
			}
			prod[i*n+j], mag[i*n+j] = s, sa
		}
	}
	return prod, mag
}

type scaling struct{ alpha, beta float32 }

var scalings = []scaling{{1, 0}, {0.5, 1}, {-1.5, 0.25}, {0, 2}, {2, -1}}

type shape struct{ m, n, k int }

// shapes covers every path: the dot kernels (transB, m <= 16), B read in place (m <= 16),
// the blocked path, edge tiles, several depth, row and column blocks, and parallel splits.
var shapes = []shape{
	{1, 1, 1}, {1, 37, 5}, {37, 1, 5}, {5, 7, 1}, {1, 64, 300}, {2, 5, 33},
	{16, 33, 300}, {14, 40, 1100}, {17, 65, 257}, {3, 50, 600}, {97, 89, 101}, {150, 70, 40},
	{200, 100, 300}, {13, 3100, 3}, {33, 3200, 2}, {8, 96, 129}, {64, 64, 64},
}

// checkGemm runs one configuration through the API and compares with the reference.
func checkGemm(t *testing.T, rng *rand.Rand, h Half, transA, transB bool, s shape, pad int) {
	t.Helper()
	m, n, k := s.m, s.n, s.k
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	a := newMatrix(rng, ar, ac, pad, 0)
	b := newMatrix(rng, br, bc, pad+1, h)
	prod, mag := refProduct(transA, transB, m, n, k, a, b)
	for _, sc := range scalings {
		c := newMatrix(rng, m, n, pad+2, 0)
		orig := append([]float32(nil), c.f...)
		if sc.beta == 0 {
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					c.f[i*c.ld+j] = float32(math.NaN()) // must not propagate
				}
			}
		}
		if h == 0 {
			Sgemm(transA, transB, m, n, k, sc.alpha, a.f, a.ld, b.f, b.ld, sc.beta, c.f, c.ld)
		} else {
			GemmHalfB(h, transA, transB, m, n, k, sc.alpha, a.f, a.ld, b.h, b.ld, sc.beta, c.f, c.ld)
		}
		compare(t, fmt.Sprintf("%s transA=%v transB=%v %dx%dx%d pad=%d alpha=%v beta=%v",
			kindName(h), transA, transB, m, n, k, pad, sc.alpha, sc.beta), c, orig, prod, mag, sc, k)
	}
}

func compare(t *testing.T, what string, c *matrix, orig []float32, prod, mag []float64, sc scaling, k int) {
	t.Helper()
	const eps = 1.0 / (1 << 23)
	bad := 0
	for i := 0; i < c.rows; i++ {
		for idx := i * c.ld; idx < i*c.ld+c.ld && idx < len(c.f); idx++ {
			j := idx - i*c.ld
			got := float64(c.f[idx])
			if j >= c.cols { // padding must be untouched
				if !math.IsNaN(got) {
					t.Errorf("%s: C padding (%d,%d) written: %v", what, i, j, got)
					return
				}
				continue
			}
			want := float64(sc.alpha) * prod[i*c.cols+j]
			bound := math.Abs(float64(sc.alpha)) * mag[i*c.cols+j]
			if sc.beta != 0 {
				want += float64(sc.beta) * float64(orig[idx])
				bound += math.Abs(float64(sc.beta) * float64(orig[idx]))
			}
			tol := float64(k+4)*eps*bound + 1e-30
			if math.IsNaN(got) || math.Abs(got-want) > tol {
				if bad < 5 {
					t.Errorf("%s: C[%d,%d] = %v, want %v (tol %.3g)", what, i, j, got, want, tol)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d wrong elements", what, bad)
	}
}

// forEachImpl runs f under every implementation this CPU supports.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	defer SetImpl(Impls()[0])
	for _, name := range Impls() {
		if err := SetImpl(name); err != nil {
			t.Fatal(err)
		}
		t.Run(name, f)
	}
}

func TestSgemmAgainstReference(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, h := range kinds {
			t.Run(kindName(h), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, uint64(h)))
				for si, s := range shapes {
					for tr := 0; tr < 4; tr++ {
						checkGemm(t, rng, h, tr&1 != 0, tr&2 != 0, s, si%3)
					}
				}
			})
		}
	})
}

func TestThreadCounts(t *testing.T) {
	defer SetThreads(0)
	rng := rand.New(rand.NewPCG(2, 2))
	forEachImpl(t, func(t *testing.T) {
		for _, nt := range []int{1, 2, 3, 5} {
			SetThreads(nt)
			if Threads() != nt {
				t.Fatalf("Threads() = %d after SetThreads(%d)", Threads(), nt)
			}
			for _, s := range []shape{{100, 300, 64}, {16, 1000, 100}, {7, 2000, 50}, {300, 40, 30}} {
				checkGemm(t, rng, 0, false, true, s, 1)
				checkGemm(t, rng, BF16, false, false, s, 0)
			}
		}
	})
}

// checkPacked compares GemmPacked with the reference for one configuration.
func checkPacked(t *testing.T, rng *rand.Rand, h Half, transA, transB bool, s shape) {
	t.Helper()
	m, n, k := s.m, s.n, s.k
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	a := newMatrix(rng, ar, ac, 1, 0)
	b := newMatrix(rng, br, bc, 2, h)
	var pb *PackedB
	if h == 0 {
		pb = PackB(transB, n, k, b.f, b.ld)
	} else {
		pb = PackHalfB(h, transB, n, k, b.h, b.ld)
	}
	if pb.N() != n || pb.K() != k || pb.Half() != h {
		t.Fatalf("packed operand reports n=%d k=%d half=%v", pb.N(), pb.K(), pb.Half())
	}
	prod, mag := refProduct(transA, transB, m, n, k, a, b)
	for _, sc := range scalings {
		c := newMatrix(rng, m, n, 3, 0)
		orig := append([]float32(nil), c.f...)
		GemmPacked(transA, m, sc.alpha, a.f, a.ld, pb, sc.beta, c.f, c.ld)
		compare(t, fmt.Sprintf("packed %s transA=%v transB=%v %dx%dx%d alpha=%v beta=%v",
			kindName(h), transA, transB, m, n, k, sc.alpha, sc.beta), c, orig, prod, mag, sc, k)
	}
}

func TestGemmPacked(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, h := range kinds {
			rng := rand.New(rand.NewPCG(3, uint64(h)))
			for _, s := range []shape{{1, 1, 1}, {1, 100, 300}, {4, 33, 7}, {16, 64, 260}, {40, 70, 90}, {160, 97, 300}, {5, 3300, 9}} {
				for tr := 0; tr < 4; tr++ {
					checkPacked(t, rng, h, tr&1 != 0, tr&2 != 0, s)
				}
			}
		}
	})
}

// TestPackedAcrossImpls packs under one implementation and multiplies under another: the
// packed layout does not depend on the implementation.
func TestPackedAcrossImpls(t *testing.T) {
	names := Impls()
	defer SetImpl(names[0])
	rng := rand.New(rand.NewPCG(4, 4))
	b := newMatrix(rng, 70, 50, 0, BF16)
	a := newMatrix(rng, 20, 50, 0, 0)
	prod, mag := refProduct(false, true, 20, 70, 50, a, b)
	for _, packer := range names {
		if err := SetImpl(packer); err != nil {
			t.Fatal(err)
		}
		pb := PackHalfB(BF16, true, 70, 50, b.h, b.ld)
		for _, user := range names {
			if err := SetImpl(user); err != nil {
				t.Fatal(err)
			}
			c := newMatrix(rng, 20, 70, 0, 0)
			orig := append([]float32(nil), c.f...)
			GemmPacked(false, 20, 1, a.f, a.ld, pb, 0, c.f, c.ld)
			compare(t, packer+"->"+user, c, orig, prod, mag, scaling{1, 0}, 50)
		}
	}
}

func TestConcurrentCalls(t *testing.T) {
	defer SetThreads(0)
	SetThreads(2)
	type work struct {
		s      shape
		h      Half
		a, b   *matrix
		prod   []float64
		mag    []float64
		transB bool
	}
	rng := rand.New(rand.NewPCG(5, 5))
	var jobs []work
	for i, s := range []shape{{1, 500, 200}, {64, 200, 100}, {200, 64, 300}, {9, 700, 64}, {120, 120, 120}, {3, 40, 1000}} {
		w := work{s: s, h: kinds[i%3], transB: i%2 == 0}
		w.a = newMatrix(rng, s.m, s.k, 0, 0)
		if w.transB {
			w.b = newMatrix(rng, s.n, s.k, 0, w.h)
		} else {
			w.b = newMatrix(rng, s.k, s.n, 0, w.h)
		}
		w.prod, w.mag = refProduct(false, w.transB, s.m, s.n, s.k, w.a, w.b)
		jobs = append(jobs, w)
	}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for r := 0; r < 5; r++ {
				w := jobs[(g+r)%len(jobs)]
				s := w.s
				c := &matrix{rows: s.m, cols: s.n, ld: s.n, f: make([]float32, s.m*s.n)}
				if w.h == 0 {
					Sgemm(false, w.transB, s.m, s.n, s.k, 1, w.a.f, w.a.ld, w.b.f, w.b.ld, 0, c.f, c.ld)
				} else {
					GemmHalfB(w.h, false, w.transB, s.m, s.n, s.k, 1, w.a.f, w.a.ld, w.b.h, w.b.ld, 0, c.f, c.ld)
				}
				compare(t, fmt.Sprintf("goroutine %d %v", g, s), c, nil, w.prod, w.mag, scaling{1, 0}, s.k)
			}
		}(g)
	}
	wg.Wait()
}

func TestZeroSizes(t *testing.T) {
	c := []float32{1, 2, 3, 4}
	Sgemm(false, false, 0, 2, 3, 1, nil, 3, make([]float32, 6), 2, 0, nil, 2)
	Sgemm(false, false, 2, 2, 0, 1, nil, 1, nil, 2, 0.5, c, 2)
	if c[0] != 0.5 || c[3] != 2 {
		t.Fatalf("k = 0 must scale C by beta: %v", c)
	}
	Sgemm(false, false, 2, 2, 3, 0, make([]float32, 6), 3, make([]float32, 6), 2, 0, c, 2)
	if c[0] != 0 || c[3] != 0 {
		t.Fatalf("alpha = 0, beta = 0 must zero C: %v", c)
	}
}

func TestBadArgumentsPanicNamingTheField(t *testing.T) {
	cases := []struct {
		field string
		call  func()
	}{
		{"m = -1", func() { Sgemm(false, false, -1, 1, 1, 1, nil, 1, nil, 1, 0, nil, 1) }},
		{"lda = 2", func() {
			Sgemm(false, false, 2, 2, 3, 1, make([]float32, 9), 2, make([]float32, 9), 3, 0, make([]float32, 9), 3)
		}},
		{"len(b)", func() {
			Sgemm(false, true, 2, 2, 3, 1, make([]float32, 6), 3, make([]float32, 5), 3, 0, make([]float32, 4), 2)
		}},
		{"ldc = 1", func() {
			Sgemm(false, false, 2, 2, 2, 1, make([]float32, 4), 2, make([]float32, 4), 2, 0, make([]float32, 4), 1)
		}},
		{"h: unknown", func() { GemmHalfB(7, false, false, 1, 1, 1, 1, []float32{1}, 1, []uint16{1}, 1, 0, []float32{0}, 1) }},
		{"pb is nil", func() { GemmPacked(false, 1, 1, []float32{1}, 1, nil, 0, []float32{0}, 1) }},
		{"len(c)", func() {
			GemmPacked(false, 2, 1, make([]float32, 2), 1, PackB(false, 3, 1, make([]float32, 3), 3), 0, make([]float32, 5), 3)
		}},
	}
	for _, tc := range cases {
		func() {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if r == nil || !contains(msg, tc.field) {
					t.Errorf("want panic naming %q, got %v", tc.field, r)
				}
			}()
			tc.call()
		}()
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// FuzzGemm checks arbitrary small shapes, transposes, paddings and formats against the
// reference under every implementation.
func FuzzGemm(f *testing.F) {
	f.Add(uint8(1), uint8(1), uint8(1), uint8(0), uint8(0), uint64(1))
	f.Add(uint8(17), uint8(33), uint8(9), uint8(3), uint8(1), uint64(2))
	f.Add(uint8(5), uint8(64), uint8(200), uint8(2), uint8(2), uint64(3))
	f.Add(uint8(40), uint8(3), uint8(31), uint8(1), uint8(0), uint64(4))
	f.Fuzz(func(t *testing.T, m, n, k, flags, kind uint8, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 9))
		s := shape{int(m%80) + 1, int(n) + 1, int(k) + 1}
		h := kinds[int(kind)%3]
		names := Impls()
		defer SetImpl(names[0])
		for _, name := range names {
			if err := SetImpl(name); err != nil {
				t.Fatal(err)
			}
			checkGemm(t, rng, h, flags&1 != 0, flags&2 != 0, s, int(flags>>2)%4)
		}
	})
}

// TestManyColumnBlocks covers a general-path product whose packed B is split into several
// column blocks (k × n beyond bBlockFloats).
func TestManyColumnBlocks(t *testing.T) {
	const m, k = 20, 1100
	n := bBlockFloats/k + 3*panelW + 5
	rng := rand.New(rand.NewPCG(6, 6))
	for _, transB := range []bool{false, true} {
		a := newMatrix(rng, m, k, 1, 0)
		var b *matrix
		if transB {
			b = newMatrix(rng, n, k, 0, 0)
		} else {
			b = newMatrix(rng, k, n, 0, 0)
		}
		prod, mag := refProduct(false, transB, m, n, k, a, b)
		forEachImpl(t, func(t *testing.T) {
			c := newMatrix(rng, m, n, 1, 0)
			orig := append([]float32(nil), c.f...)
			Sgemm(false, transB, m, n, k, 1.5, a.f, a.ld, b.f, b.ld, 0.5, c.f, c.ld)
			compare(t, fmt.Sprintf("transB=%v %dx%dx%d", transB, m, n, k), c, orig, prod, mag, scaling{1.5, 0.5}, k)
		})
	}
}

// TestPackedColumn: Column and ColumnBits read back column j of op(B) from every kind of pack
// (f32, bf16, f16, bf16 pairs; B transposed or not; n not a multiple of the panel width, odd
// and long depths), exactly: the values or bit patterns that were packed.
func TestPackedColumn(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, nk := range [][2]int{{1, 1}, {33, 7}, {70, 300}, {64, 513}} {
		n, k := nk[0], nk[1]
		f := make([]float32, n*k) // stored n×k (transB) or k×n
		for i := range f {
			f[i] = float32(rng.NormFloat64())
		}
		at := func(transB bool, p, j int) int { // index of op(B)[p][j] in f
			if transB {
				return j*k + p
			}
			return p*n + j
		}
		for _, transB := range []bool{true, false} {
			ld := n
			if transB {
				ld = k
			}
			packs := map[string]*PackedB{"f32": PackB(transB, n, k, f, ld)}
			halves := map[string][]uint16{}
			for _, h := range []Half{BF16, F16} {
				b := make([]uint16, len(f))
				h.Encode(b, f)
				halves[h.String()] = b
				packs[h.String()] = PackHalfB(h, transB, n, k, b, ld)
			}
			halves["pairs"] = halves["bf16"]
			packs["pairs"] = PackBF16Pairs(transB, n, k, halves["bf16"], ld)
			for name, pb := range packs {
				col := make([]float32, k)
				bits := make([]uint16, k)
				for j := range n {
					pb.Column(j, col)
					if name != "f32" {
						pb.ColumnBits(j, bits)
					}
					for p := range k {
						i := at(transB, p, j)
						want := f[i]
						switch name {
						case "bf16", "pairs":
							want = BF16ToFloat32(halves[name][i])
						case "f16":
							want = F16ToFloat32(halves[name][i])
						}
						if math.Float32bits(col[p]) != math.Float32bits(want) {
							t.Fatalf("%s %dx%d transB=%v: column %d depth %d is %v, want %v", name, n, k, transB, j, p, col[p], want)
						}
						if name != "f32" && bits[p] != halves[name][i] {
							t.Fatalf("%s %dx%d transB=%v: column %d depth %d bits %#x, want %#x", name, n, k, transB, j, p, bits[p], halves[name][i])
						}
					}
				}
			}
		}
	}
	// A token's embedding row: read with no garbage.
	b := make([]uint16, 300*640)
	pb := PackHalfB(BF16, true, 300, 640, b, 640)
	col := make([]float32, 640)
	if a := testing.AllocsPerRun(10, func() { pb.Column(299, col) }); a != 0 {
		t.Fatalf("Column allocates %v times", a)
	}
}

// TestPackRowsT: a pack built a row at a time holds what PackB and PackHalfB make of the
// whole matrix, byte for byte (n a multiple of the panel width or not).
func TestPackRowsT(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, nk := range [][2]int{{1, 1}, {32, 16}, {70, 33}, {100, 64}} {
		n, k := nk[0], nk[1]
		f := make([]float32, n*k)
		for i := range f {
			f[i] = float32(rng.NormFloat64())
		}
		want, got := PackB(true, n, k, f, k), PackRowsT(n, k, func(r int, row []float32) { copy(row, f[r*k:]) })
		if !slices.Equal(want.f32, got.f32) || got.n != n || got.k != k {
			t.Fatalf("f32 %dx%d: the packs differ", n, k)
		}
		for _, h := range []Half{BF16, F16} {
			b := make([]uint16, len(f))
			h.Encode(b, f)
			want, got := PackHalfB(h, true, n, k, b, k), PackHalfRowsT(h, n, k, func(r int, row []uint16) { copy(row, b[r*k:]) })
			if !slices.Equal(want.u16, got.u16) || got.Half() != h {
				t.Fatalf("%v %dx%d: the packs differ", h, n, k)
			}
		}
	}
}

// TestTransposedBeta: y = alpha·x·Wᵀ + beta·y (a LoRA delta's product of depth its rank,
// added to a projection's output) gives the bits of alpha·x·Wᵀ into a fresh C, then added to
// beta·y: the dot kernels' sums whatever beta, every implementation, row counts over several
// kernel calls, depths a multiple of the dot kernels' vector and not, columns past the groups
// of four. (The pure-Go implementation sums each element in one chain from beta·C, as its
// micro-kernels do.)
func TestTransposedBeta(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	forEachImpl(t, func(t *testing.T) {
		if current.Load().chainT {
			t.Skip("one chain from beta·C")
		}
		for _, s := range [][3]int{{1, 64, 16}, {13, 300, 16}, {7, 37, 64}, {20, 1536, 16}, {6, 70, 20}} {
			m, n, k := s[0], s[1], s[2]
			x, w := make([]float32, m*k), make([]float32, n*k)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			for _, beta := range []float32{1, 0.25} {
				y := make([]float32, m*n)
				for i := range y {
					y[i] = float32(rng.NormFloat64())
				}
				got, fresh := append([]float32(nil), y...), make([]float32, m*n)
				Sgemm(false, true, m, n, k, 1.5, x, k, w, k, beta, got, n)
				Sgemm(false, true, m, n, k, 1.5, x, k, w, k, 0, fresh, n)
				for i := range got {
					if want := fresh[i] + beta*y[i]; math.Float32bits(got[i]) != math.Float32bits(want) {
						t.Fatalf("%d×%d×%d beta %v: y[%d] = %v, want %v", m, n, k, beta, i, got[i], want)
					}
				}
			}
		}
	})
}

// TestSgemmBlocked: SgemmBlocked gives the product within Sgemm's tolerance for every shape
// and layout (the blocked path at every row count, a transposed B included), and a row's bits
// do not depend on the rows beside it among its own products (1 to 150 rows, every
// implementation, 1 and 2 threads).
func TestSgemmBlocked(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(61, 62))
		for si, s := range shapes {
			for tr := 0; tr < 4; tr++ {
				transA, transB := tr&1 != 0, tr&2 != 0
				m, n, k := s.m, s.n, s.k
				ar, ac := m, k
				if transA {
					ar, ac = k, m
				}
				br, bc := k, n
				if transB {
					br, bc = n, k
				}
				a := newMatrix(rng, ar, ac, si%3, 0)
				b := newMatrix(rng, br, bc, si%3+1, 0)
				prod, mag := refProduct(transA, transB, m, n, k, a, b)
				for _, sc := range scalings {
					c := newMatrix(rng, m, n, si%3+2, 0)
					orig := append([]float32(nil), c.f...)
					SgemmBlocked(transA, transB, m, n, k, sc.alpha, a.f, a.ld, b.f, b.ld, sc.beta, c.f, c.ld)
					compare(t, fmt.Sprintf("transA=%v transB=%v %dx%dx%d alpha=%v beta=%v", transA, transB, m, n, k, sc.alpha, sc.beta), c, orig, prod, mag, sc, k)
				}
			}
		}
		for _, threads := range []int{1, 2} {
			SetThreads(threads)
			for _, s := range [][2]int{{70, 64}, {130, 300}} {
				n, k := s[0], s[1]
				w := make([]float32, n*k)
				for i := range w {
					w[i] = float32(rng.NormFloat64())
				}
				checkRowInvariance(t, rng, rowOperand{"SgemmBlocked Wᵀ", func(transA bool, m int, alpha float32, a []float32, beta float32, c []float32) {
					lda := k
					if transA {
						lda = m
					}
					SgemmBlocked(transA, true, m, n, k, alpha, a, lda, w, k, beta, c, n)
				}}, n, k)
			}
		}
		SetThreads(0)
	})
}

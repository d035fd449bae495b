package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/honeai/hone/internal/gemm"
)

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func near(t *testing.T, what string, got, want float64, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func TestDotAxpyAddScale(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, 4, 5, 17, 64, 101} {
		a, b := randVec(rng, n), randVec(rng, n+3)
		want := 0.0
		for i := range a {
			want += float64(a[i]) * float64(b[i])
		}
		near(t, "dot", float64(Dot(a, b)), want, 1e-5)
		y := append([]float32(nil), b[:n]...)
		Axpy(0.5, a, y)
		for i := range y {
			near(t, "axpy", float64(y[i]), float64(b[i])+0.5*float64(a[i]), 1e-6)
		}
		Add(y, a)
		Scale(y, 2)
		for i := range y {
			near(t, "add+scale", float64(y[i]), 2*(float64(b[i])+1.5*float64(a[i])), 1e-5)
		}
	}
}

func TestRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	rows, cols := 70, 33
	x, w := randVec(rng, rows*cols), randVec(rng, cols)
	out := make([]float32, rows*cols)
	RMSNormRows(out, nil, x, rows, cols, w, 1e-5)
	for r := 0; r < rows; r++ {
		ss := 0.0
		for c := 0; c < cols; c++ {
			ss += float64(x[r*cols+c]) * float64(x[r*cols+c])
		}
		inv := 1 / math.Sqrt(ss/float64(cols)+1e-5)
		for c := 0; c < cols; c++ {
			near(t, "rmsnorm", float64(out[r*cols+c]), float64(x[r*cols+c])*inv*float64(w[c]), 1e-5)
		}
	}
	// In place.
	row := append([]float32(nil), x[:cols]...)
	RMSNorm(row, row, w, 1e-5)
	for c := range row {
		near(t, "rmsnorm in place", float64(row[c]), float64(out[c]), 1e-6)
	}
}

func TestSoftmax(t *testing.T) {
	x := []float32{1, 2, float32(math.Inf(-1)), 3, 1000}
	Softmax(x)
	if x[2] != 0 || math.Abs(float64(x[4])-1) > 1e-6 {
		t.Fatalf("softmax %v", x)
	}
	y := []float32{0, float32(math.Log(3))}
	Softmax(y)
	near(t, "softmax", float64(y[0]), 0.25, 1e-6)
	near(t, "softmax", float64(y[1]), 0.75, 1e-6)
	all := []float32{float32(math.Inf(-1)), float32(math.Inf(-1))}
	Softmax(all)
	if all[0] != 0.5 {
		t.Fatalf("all -inf: %v", all)
	}
	Softmax(nil)
}

func TestSwiGLU(t *testing.T) {
	g := []float32{-3, -0.5, 0, 0.5, 3, 20, -20}
	u := []float32{1, 2, 3, 4, 5, 6, 7}
	out := make([]float32, len(g))
	SwiGLU(out, nil, g, u)
	for i := range g {
		want := float64(g[i]) / (1 + math.Exp(-float64(g[i]))) * float64(u[i])
		near(t, "swiglu", float64(out[i]), want, 1e-6)
		near(t, "silu", float64(SiLU(g[i])), want/float64(u[i]), 1e-6)
	}
}

func TestRopeTableMatchesDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, scale := range []string{"none", "llama3", "linear"} {
		r := NewRope(64, 500000)
		switch scale {
		case "llama3":
			r.ScaleLlama3(8, 1, 4, 8192)
		case "linear":
			r.ScaleLinear(2)
		}
		tab := r.Table(300)
		if tab.Len() != 300 {
			t.Fatalf("len %d", tab.Len())
		}
		for _, pos := range []int{0, 1, 7, 299} {
			x := randVec(rng, 64)
			a := append([]float32(nil), x...)
			b := append([]float32(nil), x...)
			r.Apply(a, pos)
			tab.Apply(b, pos)
			for i := range a {
				near(t, "rope table", float64(b[i]), float64(a[i]), 1e-5)
			}
			tab.ApplyInverse(b, pos)
			for i := range b {
				near(t, "rope inverse", float64(b[i]), float64(x[i]), 1e-5)
			}
		}
	}
	// Llama 3 scaling leaves high frequencies and divides low ones by the factor.
	r := NewRope(128, 500000)
	orig := append([]float64(nil), r.InvFreq...)
	r.ScaleLlama3(8, 1, 4, 8192)
	if r.InvFreq[0] != orig[0] || math.Abs(r.InvFreq[63]-orig[63]/8) > 1e-18 {
		t.Fatalf("llama3 scaling: %v→%v, %v→%v", orig[0], r.InvFreq[0], orig[63], r.InvFreq[63])
	}
}

func TestGatherRow(t *testing.T) {
	f := []float32{1, 2, 3, 4, 5, 6}
	out := make([]float32, 3)
	GatherRow(out, f, nil, 0, 1, 3)
	if out[0] != 4 || out[2] != 6 {
		t.Fatalf("f32 gather %v", out)
	}
	h := make([]uint16, 6)
	gemm.BF16.Encode(h, f)
	GatherRow(out, nil, h, gemm.BF16, 0, 3)
	if out[0] != 1 || out[2] != 3 {
		t.Fatalf("bf16 gather %v", out)
	}
}

func TestParallelForVisitsEachOnce(t *testing.T) {
	for _, n := range []int{0, 1, 5, 1000} {
		seen := make([]atomic.Int32, n)
		ParallelFor(n, 3, func(i int) { seen[i].Add(1) })
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("n=%d: index %d visited %d times", n, i, seen[i].Load())
			}
		}
	}
}

func TestExpAccuracy(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 2_000_000; i++ {
		x := float32(-87.3 + float64(i)*(88.7+87.3)/2_000_000)
		want := math.Exp(float64(x))
		got := float64(Exp(x))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 3e-7 {
		t.Fatalf("worst relative error %.3g", worst)
	}
	if Exp(-100) != 0 || !math.IsInf(float64(Exp(100)), 1) || Exp(0) != 1 {
		t.Fatal("edge values")
	}
	if nan := float32(math.NaN()); Exp(nan) == Exp(nan) {
		t.Fatal("NaN")
	}
}

func BenchmarkExp(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%200) - 100
	}
	b.Run("kernels", func(b *testing.B) {
		s := float32(0)
		for i := 0; i < b.N; i++ {
			for _, v := range x {
				s += Exp(v)
			}
		}
		_ = s
	})
	b.Run("math", func(b *testing.B) {
		s := float32(0)
		for i := 0; i < b.N; i++ {
			for _, v := range x {
				s += float32(math.Exp(float64(v)))
			}
		}
		_ = s
	})
}

// TestRMSNormRowsScales: the optional scales are each row's 1/√(mean(x²)+eps), and the rows are
// what RMSNorm gives one at a time.
func TestRMSNormRowsScales(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	rows, cols := 90, 37
	x, w := randVec(rng, rows*cols), randVec(rng, cols)
	out, scales := make([]float32, rows*cols), make([]float32, rows)
	RMSNormRows(out, scales, x, rows, cols, w, 1e-5)
	row := make([]float32, cols)
	for r := 0; r < rows; r++ {
		s := RMSNorm(row, x[r*cols:(r+1)*cols], w, 1e-5)
		ss := 0.0
		for _, v := range x[r*cols : (r+1)*cols] {
			ss += float64(v) * float64(v)
		}
		near(t, "scale", float64(scales[r]), 1/math.Sqrt(ss/float64(cols)+1e-5), 1e-6)
		if s != scales[r] {
			t.Fatalf("row %d: scale %v, RMSNorm's %v", r, scales[r], s)
		}
		for c := range row {
			if row[c] != out[r*cols+c] {
				t.Fatalf("row %d: RMSNormRows differs from RMSNorm", r)
			}
		}
	}
}

// TestSwiGLUKeepsExp: over several parallel chunks and an odd tail, SwiGLU gives what a serial
// pass over blocks of 256 gives, and keeps e^(−gate) when asked without changing its output
// (training's backward pass computes the activation again that way, with the exponentials).
func TestSwiGLUKeepsExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	n := 3*swigluGrain*swigluChunk + 1000 + 7
	g, u := randVec(rng, n), randVec(rng, n)
	want := make([]float32, n)
	var e [swigluBlock]float32
	for i0 := 0; i0 < n; i0 += swigluBlock {
		i1 := min(i0+swigluBlock, n)
		ExpAffine(e[:i1-i0], g[i0:i1], -1, 0)
		for i := i0; i < i1; i++ {
			want[i] = g[i] / (1 + e[i-i0]) * u[i]
		}
	}
	out, ex, again := make([]float32, n), make([]float32, n), make([]float32, n)
	SwiGLU(out, nil, g, u)
	SwiGLU(again, ex, g, u)
	for i := range want {
		if out[i] != want[i] || again[i] != want[i] {
			t.Fatalf("value %d: %v and %v (keeping e^-g), serial %v", i, out[i], again[i], want[i])
		}
		near(t, "e^-g", float64(ex[i]), math.Exp(-float64(g[i])), 1e-6)
	}
	// In place (out aliasing gate), as the inference forward runs it.
	gc := append([]float32(nil), g...)
	SwiGLU(gc, nil, gc, u)
	for i := range want {
		if gc[i] != want[i] {
			t.Fatalf("value %d in place: %v, %v", i, gc[i], want[i])
		}
	}
}

// TestRopeTableLazy: a table computes its values a chunk of positions at a time, on first use,
// bit for bit what computing every position up front gave (float32 of the float64 sin and cos,
// times Scale's factor in f32), from concurrent goroutines too; it holds only the chunks in
// use, and a position outside it panics.
func TestRopeTableLazy(t *testing.T) {
	const n, hd = 1000, 64
	r := NewRope(hd, 10000)
	for _, f := range []float32{1, 1.19} {
		tab := r.Table(n)
		if f != 1 {
			tab.Scale(f)
		}
		if tab.Bytes() != 0 {
			t.Fatalf("a new table holds %d bytes", tab.Bytes())
		}
		x := make([]float32, hd)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		got := slices.Clone(x)
		tab.Apply(got, 3)
		if want := int64(2 * 4 * tableChunkPositions * hd / 2); tab.Bytes() != want {
			t.Fatalf("after one position the table holds %d bytes, want one chunk's %d", tab.Bytes(), want)
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for pos := g; pos < n; pos += 4 {
					y := slices.Clone(x)
					tab.Apply(y, pos)
					half := hd / 2
					for i := range half {
						s, c := math.Sincos(float64(pos) * r.InvFreq[i])
						cs, sn := float32(c), float32(s)
						if f != 1 {
							cs, sn = cs*f, sn*f
						}
						a, b := x[i], x[i+half]
						if y[i] != a*cs-b*sn || y[i+half] != b*cs+a*sn {
							t.Errorf("scale %v position %d dimension %d: %v, %v", f, pos, i, y[i], y[i+half])
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		if want := int64(2 * 4 * n * hd / 2); tab.Bytes() != want {
			t.Fatalf("every position: %d bytes, want %d", tab.Bytes(), want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a position past the table did not panic")
		}
	}()
	r.Table(n).Apply(make([]float32, hd), n)
}

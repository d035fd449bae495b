package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/honeai/hone/internal/gemm"
)

// TestLetGoRestores: a heap copy of a weight let go into the pack serving multiplies by (an
// f32 pack, a bf16 pair pack, a fused group's pack at the part's offset) is read back exactly:
// Row, Dense (what training multiplies by), and the other packs built later from it (an
// f32-arithmetic pack after a pair pack, training's pair pack for dx = dy·W) give the products
// the original weight gives.
func TestLetGoRestores(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const in = 96
	newLinear := func(out int, kind gemm.Half) (*Linear, []float32) {
		f := make([]float32, out*in)
		for i := range f {
			f[i] = float32(rng.NormFloat64())
		}
		w := Weight{Rows: out, Cols: in, Kind: kind}
		if kind == 0 {
			w.F32 = f
		} else {
			w.Half = make([]uint16, len(f))
			kind.Encode(w.Half, f)
			kind.Decode(f, w.Half)
		}
		return &Linear{W: w}, f
	}
	x := make([]float32, 3*in)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	// product is x·Wᵀ by the reference f32 GEMM on the values.
	product := func(w []float32, out int) []float32 {
		y := make([]float32, 3*out)
		gemm.Sgemm(false, true, 3, out, in, 1, x, in, w, in, 0, y, out)
		return y
	}
	near := func(what string, got, want []float32) {
		t.Helper()
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-3*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%s: element %d is %v, want %v", what, i, got[i], want[i])
			}
		}
	}
	check := func(name string, l *Linear, f []float32) {
		t.Helper()
		if !l.W.dropped() {
			t.Fatalf("%s: the heap copy was not let go", name)
		}
		row := make([]float32, in)
		for _, r := range []int{0, l.W.Rows - 1} {
			l.W.Row(row, r)
			if !slices.Equal(row, f[r*in:(r+1)*in]) {
				t.Fatalf("%s: row %d differs", name, r)
			}
		}
		d := l.Dense()
		if got := d.Floats(); !slices.Equal(got, f) || d.Kind != l.W.Kind {
			t.Fatalf("%s: Dense differs", name)
		}
		y := make([]float32, 3*l.Out())
		l.Forward(false, x, 3, y, false) // an f32-arithmetic pack, built from the restored values
		near(name+" f32 pack", y, product(f, l.Out()))
		if l.W.Kind == gemm.BF16 {
			dy := make([]float32, 3*l.Out())
			copy(dy, y)
			dx := make([]float32, 3*in)
			gemm.GemmPacked(false, 3, 1, dy, l.Out(), l.PairsPacked(false), 0, dx, in)
			// bf16 arithmetic: dy is rounded to bf16 as it enters the product.
			h := make([]uint16, len(dy))
			gemm.BF16.Encode(h, dy)
			gemm.BF16.Decode(dy, h)
			want := make([]float32, 3*in)
			gemm.Sgemm(false, false, 3, in, l.Out(), 1, dy, l.Out(), f, in, 0, want, in)
			near(name+" dy·W", dx, want)
		}
	}

	for _, kind := range []gemm.Half{0, gemm.BF16, gemm.F16} {
		l, f := newLinear(70, kind)
		l.Packed()
		packMu.Lock()
		l.letGo()
		packMu.Unlock()
		check("own pack "+kindName(kind), l, f)
	}
	l, f := newLinear(40, gemm.BF16)
	l.PairsPacked(true)
	packMu.Lock()
	l.letGo()
	packMu.Unlock()
	check("pair pack", l, f)

	for _, kind := range []gemm.Half{0, gemm.BF16} {
		a, fa := newLinear(64, kind)
		b, fb := newLinear(33, kind)
		g := fuse(a, b)
		if kind == gemm.BF16 {
			g.pairsPacked()
		} else {
			g.packed()
		}
		packMu.Lock()
		g.letGo()
		packMu.Unlock()
		check("fused part 0 "+kindName(kind), a, fa)
		check("fused part 1 "+kindName(kind), b, fb)
	}
}

func kindName(h gemm.Half) string {
	if h == 0 {
		return "f32"
	}
	return h.String()
}

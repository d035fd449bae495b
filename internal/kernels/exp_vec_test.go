package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpAffineMatchesExp: the vectorised exp agrees with Exp within 2 ulp over the whole
// range (and with math.Exp within 4 ulp), on every length (the tail runs on Exp), in place
// too, and returns the sum of what it wrote.
func TestExpAffineMatchesExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{0, 1, 15, 16, 17, 33, 64, 1000} {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(rng.Float64()*170 - 85)
		}
		for _, ab := range [][2]float32{{1, 0}, {-1, 0}, {1, -3.5}, {0.5, 2}} {
			dst := make([]float32, n)
			s := ExpAffine(dst, src, ab[0], ab[1])
			var sum float64
			for i, v := range src {
				x := ab[0]*v + ab[1]
				want := math.Exp(float64(x))
				if x < -87 {
					continue
				}
				if d := math.Abs(float64(dst[i])-want) / want; d > 4*6e-8 {
					t.Fatalf("n %d, e^%v = %v, want %v (rel %.3g)", n, x, dst[i], want, d)
				}
				if d := math.Abs(float64(dst[i]-Exp(x))) / want; d > 2*6e-8 {
					t.Fatalf("n %d, e^%v = %v, Exp %v", n, x, dst[i], Exp(x))
				}
				sum += float64(dst[i])
			}
			if math.Abs(float64(s)-sum) > 1e-5*sum+1e-30 {
				t.Fatalf("n %d: sum %v, want %v", n, s, sum)
			}
			inPlace := append([]float32(nil), src...)
			ExpAffine(inPlace, inPlace, ab[0], ab[1])
			for i := range inPlace {
				if inPlace[i] != dst[i] {
					t.Fatalf("in place differs at %d", i)
				}
			}
		}
	}
	// Bounds: −Inf and far below give 0, overflow +Inf, on both paths.
	inf := float32(math.Inf(1))
	out := make([]float32, 16)
	ExpAffine(out, []float32{-1000, 1000, 0, 88.7, -87.3, 1, -inf, inf, 3, 4, 5, 6, 7, 8, 9, 10}, 1, 0)
	if out[0] != 0 || !math.IsInf(float64(out[1]), 1) || out[2] != 1 || out[3] < 3e38 || math.Abs(float64(out[5])-math.E) > 1e-6 || out[6] != 0 || !math.IsInf(float64(out[7]), 1) {
		t.Fatalf("bounds: %v", out[:8])
	}
}

func BenchmarkExpAffine(b *testing.B) {
	src := make([]float32, 4096)
	for i := range src {
		src[i] = float32(i%100) * -0.1
	}
	dst := make([]float32, len(src))
	b.Run("vector", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			ExpAffine(dst, src, 1, 0)
		}
		b.ReportMetric(float64(len(src)*b.N)/b.Elapsed().Seconds()/1e9, "Gexp/s")
	})
	b.Run("scalar", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for j, v := range src {
				dst[j] = Exp(v)
			}
		}
		b.ReportMetric(float64(len(src)*b.N)/b.Elapsed().Seconds()/1e9, "Gexp/s")
	})
}

// TestMaxScale: the vector max and scale agree with plain loops on every length.
func TestMaxScale(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for n := 0; n < 70; n++ {
		x := make([]float32, n)
		want := float32(math.Inf(-1))
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 10)
			want = max(want, x[i])
		}
		if got := Max(x); got != want {
			t.Fatalf("n %d: max %v, want %v", n, got, want)
		}
		y := append([]float32(nil), x...)
		Scale(y, -0.37)
		for i := range y {
			if y[i] != x[i]*-0.37 {
				t.Fatalf("n %d: scaled[%d] = %v, want %v", n, i, y[i], x[i]*-0.37)
			}
		}
	}
}

// TestExpAffineWhereverItFalls: an element's exponential is the same bits whatever the slice
// it falls in (its offset and the slice's length: whole blocks of 16 or the rest), so that a
// row of SwiGLU's flat input, or a softmax row, gets the same values wherever it lies.
func TestExpAffineWhereverItFalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	src := make([]float32, 100)
	for i := range src {
		src[i] = float32(rng.Float64()*40 - 20)
	}
	want := make([]float32, len(src))
	for i, v := range src {
		ExpAffine(want[i:i+1], []float32{v}, -1, 0.5)
	}
	for lo := range 20 {
		for hi := lo; hi <= len(src); hi += 7 {
			dst := make([]float32, hi-lo)
			ExpAffine(dst, src[lo:hi], -1, 0.5)
			for i, v := range dst {
				if math.Float32bits(v) != math.Float32bits(want[lo+i]) {
					t.Fatalf("src[%d:%d]: element %d = %v, alone %v", lo, hi, lo+i, v, want[lo+i])
				}
			}
		}
	}
}

// TestSwiGLURowInvariance: SwiGLU over rows of a width that is not a multiple of 16 gives
// each row the same bits as that row alone, exponentials included, also where rows straddle
// the chunks the pass is split into (width 1000, 90 rows).
func TestSwiGLURowInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, shape := range [][2]int{{37, 9}, {1000, 90}} {
		width, rows := shape[0], shape[1]
		gate, up := make([]float32, width*rows), make([]float32, width*rows)
		for i := range gate {
			gate[i], up[i] = float32(rng.NormFloat64()*3), float32(rng.NormFloat64())
		}
		out, e := make([]float32, width*rows), make([]float32, width*rows)
		SwiGLU(out, e, gate, up)
		for r := range rows {
			one, oneE := make([]float32, width), make([]float32, width)
			SwiGLU(one, oneE, gate[r*width:(r+1)*width], up[r*width:(r+1)*width])
			for j, v := range one {
				if math.Float32bits(v) != math.Float32bits(out[r*width+j]) || math.Float32bits(oneE[j]) != math.Float32bits(e[r*width+j]) {
					t.Fatalf("width %d, row %d, element %d: %v alone, %v among %d rows", width, r, j, v, out[r*width+j], rows)
				}
			}
		}
	}
}

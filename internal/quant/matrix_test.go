package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
)

var allTypes = []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}

func randomMatrix(t *testing.T, r *rand.Rand, typ gguf.TensorType, rows, cols int) (*Matrix, []float32) {
	t.Helper()
	data := randomBlocks(r, typ, rows*cols/typ.BlockSize())
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	w, err := gguf.Dequantize(typ, data, rows*cols)
	if err != nil {
		t.Fatal(err)
	}
	return m, w
}

func randomActs(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// actsBound is how far the product of weight row w (dequantized) with activation row x may
// be from the exact one: the activations are rounded to D·Q with D = max|x|/127 per block of
// bs, an error of at most D/2 per element, so the product moves by at most Σ|w|·D/2; the
// kernels' f32 sums of the scaled block sums add a relative 1e-5 of Σ|w·x|.
func actsBound(w, x []float32, bs int) float64 {
	b, abs := 0.0, 0.0
	for b0 := 0; b0 < len(x); b0 += bs {
		amax := 0.0
		for _, v := range x[b0 : b0+bs] {
			amax = max(amax, math.Abs(float64(v)))
		}
		for i := b0; i < b0+bs; i++ {
			b += math.Abs(float64(w[i])) * amax / 127 / 2
			abs += math.Abs(float64(w[i]) * float64(x[i]))
		}
	}
	return b*1.001 + 1e-5*abs + 1e-6
}

func refDot(w, x []float32) float64 {
	s := 0.0
	for i := range x {
		s += float64(w[i]) * float64(x[i])
	}
	return s
}

// TestMatMulTMatchesDequantized checks x·Mᵀ for every type on odd shapes against the f64
// product with the dequantized matrix, within actsBound; with 1 and 3 threads, overwriting
// and accumulating into an output with a wider stride; by integer dot products on quantized
// activations for every row count, and by dequantized tiles and the f32 GEMM from 16 rows
// (GEMMRows; exact in the activations, so within the same bound).
func TestMatMulTMatchesDequantized(t *testing.T) {
	for _, g := range []int{0, 16} {
		t.Run(fmt.Sprintf("GEMMRows=%d", g), func(t *testing.T) {
			defer func(old int) { GEMMRows = old }(GEMMRows)
			GEMMRows = g
			testMatMulT(t)
		})
	}
}

func testMatMulT(t *testing.T) {
	defer gemm.SetThreads(0)
	r := rand.New(rand.NewPCG(3, 4))
	for _, typ := range allTypes {
		bs := typ.BlockSize()
		for _, blocks := range []int{1, 3, 5} {
			cols := blocks * bs
			m, w := randomMatrix(t, r, typ, 37, cols)
			for _, rows := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 37} {
				for _, threads := range []int{1, 3} {
					gemm.SetThreads(threads)
					x := randomActs(r, rows*cols)
					ldo := m.Rows + 2
					out := make([]float32, rows*ldo)
					for i := range out {
						out[i] = 1
					}
					acc := threads == 3
					m.MatMulT(x, rows, out, ldo, acc)
					for i := range rows {
						xi := x[i*cols : (i+1)*cols]
						for j := range m.Rows {
							wj := w[j*cols : (j+1)*cols]
							want := refDot(wj, xi)
							if acc {
								want++
							}
							got := float64(out[i*ldo+j])
							if bound := actsBound(wj, xi, bs); math.Abs(got-want) > bound {
								t.Fatalf("%s cols %d rows %d threads %d: out[%d][%d] = %g, want %g ± %g", typ, cols, rows, threads, i, j, got, want, bound)
							}
						}
						for j := m.Rows; j < ldo; j++ {
							if out[i*ldo+j] != 1 {
								t.Fatalf("%s: out[%d][%d] beyond the matrix's columns was written", typ, i, j)
							}
						}
					}
				}
			}
		}
	}
}

// TestMatMulTManyIsConcatenation: the product over several matrices of different types
// equals each one's own product placed side by side.
func TestMatMulTManyIsConcatenation(t *testing.T) {
	defer gemm.SetThreads(0)
	gemm.SetThreads(2)
	defer func(old int) { GEMMRows = old }(GEMMRows)
	GEMMRows = 0
	r := rand.New(rand.NewPCG(5, 6))
	cols := 512
	a, _ := randomMatrix(t, r, gguf.Q8_0, 7, cols)
	b, _ := randomMatrix(t, r, gguf.Q4_K, 5, cols)
	c, _ := randomMatrix(t, r, gguf.Q5_1, 9, cols)
	rows := 20
	x := randomActs(r, rows*cols)
	n := a.Rows + b.Rows + c.Rows
	out := make([]float32, rows*n)
	MatMulTMany(x, rows, []*Matrix{a, b, c}, out, n, false)
	// By dequantized tiles (GEMMRows) too: the f32 products of the parts.
	GEMMRows = 1
	ref := make([]float32, rows*n)
	MatMulTMany(x, rows, []*Matrix{a, b, c}, ref, n, false)
	off := 0
	for _, m := range []*Matrix{a, b, c} {
		w, _ := gguf.Dequantize(m.Type, m.Data, m.Rows*m.Cols)
		for i := range rows {
			for j := range m.Rows {
				want := refDot(w[j*cols:(j+1)*cols], x[i*cols:(i+1)*cols])
				if d := math.Abs(float64(ref[i*n+off+j]) - want); d > 1e-4*(1+math.Abs(want)) {
					t.Fatalf("GEMM path, %s part: out[%d][%d] = %g, want %g", m.Type, i, off+j, ref[i*n+off+j], want)
				}
			}
		}
		off += m.Rows
	}
	GEMMRows = 0
	off = 0
	for _, m := range []*Matrix{a, b, c} {
		want := make([]float32, rows*m.Rows)
		m.MatMulT(x, rows, want, m.Rows, false)
		for i := range rows {
			for j := range m.Rows {
				if got := out[i*n+off+j]; got != want[i*m.Rows+j] {
					t.Fatalf("%s part: out[%d][%d] = %g, alone %g", m.Type, i, off+j, got, want[i*m.Rows+j])
				}
			}
		}
		off += m.Rows
	}
}

// TestMatMulTEachIsPerMatrix: MatMulTEach's row i equals row i of x through ms[i] alone,
// for matrices of several types and heights (packed ones too where this CPU packs, and
// row views of a packed matrix), on one and two threads; out beyond each matrix's rows
// stays as it was.
func TestMatMulTEachIsPerMatrix(t *testing.T) {
	defer gemm.SetThreads(0)
	r := rand.New(rand.NewPCG(11, 12))
	cols := 512
	var ms []*Matrix
	for i, typ := range []gguf.TensorType{gguf.Q4_K, gguf.Q8_0, gguf.Q6_K, gguf.Q4_1, gguf.Q5_K} {
		m, _ := randomMatrix(t, r, typ, 32+16*i, cols)
		if i%2 == 0 {
			m.Pack()
		}
		ms = append(ms, m)
	}
	big, _ := randomMatrix(t, r, gguf.Q4_K, 96, cols)
	big.Pack()
	ms = append(ms, big.RowsView(32, 80), big.RowsView(3, 40))
	x := randomActs(r, len(ms)*cols)
	ldo := 0
	for _, m := range ms {
		ldo = max(ldo, m.Rows)
	}
	ldo += 2
	for _, threads := range []int{1, 2} {
		gemm.SetThreads(threads)
		out := make([]float32, len(ms)*ldo)
		for i := range out {
			out[i] = 7
		}
		MatMulTEach(x, ms, out, ldo)
		for i, m := range ms {
			want := make([]float32, m.Rows)
			m.MatMulT(x[i*cols:(i+1)*cols], 1, want, m.Rows, false)
			for j := range ldo {
				got := out[i*ldo+j]
				if j >= m.Rows {
					if got != 7 {
						t.Fatalf("threads %d: out[%d][%d] beyond matrix %d's %d rows was written", threads, i, j, i, m.Rows)
					}
					continue
				}
				if got != want[j] {
					t.Fatalf("threads %d, %s matrix %d (packed %v): out[%d][%d] = %g, alone %g", threads, m.Type, i, m.Packed(), i, j, got, want[j])
				}
			}
		}
	}
}

// TestRowsView: a view of rows of a matrix multiplies as those rows of the whole, and
// shares its packed copy when the rows are whole groups of it.
func TestRowsView(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	cols := 256
	for _, typ := range []gguf.TensorType{gguf.Q4_K, gguf.Q8_0} {
		m, _ := randomMatrix(t, r, typ, 64, cols)
		packed := m.Pack()
		x := randomActs(r, cols)
		// The packed kernels round differently (Q4_K's activations by 32, not 256): a view
		// that is not packed is compared with the unpacked matrix.
		whole, unpacked := make([]float32, m.Rows), make([]float32, m.Rows)
		m.MatMulT(x, 1, whole, m.Rows, false)
		(&Matrix{Type: m.Type, Rows: m.Rows, Cols: m.Cols, Data: m.Data}).MatMulT(x, 1, unpacked, m.Rows, false)
		for _, rr := range [][2]int{{16, 48}, {0, 64}, {5, 21}} {
			v := m.RowsView(rr[0], rr[1])
			if v.Packed() != (packed && rr[0]%16 == 0) {
				t.Fatalf("%s rows %v: view packed %v, matrix packed %v", typ, rr, v.Packed(), packed)
			}
			ref := whole
			if !v.Packed() {
				ref = unpacked
			}
			got := make([]float32, v.Rows)
			v.MatMulT(x, 1, got, v.Rows, false)
			for j, g := range got {
				if g != ref[rr[0]+j] {
					t.Fatalf("%s rows %v: out[%d] = %g, whole matrix %g", typ, rr, j, g, ref[rr[0]+j])
				}
			}
		}
	}
}

// TestMatMulTNoGarbage: a steady stream of single-threaded products on quantized activations
// allocates nothing, by the multi-row kernels and by the single-row ones (1 and 5 rows).
func TestMatMulTNoGarbage(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	defer gemm.SetThreads(0)
	gemm.SetThreads(1)
	defer func(old int) { GEMMRows = old }(GEMMRows)
	GEMMRows = 0
	r := rand.New(rand.NewPCG(7, 8))
	for _, typ := range []gguf.TensorType{gguf.Q4_1, gguf.Q6_K} {
		m, _ := randomMatrix(t, r, typ, 64, 512)
		x := randomActs(r, 5*512)
		out := make([]float32, 5*64)
		for _, rows := range []int{1, 4, 5} {
			m.MatMulT(x, rows, out, 64, false)
			if n := testing.AllocsPerRun(20, func() { m.MatMulT(x, rows, out, 64, false) }); n > 0 {
				t.Errorf("%s: MatMulT of %d rows allocates %v times per call", typ, rows, n)
			}
		}
	}
}

// TestMatMulAccMatchesDequantized checks dx += dy·M against the f64 product with the
// dequantized matrix (no activation quantization here: the tiles are dequantized to f32),
// with more rows than one tile.
func TestMatMulAccMatchesDequantized(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, typ := range allTypes {
		for _, shape := range [][2]int{{37, 3}, {1100, 1}} {
			cols := shape[1] * typ.BlockSize()
			m, w := randomMatrix(t, r, typ, shape[0], cols)
			if shape[0] <= accTile(cols) && shape[0] == 1100 {
				t.Fatalf("%d rows fit one tile of %d", shape[0], accTile(cols))
			}
			for _, rows := range []int{1, 3, 16} {
				dy := randomActs(r, rows*m.Rows)
				dx := randomActs(r, rows*cols)
				want := make([]float64, len(dx))
				for i := range rows {
					for c := range cols {
						s := float64(dx[i*cols+c])
						for j := range m.Rows {
							s += float64(dy[i*m.Rows+j]) * float64(w[j*cols+c])
						}
						want[i*cols+c] = s
					}
				}
				m.MatMulAcc(dy, rows, dx)
				for i, v := range want {
					if d := math.Abs(float64(dx[i]) - v); d > 1e-4*(1+math.Abs(v))*math.Sqrt(float64(m.Rows)) {
						t.Fatalf("%s %d×%d rows %d: dx[%d] = %g, want %g", typ, m.Rows, cols, rows, i, dx[i], v)
					}
				}
			}
		}
	}
}

func TestRowMatchesDequantize(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, typ := range allTypes {
		cols := 3 * typ.BlockSize()
		m, w := randomMatrix(t, r, typ, 5, cols)
		out := make([]float32, cols)
		for row := range 5 {
			m.Row(out, row)
			for i, v := range out {
				if v != w[row*cols+i] {
					t.Fatalf("%s row %d [%d] = %g, want %g", typ, row, i, v, w[row*cols+i])
				}
			}
		}
		if m.Bytes() != int64(5*m.RowBytes()) || m.RowBytes() != 3*typ.BlockBytes() {
			t.Fatalf("%s: Bytes %d, RowBytes %d", typ, m.Bytes(), m.RowBytes())
		}
	}
}

func TestNewMatrixRefuses(t *testing.T) {
	for _, c := range []struct {
		typ        gguf.TensorType
		rows, cols int
		n          int
		want       string
	}{
		{gguf.F32, 1, 32, 128, "not supported"},
		{gguf.Q2_K, 1, 256, 84, "not supported"},
		{gguf.Q8_0, 1, 48, 34, "multiple of its block size 32"},
		{gguf.Q4_K, 2, 32, 288, "multiple of its block size 256"},
		{gguf.Q8_0, 2, 32, 34, "got 34 bytes"},
		{gguf.Q8_0, 1, 32, 35, "got 35 bytes"},
		{gguf.Q8_0, 0, 32, 0, "must be positive"},
		{gguf.Q8_0, 1, -32, 0, "must be positive"},
		{gguf.Q8_0, math.MaxInt / 2, 32, 34, "got 34 bytes"},
	} {
		_, err := NewMatrix(c.typ, c.rows, c.cols, make([]byte, c.n))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewMatrix(%s, %d, %d, %d bytes) = %v, want an error with %q", c.typ, c.rows, c.cols, c.n, err, c.want)
		}
	}
}

// FuzzNewMatrix: NewMatrix refuses or accepts any input without panicking, and every row of a
// matrix it accepts dequantizes.
func FuzzNewMatrix(f *testing.F) {
	f.Add(uint32(gguf.Q8_0), 1, 32, make([]byte, 34))
	f.Add(uint32(gguf.Q4_K), 2, 256, make([]byte, 288))
	f.Add(uint32(gguf.Q6_K), 1, 256, make([]byte, 209))
	f.Fuzz(func(t *testing.T, typ uint32, rows, cols int, data []byte) {
		m, err := NewMatrix(gguf.TensorType(typ), rows, cols, data)
		if err != nil {
			if m != nil {
				t.Fatal("a matrix with an error")
			}
			return
		}
		if m.Bytes() != int64(len(data)) {
			t.Fatalf("Bytes %d of %d", m.Bytes(), len(data))
		}
		out := make([]float32, cols)
		for r := range min(rows, 64) {
			m.Row(out, r)
		}
	})
}

func ExampleMatrix_MatMulT() {
	// A 2 × 32 Q8_0 matrix: row r is all (r+1)·0.5 (scale 0.5, values r+1).
	data := make([]byte, 2*34)
	for r := range 2 {
		h := gemm.Float32ToF16(0.5)
		data[34*r], data[34*r+1] = byte(h), byte(h>>8)
		for i := range 32 {
			data[34*r+2+i] = byte(r + 1)
		}
	}
	m, _ := NewMatrix(gguf.Q8_0, 2, 32, data)
	x := make([]float32, 32)
	for i := range x {
		x[i] = 1
	}
	out := make([]float32, 2)
	m.MatMulT(x, 1, out, 2, false)
	fmt.Println(out)
	// Output: [16 32]
}

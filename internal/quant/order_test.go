package quant

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/honeai/hone/internal/gemm"
)

// goKernels swaps the Go kernels in for the assembly ones until the test ends.
func goKernels(t *testing.T) {
	r80, r40, r41, r50, r51, r4k, r5k, r6k := rowQ8_0, rowQ4_0, rowQ4_1, rowQ5_0, rowQ5_1, rowQ4_K, rowQ5_K, rowQ6_K
	d80, d40, d41, d50, d51, d4k, d6k := dot4Q8_0, dot4Q4_0, dot4Q4_1, dot4Q5_0, dot4Q5_1, dot4Q4_K, dot4Q6_K
	o80, o40, o41, o50, o51, o4k, o6k := dot1Q8_0, dot1Q4_0, dot1Q4_1, dot1Q5_0, dot1Q5_1, dot1Q4_K, dot1Q6_K
	s80, s40, s41, s50, s51, s4k, s6k := row1Q8_0, row1Q4_0, row1Q4_1, row1Q5_0, row1Q5_1, row1Q4_K, row1Q6_K
	pk, pkPF := packedKernel, packedKernelPF
	t.Cleanup(func() {
		rowQ8_0, rowQ4_0, rowQ4_1, rowQ5_0, rowQ5_1, rowQ4_K, rowQ5_K, rowQ6_K = r80, r40, r41, r50, r51, r4k, r5k, r6k
		dot4Q8_0, dot4Q4_0, dot4Q4_1, dot4Q5_0, dot4Q5_1, dot4Q4_K, dot4Q6_K = d80, d40, d41, d50, d51, d4k, d6k
		dot1Q8_0, dot1Q4_0, dot1Q4_1, dot1Q5_0, dot1Q5_1, dot1Q4_K, dot1Q6_K = o80, o40, o41, o50, o51, o4k, o6k
		row1Q8_0, row1Q4_0, row1Q4_1, row1Q5_0, row1Q5_1, row1Q4_K, row1Q6_K = s80, s40, s41, s50, s51, s4k, s6k
		packedKernel, packedKernelPF = pk, pkPF
	})
	rowQ8_0, rowQ4_0, rowQ4_1, rowQ5_0, rowQ5_1 = dotQ8_0Go, dotQ4_0Go, dotQ4_1Go, dotQ5_0Go, dotQ5_1Go
	rowQ4_K, rowQ5_K, rowQ6_K = dotQ4_KGo, dotQ5_KGo, dotQ6_KGo
	dot4Q8_0, dot4Q4_0, dot4Q4_1, dot4Q5_0, dot4Q5_1 = dot4Q8_0Go, dot4Q4_0Go, dot4Q4_1Go, dot4Q5_0Go, dot4Q5_1Go
	dot1Q8_0, dot1Q4_0, dot1Q4_1 = go1(dotQ8_0Go), go1(dotQ4_0Go), dotQ4_1Go
	dot1Q5_0, dot1Q5_1 = go1(dotQ5_0Go), dotQ5_1Go
	row1Q8_0, row1Q4_0, row1Q4_1, row1Q5_0, row1Q5_1 = dot1Q8_0, dot1Q4_0, dot1Q4_1, dot1Q5_0, dot1Q5_1
	if d4k != nil {
		dot4Q4_K, dot1Q4_K, row1Q4_K = dot4Q4_KGo, dotQ4_KGo, dotQ4_KGo
	}
	if d6k != nil {
		dot4Q6_K, dot1Q6_K, row1Q6_K = dot4Q6_KGo, dotQ6_KGo, dotQ6_KGo
	}
	packedKernel, packedKernelPF = packed16Go, nil
}

// TestRowOrder: a matrix over rows stored in another order (SetRowOrder) has the rows,
// products (by the row and multi-row kernels, the packed ones, dequantized tiles) and
// backward products of the matrix whose rows were copied into order, bit for bit, with the
// kernels in use and with the Go ones; its packed copy's rows (Row) are those too.
func TestRowOrder(t *testing.T) {
	for _, kernels := range []string{"in use", "go"} {
		t.Run(kernels, func(t *testing.T) {
			if kernels == "go" {
				goKernels(t)
			}
			testRowOrder(t)
		})
	}
}

func testRowOrder(t *testing.T) {
	defer gemm.SetThreads(0)
	defer func(old int) { GEMMRows = old }(GEMMRows)
	r := rand.New(rand.NewPCG(31, 32))
	for _, typ := range allTypes {
		for _, shape := range [][2]int{{48, 256}, {80, 768}} {
			rows, cols := shape[0], shape[1]
			m, _ := randomMatrix(t, r, typ, rows, cols)
			order := make([]int32, rows)
			for i := range order {
				order[i] = int32(i)
			}
			r.Shuffle(rows, func(i, j int) { order[i], order[j] = order[j], order[i] })
			n := m.RowBytes()
			data := make([]byte, 0, len(m.Data))
			for _, s := range order {
				data = append(data, m.Data[int(s)*n:int(s+1)*n]...)
			}
			c, err := NewMatrix(typ, rows, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.SetRowOrder(order); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%v %v", typ, shape)
			got, want := make([]float32, cols), make([]float32, cols)
			for i := range rows {
				m.Row(got, i)
				c.Row(want, i)
				if !slices.Equal(got, want) {
					t.Fatalf("%s: row %d differs", name, i)
				}
			}
			pm, pc := *m, *c
			if pm.Pack() != pc.Pack() {
				t.Fatalf("%s: one of the two packed", name)
			}
			for i := range rows {
				pm.Row(got, i) // from the packed copy, if there is one
				c.Row(want, i)
				if !slices.Equal(got, want) {
					t.Fatalf("%s: row %d of the packed copy differs", name, i)
				}
			}
			for _, g := range []int{0, 1} {
				GEMMRows = g
				for _, xr := range []int{1, 5, 16} {
					gemm.SetThreads(1 + xr%2)
					x := randomActs(r, xr*cols)
					for _, p := range [][2]*Matrix{{m, c}, {&pm, &pc}} {
						got, want := make([]float32, xr*rows), make([]float32, xr*rows)
						p[0].MatMulT(x, xr, got, rows, false)
						p[1].MatMulT(x, xr, want, rows, false)
						if !slices.Equal(got, want) {
							t.Fatalf("%s GEMMRows %d: %d-row product (packed %v) differs", name, g, xr, p[0].Packed())
						}
					}
				}
			}
			dy := randomActs(r, 3*rows)
			got, want = make([]float32, 3*cols), make([]float32, 3*cols)
			m.MatMulAcc(dy, 3, got)
			c.MatMulAcc(dy, 3, want)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: MatMulAcc differs", name)
			}
		}
	}
	m, _ := randomMatrix(t, r, allTypes[0], 4, 32)
	for _, bad := range [][]int32{{0, 1, 2}, {0, 1, 2, 2}, {0, 1, 2, 4}, {0, 1, 2, -1}} {
		if m.SetRowOrder(bad) == nil {
			t.Errorf("SetRowOrder(%v) of 4 rows: no error", bad)
		}
	}
}

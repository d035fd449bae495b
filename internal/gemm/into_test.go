package gemm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestGemmPackedInto: the parts GemmPackedInto writes are GemmPacked's columns, bit for bit,
// for f32, bf16 and bf16-pair packs, at decode's and prefill's row counts (the streaming,
// tall and blocked paths), with a last part whose width is not a multiple of a panel; and it
// refuses, computing nothing, where a part before the last is not a whole number of panels.
func TestGemmPackedInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const k = 300
	widths := []int{64, 32, 96 + 7}
	n := 0
	for _, w := range widths {
		n += w
	}
	w32 := make([]float32, n*k)
	for i := range w32 {
		w32[i] = float32(rng.NormFloat64())
	}
	w16 := make([]uint16, len(w32))
	BF16.Encode(w16, w32)
	packs := map[string]*PackedB{
		"f32":   PackB(true, n, k, w32, k),
		"bf16":  PackHalfB(BF16, true, n, k, w16, k),
		"pairs": PackBF16Pairs(true, n, k, w16, k),
	}
	defer SetImpl(Impls()[0])
	for _, impl := range Impls() {
		if err := SetImpl(impl); err != nil {
			t.Fatal(err)
		}
		for name, pb := range packs {
			for _, m := range []int{1, 3, 8, 16, 61, 300} {
				t.Run(fmt.Sprintf("%s/%s/m%d", impl, name, m), func(t *testing.T) {
					a := make([]float32, m*k)
					for i := range a {
						a[i] = float32(rng.NormFloat64())
					}
					want := make([]float32, m*n)
					GemmPacked(false, m, 1, a, k, pb, 0, want, n)
					outs := make([][]float32, len(widths))
					for i, w := range widths {
						outs[i] = make([]float32, m*w)
						for j := range outs[i] {
							outs[i][j] = float32(j) // stale values: beta 0 must ignore them
						}
					}
					if !GemmPackedInto(m, a, k, pb, outs, widths) {
						if name == "pairs" && current.Load().amx {
							t.Skip("AMX: GemmPackedInto declines pair packs")
						}
						t.Fatal("GemmPackedInto declined")
					}
					col := 0
					for i, w := range widths {
						for r := 0; r < m; r++ {
							if got, exp := outs[i][r*w:(r+1)*w], want[r*n+col:r*n+col+w]; !slices.Equal(got, exp) {
								t.Fatalf("part %d row %d differs from GemmPacked's columns", i, r)
							}
						}
						col += w
					}
				})
			}
		}
	}
	outs := [][]float32{make([]float32, 2*40), make([]float32, 2*(n-40))}
	if GemmPackedInto(2, make([]float32, 2*k), k, packs["f32"], outs, []int{40, n - 40}) {
		t.Fatal("a first part of 40 columns was accepted")
	}
	if slices.ContainsFunc(outs[0], func(v float32) bool { return v != 0 }) {
		t.Fatal("a declined call wrote its output")
	}
}

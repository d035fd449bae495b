package gemm

import "testing"

// TestSmallProductsDoNotAllocate pins the allocations of the products that run on the calling
// goroutine alone: attention's in decode (scores = Q·Kᵀ and out = S·V for a group of query
// heads over one cache block), tens of thousands of them a step, whose garbage made the
// collector run several times a step; a small model's prepacked projections; a small prefill's
// (the blocked path). Products large enough for the worker pool may allocate (their problem
// copy, the job).
func TestSmallProductsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	const group, block, hd = 3, 16, 64
	q := make([]float32, group*hd)
	k32 := make([]float32, block*hd)
	k16 := make([]uint16, block*hd)
	s := make([]float32, group*block)
	out := make([]float32, group*hd)
	w := make([]float32, block*hd)
	const rows = 20 // more than the dot kernels take
	x := make([]float32, rows*hd)
	sx := make([]float32, rows*block)
	forEachImpl(t, func(t *testing.T) {
		pb := PackB(true, block, hd, w, hd)
		for _, tc := range []struct {
			name string
			fn   func()
		}{
			{"scores", func() { Sgemm(false, true, group, block, hd, 0.125, q, hd, k32, hd, 0, s, block) }},
			{"values", func() { Sgemm(false, false, group, hd, block, 1, s, block, k32, hd, 1, out, hd) }},
			{"scores-f16", func() { GemmHalfB(F16, false, true, group, block, hd, 0.125, q, hd, k16, hd, 0, s, block) }},
			{"values-f16", func() { GemmHalfB(F16, false, false, group, hd, block, 1, s, block, k16, hd, 1, out, hd) }},
			{"transposed-a", func() { Sgemm(true, true, group, block, hd, 1, q, group, k32, hd, 0, s, block) }},
			{"packed", func() { GemmPacked(false, group, 1, q, hd, pb, 0, s, block) }},
			{"blocked", func() { Sgemm(false, true, rows, block, hd, 1, x, hd, k32, hd, 0, sx, block) }},
			{"alpha-0", func() { Sgemm(false, true, group, block, hd, 0, q, hd, k32, hd, 0.5, s, block) }},
		} {
			if n := testing.AllocsPerRun(100, tc.fn); n != 0 {
				t.Errorf("%s: %v allocations per call, want 0", tc.name, n)
			}
		}
	})
}

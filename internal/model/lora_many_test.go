package model_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/honeai/hone/internal/model"
)

// TestAddDeltaMany: training's LoRA delta (the rank-deep product on gemm's blocked path) adds
// what inference's AddDelta adds, within a few roundings of the terms' magnitudes, for ranks
// on both sides of the dot kernels' vector and row counts from one to a training pass.
func TestAddDeltaMany(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, rank := range []int{8, 16, 32} {
		for _, rows := range []int{1, 5, 64, 512} {
			const in, out = 96, 200
			p := &model.LoRAPair{In: in, Out: out, A: make([]float32, rank*in), B: make([]float32, out*rank)}
			for i := range p.A {
				p.A[i] = float32(rng.NormFloat64())
			}
			for i := range p.B {
				p.B[i] = float32(rng.NormFloat64())
			}
			a := &model.LoRA{Rank: rank, Scaling: 0.5, Layers: []map[string]*model.LoRAPair{{"q_proj": p}}}
			x := make([]float32, rows*in)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			base := make([]float32, rows*out)
			for i := range base {
				base[i] = float32(rng.NormFloat64())
			}
			want, got := append([]float32(nil), base...), append([]float32(nil), base...)
			a.AddDelta(0, "q_proj", x, rows, want, nil)
			a.AddDeltaMany(0, "q_proj", x, rows, got, nil)
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("rank %d, %d rows: out[%d] = %v, AddDelta %v", rank, rows, i, got[i], want[i])
				}
			}
		}
	}
}

package gemm

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkAttentionProducts: attention's two f32 products per kv head as internal/model
// runs them, head dim 64: a decode step (a row's query group of 3 heads against ctx keys,
// Sgemm with B transposed, then its scores times ctx values) and a prefill (n rows of one head
// against n keys, then scores times values). GFLOP/s of the pair; the scores run on the dot
// kernels at every row count (row invariance), the values on the micro-kernels.
func BenchmarkAttentionProducts(b *testing.B) {
	const hd = 64
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range []struct {
		name   string
		m, ctx int
	}{{"decode/ctx128", 3, 128}, {"decode/ctx1024", 3, 1024}, {"prefill/n128", 128, 128}, {"prefill/n1024", 1024, 1024}} {
		q, k, v := make([]float32, s.m*hd), make([]float32, s.ctx*hd), make([]float32, s.ctx*hd)
		for _, x := range [][]float32{q, k, v} {
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
		}
		sc, out := make([]float32, s.m*s.ctx), make([]float32, s.m*hd)
		b.Run(s.name, func(b *testing.B) {
			for b.Loop() {
				Sgemm(false, true, s.m, s.ctx, hd, 0.125, q, hd, k, hd, 0, sc, s.ctx)
				Sgemm(false, false, s.m, hd, s.ctx, 1, sc, s.ctx, v, hd, 0, out, hd)
			}
			b.ReportMetric(float64(4*s.m*s.ctx*hd)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

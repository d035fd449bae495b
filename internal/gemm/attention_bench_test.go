package gemm

import (
	"fmt"
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

// BenchmarkTransposedProducts: y = x·Wᵀ (Sgemm with B transposed, f32) on training's and
// LoRA's shapes, which run on the dot kernels at every row count: a quantized LM head's tile
// (positions × 1024 vocabulary rows × hidden), LoRA's x·Aᵀ (positions × rank × a wide input)
// and a deep square.
func BenchmarkTransposedProducts(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 9))
	for _, s := range [][3]int{{1024, 1024, 576}, {2048, 1024, 896}, {512, 16, 4864}, {2048, 2048, 2048}} {
		m, n, k := s[0], s[1], s[2]
		a, w, c := make([]float32, m*k), make([]float32, n*k), make([]float32, m*n)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		b.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(b *testing.B) {
			for b.Loop() {
				Sgemm(false, true, m, n, k, 1, a, k, w, k, 0, c, n)
			}
			b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

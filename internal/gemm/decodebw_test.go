package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkDecodeBandwidth: decode at batch 1 without the rest of the model: y = x·Wᵀ for one
// row over the projections of 30 SmolLM2-135M layers (fused q/k/v 960×576, o 576×576,
// gate/up 3072×576, down 576×1536; 236 MB in bf16, twice in f32), one after the other as a
// forward pass reads them, so that every weight comes from memory. GB/s is the weight bytes
// read per second: compare with BenchmarkMemoryBandwidth (docs/performance.md "Decode
// bandwidth"). Modes: f32 weights, bf16 weights in f32 arithmetic (widened in registers),
// bf16 weights in bf16 arithmetic (pairs).
func BenchmarkDecodeBandwidth(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	shapes := [][2]int{{960, 576}, {576, 576}, {3072, 576}, {576, 1536}}
	const layers = 30
	for _, m := range []int{1, 16} {
		for _, mode := range []string{"f32", "bf16-f32", "bf16-pairs"} {
			b.Run(fmt.Sprintf("%s/batch%d", mode, m), func(b *testing.B) { decodeBandwidth(b, rng, mode, shapes, layers, m) })
		}
	}
}

func decodeBandwidth(b *testing.B, rng *rand.Rand, mode string, shapes [][2]int, layers, m int) {
	{
		var packs []*PackedB
		bytes := 0
		for l := 0; l < layers; l++ {
			for _, s := range shapes {
				n, k := s[0], s[1]
				switch mode {
				case "f32":
					w := make([]float32, n*k)
					for i := range w {
						w[i] = float32(rng.NormFloat64())
					}
					packs = append(packs, PackB(true, n, k, w, k))
					bytes += 4 * n * k
				case "bf16-f32":
					packs = append(packs, PackHalfB(BF16, true, n, k, randBF16(rng, n*k), k))
					bytes += 2 * n * k
				default:
					packs = append(packs, PackBF16Pairs(true, n, k, randBF16(rng, n*k), k))
					bytes += 2 * n * k
				}
			}
		}
		x := make([]float32, m*1536)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		y := make([]float32, m*3072)
		flops := 0
		for _, pb := range packs {
			flops += 2 * m * pb.N() * pb.K()
		}
		b.ResetTimer()
		start := time.Now()
		for it := 0; it < b.N; it++ {
			for _, pb := range packs {
				GemmPacked(false, m, 1, x, pb.K(), pb, 0, y, pb.N())
			}
		}
		sec := time.Since(start).Seconds()
		b.ReportMetric(float64(bytes)*float64(b.N)/sec/1e9, "GB/s")
		b.ReportMetric(float64(flops)*float64(b.N)/sec/1e9, "GFLOP/s")
	}
}

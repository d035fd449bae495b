package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/honeai/hone/internal/gguf"
)

// BenchmarkMatMulT multiplies a SmolLM2-sized gate projection (1536 × 576) by 1 to 128
// activation rows, by integer dot products on quantized activations ("int8") and by
// dequantized tiles and the f32 GEMM ("gemm"), and by the packed kernels ("packed", where
// Pack packs the type): where GEMMRows should lie on this CPU.
func BenchmarkMatMulT(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []gguf.TensorType{gguf.Q4_1, gguf.Q8_0, gguf.Q5_0, gguf.Q4_K, gguf.Q6_K} {
		const rowsW, cols = 1536, 768 // 768: a multiple of 256 for Q4_K
		data := randomBlocks(r, typ, rowsW*cols/typ.BlockSize())
		m, err := NewMatrix(typ, rowsW, cols, data)
		if err != nil {
			b.Fatal(err)
		}
		p := *m
		if !p.Pack() {
			p.packed = nil
		}
		for _, rows := range []int{1, 4, 16, 32, 64, 128, 512} {
			x := randomActs(r, rows*cols)
			out := make([]float32, rows*rowsW)
			for _, path := range []string{"int8", "gemm", "packed"} {
				if path == "packed" && !p.Packed() {
					continue
				}
				b.Run(fmt.Sprintf("%s/rows%d/%s", typ, rows, path), func(b *testing.B) {
					defer func(old int) { GEMMRows = old }(GEMMRows)
					GEMMRows = 0
					if path == "gemm" {
						GEMMRows = 1
					}
					mm := m
					if path == "packed" {
						mm = &p
					}
					for b.Loop() {
						mm.MatMulT(x, rows, out, rowsW, false)
					}
					b.ReportMetric(float64(b.N)*float64(rows*rowsW*cols)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}

// BenchmarkFused: SmolLM2's q/k/v projections (576, 192 and 192 rows of 576) for 1 and 16
// activation rows as one MatMulTMany ("many": the activations quantized once, one pass over
// the pool) or as three MatMulT ("separate").
func BenchmarkFused(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	const cols = 576
	var ms []*Matrix
	for _, rows := range []int{576, 192, 192} {
		m, err := NewMatrix(gguf.Q4_1, rows, cols, randomBlocks(r, gguf.Q4_1, rows*cols/32))
		if err != nil {
			b.Fatal(err)
		}
		ms = append(ms, m)
	}
	for _, rows := range []int{1, 16} {
		x := randomActs(r, rows*cols)
		out := make([]float32, rows*960)
		for _, how := range []string{"many", "separate"} {
			b.Run(fmt.Sprintf("rows%d/%s", rows, how), func(b *testing.B) {
				defer func(old int) { GEMMRows = old }(GEMMRows)
				GEMMRows = 0
				for b.Loop() {
					if how == "many" {
						MatMulTMany(x, rows, ms, out, 960, false)
						continue
					}
					off := 0
					for _, m := range ms {
						m.MatMulT(x, rows, out[off:], 960, false)
						off += m.Rows
					}
				}
			})
		}
	}
}

package gemm

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// benchCase is one BenchmarkGEMM sub-benchmark. scripts/bench-gemm.sh runs OpenBLAS on the
// same list (the C harness reads it from `go test -run TestPrintBenchShapes`).
type benchCase struct {
	prec           string // f32, bf16, f16
	op             string // NN, NT (y = x·Wᵀ), TN, or packed-NT (PackB once, then GemmPacked)
	m, n, k        int
	openblasShared bool // OpenBLAS can run it (f32 only)
}

func (bc benchCase) name() string {
	return fmt.Sprintf("%s/%s/%dx%dx%d", bc.prec, bc.op, bc.m, bc.n, bc.k)
}

// benchCases: the squares of the target, the shapes of training (NN: dX = dY·W, TN: dW) and
// the decode shapes (M = 1..16, N and K of SmolLM2-135M and Qwen2.5-0.5B layers).
func benchCases() []benchCase {
	var cs []benchCase
	for _, s := range []int{1024, 2048} {
		for _, op := range []string{"NN", "NT"} {
			cs = append(cs, benchCase{"f32", op, s, s, s, true})
		}
		cs = append(cs, benchCase{"bf16", "NT", s, s, s, false})
	}
	cs = append(cs,
		benchCase{"f32", "NN", 512, 576, 1536, true},
		benchCase{"f32", "TN", 576, 1536, 512, true},
	)
	for _, nk := range [][2]int{{1536, 576}, {576, 1536}, {49152, 576}, {4864, 896}} {
		for _, m := range []int{1, 4, 16} {
			cs = append(cs, benchCase{"f32", "NT", m, nk[0], nk[1], true})
			cs = append(cs, benchCase{"f32", "packed-NT", m, nk[0], nk[1], false})
			cs = append(cs, benchCase{"bf16", "NT", m, nk[0], nk[1], false})
			cs = append(cs, benchCase{"bf16", "packed-NT", m, nk[0], nk[1], false})
		}
	}
	cs = append(cs, benchCase{"f16", "NT", 1, 4864, 896, false}, benchCase{"f16", "NT", 128, 1536, 576, false})
	return cs
}

// BenchmarkGEMM reports GFLOP/s (2·m·n·k per call) for every benchCase under the current
// implementation (HONE_GEMM_IMPL selects another).
func BenchmarkGEMM(b *testing.B) {
	if name := os.Getenv("HONE_GEMM_IMPL"); name != "" {
		if err := SetImpl(name); err != nil {
			b.Fatal(err)
		}
		defer SetImpl(Impls()[0])
	}
	for _, bc := range benchCases() {
		b.Run(bc.name(), func(b *testing.B) {
			benchOne(b, bc)
		})
	}
}

func benchOne(b *testing.B, bc benchCase) {
	rng := rand.New(rand.NewPCG(1, 1))
	m, n, k := bc.m, bc.n, bc.k
	rand32 := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.NormFloat64())
		}
		return s
	}
	a := rand32(m * k)
	c := make([]float32, m*n)
	bf := rand32(k * n)
	var h Half
	var bh []uint16
	switch bc.prec {
	case "bf16":
		h = BF16
	case "f16":
		h = F16
	}
	if h != 0 {
		bh = make([]uint16, len(bf))
		h.Encode(bh, bf)
		bf = nil
	}
	lda := k
	transA := bc.op == "TN"
	if transA {
		lda = m
	}
	transB := strings.HasSuffix(bc.op, "NT")
	ldb := n
	if transB {
		ldb = k
	}
	var call func()
	switch {
	case strings.HasPrefix(bc.op, "packed"):
		var pb *PackedB
		if h == 0 {
			pb = PackB(true, n, k, bf, k)
		} else {
			pb = PackHalfB(h, true, n, k, bh, k)
		}
		call = func() { GemmPacked(false, m, 1, a, k, pb, 0, c, n) }
	case h == 0:
		call = func() { Sgemm(transA, transB, m, n, k, 1, a, lda, bf, ldb, 0, c, n) }
	default:
		call = func() { GemmHalfB(h, transA, transB, m, n, k, 1, a, lda, bh, ldb, 0, c, n) }
	}
	call() // warm up: pool workers started, buffers allocated
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		call()
	}
	b.StopTimer()
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// TestPrintBenchShapes prints the f32 benchmark shapes for the OpenBLAS harness when
// HONE_GEMM_SHAPES is set (used by scripts/bench-gemm.sh); otherwise it checks the list.
func TestPrintBenchShapes(t *testing.T) {
	seen := map[string]bool{}
	for _, bc := range benchCases() {
		if seen[bc.name()] {
			t.Fatalf("duplicate benchmark %s", bc.name())
		}
		seen[bc.name()] = true
		if bc.openblasShared && os.Getenv("HONE_GEMM_SHAPES") != "" {
			fmt.Printf("SHAPE %s %s %d %d %d\n", bc.name(), bc.op, bc.m, bc.n, bc.k)
		}
	}
}

// BenchmarkHalfConvert reports the conversion rate (Melem/s) of Half.Encode and Half.Decode
// under every implementation (the assembly ones are vectorised).
func BenchmarkHalfConvert(b *testing.B) {
	const n = 1 << 16
	src := make([]float32, n)
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	enc := make([]uint16, n)
	dec := make([]float32, n)
	defer SetImpl(Impls()[0])
	for _, name := range Impls() {
		for _, h := range []Half{BF16, F16} {
			for _, op := range []string{"encode", "decode"} {
				b.Run(fmt.Sprintf("%s/%v/%s", name, h, op), func(b *testing.B) {
					if err := SetImpl(name); err != nil {
						b.Fatal(err)
					}
					h.Encode(enc, src)
					for i := 0; i < b.N; i++ {
						if op == "encode" {
							h.Encode(enc, src)
						} else {
							h.Decode(dec, enc)
						}
					}
					b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Melem/s")
				})
			}
		}
	}
}

package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

func randBF16(rng *rand.Rand, n int) []uint16 {
	out := make([]uint16, n)
	for i := range out {
		out[i] = Float32ToBF16(float32(rng.NormFloat64()))
	}
	return out
}

// TestPairKernelsMatchGo: every implementation's bf16 pair micro-kernels (and streaming
// kernels) give the pure-Go
// kernel's sums (same pair order; the data has no subnormals), for every row count and
// depths around the unrolling: bit for bit on Intel, within a few roundings of the sum of
// |terms| anywhere (AMD's VDPBF16PS rounds its pair sums differently).
func TestPairKernelsMatchGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, name := range Impls() {
		im := implByName(t, name)
		if im.pair == nil {
			t.Logf("%s: no native pair kernels (pure Go)", name)
			continue
		}
		kerns := append(append([]pairFn(nil), im.pair...), im.pairStream...) // the streaming (decode) kernels too
		for ki, kern := range kerns {
			rows := ki + 1
			if ki >= len(im.pair) {
				rows = ki - len(im.pair) + 1
			}
			for _, kp := range []int{1, 2, 3, 4, 5, 8, 13, 128} {
				a := make([]uint32, kp*rows)
				for i := range a {
					a[i] = uint32(Float32ToBF16(float32(rng.NormFloat64()))) | uint32(Float32ToBF16(float32(rng.NormFloat64())))<<16
				}
				b := randBF16(rng, kp*panelW*2)
				ldc := panelW + 3
				c0 := make([]float32, rows*ldc)
				for i := range c0 {
					c0[i] = float32(rng.NormFloat64())
				}
				c1 := append([]float32(nil), c0...)
				// Σ|terms| per output, for the tolerance.
				mag := make([]float64, len(c0))
				for i := 0; i < rows; i++ {
					for j := 0; j < panelW; j++ {
						m := math.Abs(float64(c0[i*ldc+j]))
						for q := 0; q < kp; q++ {
							aw, bw := a[q*rows+i], uint32(b[2*(q*panelW+j)])|uint32(b[2*(q*panelW+j)+1])<<16
							m += math.Abs(float64(math.Float32frombits(aw<<16))*float64(math.Float32frombits(bw<<16))) +
								math.Abs(float64(math.Float32frombits(aw&0xffff0000))*float64(math.Float32frombits(bw&0xffff0000)))
						}
						mag[i*ldc+j] = m
					}
				}
				kern(kp, &a[0], &b[0], &c0[0], ldc)
				pairGo(rows, kp, &a[0], &b[0], &c1[0], ldc)
				for i := range c0 {
					if d := math.Abs(float64(c0[i] - c1[i])); d > float64(2*kp+2)*6e-8*mag[i] { // one rounding per pair step at most
						t.Fatalf("%s rows %d kp %d: c[%d] = %v, Go %v", name, rows, kp, i, c0[i], c1[i])
					}
				}
			}
		}
	}
}

func implByName(t *testing.T, name string) *impl {
	for _, im := range impls {
		if im.name == name {
			return im
		}
	}
	t.Fatalf("no implementation %s", name)
	return nil
}

// TestGemmPackedBF16Pairs: C = alpha·op(A)·B + beta·C with a pair-packed B equals a float64
// product of the bf16-rounded operands, on odd shapes (1×N, N×1, primes, odd depths, partial
// panels, several depth blocks), both layouts of A and B, every implementation.
func TestGemmPackedBF16Pairs(t *testing.T) {
	defer SetImpl(Impls()[0])
	rng := rand.New(rand.NewPCG(3, 9))
	shapes := [][3]int{{1, 1, 1}, {1, 33, 7}, {3, 1, 2}, {14, 32, 256}, {15, 65, 257}, {37, 100, 300}, {200, 45, 513}, {29, 97, 1031}}
	for _, name := range Impls() {
		if err := SetImpl(name); err != nil {
			t.Fatal(err)
		}
		for _, sh := range shapes {
			m, n, k := sh[0], sh[1], sh[2]
			for _, transA := range []bool{false, true} {
				for _, tb := range []int{0, 1, 2} {
					transB, beta := tb != 0, float32(1)
					if tb == 2 {
						beta = 0 // C holds NaN: it must not be read
					}
					t.Run(fmt.Sprintf("%s/%dx%dx%d/tA=%v/tB=%v/beta=%v", name, m, n, k, transA, transB, beta), func(t *testing.T) {
						lda := k + 1
						if transA {
							lda = m + 2
						}
						ldb := n + 1
						if transB {
							ldb = k + 3
						}
						rowsA, rowsB := m, k
						if transA {
							rowsA = k
						}
						if transB {
							rowsB = n
						}
						a := make([]float32, rowsA*lda)
						for i := range a {
							a[i] = float32(rng.NormFloat64())
						}
						b := randBF16(rng, rowsB*ldb)
						ldc := n + 2
						c := make([]float32, m*ldc)
						for i := range c {
							c[i] = float32(rng.NormFloat64())
							if beta == 0 {
								c[i] = float32(math.NaN())
							}
						}
						want := make([]float64, len(c))
						const alpha = 0.5
						for i := 0; i < m; i++ {
							for j := 0; j < n; j++ {
								s := 0.0
								for p := 0; p < k; p++ {
									var av float32
									if transA {
										av = a[p*lda+i]
									} else {
										av = a[i*lda+p]
									}
									var bv uint16
									if transB {
										bv = b[j*ldb+p]
									} else {
										bv = b[p*ldb+j]
									}
									s += float64(BF16ToFloat32(Float32ToBF16(alpha*av))) * float64(BF16ToFloat32(bv))
								}
								want[i*ldc+j] = s
								if beta != 0 {
									want[i*ldc+j] += float64(beta) * float64(c[i*ldc+j])
								}
							}
						}
						pb := PackBF16Pairs(transB, n, k, b, ldb)
						if pb.N() != n || pb.K() != k || pb.Half() != BF16 {
							t.Fatalf("packed %d×%d %v", pb.K(), pb.N(), pb.Half())
						}
						GemmPacked(transA, m, alpha, a, lda, pb, beta, c, ldc)
						tol := 1e-5 * math.Sqrt(float64(k)+1) * 4
						for i := 0; i < m; i++ {
							for j := 0; j < n; j++ {
								if d := math.Abs(float64(c[i*ldc+j]) - want[i*ldc+j]); d > tol*(1+math.Abs(want[i*ldc+j])) {
									t.Fatalf("c[%d][%d] = %v, want %v", i, j, c[i*ldc+j], want[i*ldc+j])
								}
							}
						}
					})
				}
			}
		}
	}
}

// BenchmarkGEMMBF16Pairs: y = x·Wᵀ with bf16 W, packed for bf16 arithmetic (PackBF16Pairs)
// against packed for f32 arithmetic (PackHalfB: W widened in registers), on the shapes of
// LoRA training (512 tokens; SmolLM2-135M and Qwen2.5-0.5B projections) and a square.
func BenchmarkGEMMBF16Pairs(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range [][3]int{{512, 1536, 576}, {512, 576, 1536}, {512, 4864, 896}, {512, 896, 4864}, {1024, 1024, 1024}} {
		m, n, k := s[0], s[1], s[2]
		x := make([]float32, m*k)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		w := randBF16(rng, n*k)
		y := make([]float32, m*n)
		for _, mode := range []string{"pairs", "f32"} {
			var pb *PackedB
			if mode == "pairs" {
				pb = PackBF16Pairs(true, n, k, w, k)
			} else {
				pb = PackHalfB(BF16, true, n, k, w, k)
			}
			b.Run(fmt.Sprintf("%s/%dx%dx%d", mode, m, n, k), func(b *testing.B) {
				start := time.Now()
				for i := 0; i < b.N; i++ {
					GemmPacked(false, m, 1, x, k, pb, 0, y, n)
				}
				b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/time.Since(start).Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestPackRowMatchesGo: the vectorised bf16 row pack rounds as roundBF16 does (to nearest,
// ties to even) on normal values, ties included.
func TestPackRowMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, name := range Impls() {
		im := implByName(t, name)
		if im.packRow == nil {
			continue
		}
		const n = 48
		src := make([]float32, 2*n)
		for i := range src {
			src[i] = float32(rng.NormFloat64() * 100)
			if i%7 == 0 { // an exact tie between two bf16 values
				src[i] = math.Float32frombits(math.Float32bits(src[i])&0xffff0000 | 0x8000)
			}
		}
		dst := make([]uint32, n)
		im.packRow(n, &src[0], &dst[0], 0.5)
		for q := range dst {
			want := uint32(roundBF16(0.5*src[2*q])) | uint32(roundBF16(0.5*src[2*q+1]))<<16
			if dst[q] != want {
				t.Fatalf("%s: pair %d = %#x, want %#x", name, q, dst[q], want)
			}
		}
	}
}

// TestLargePacksOffHeap: packs of a megabyte and more (outside the Go heap) multiply as
// small ones do, survive collections while referenced, and are given back after.
func TestLargePacksOffHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	const n, k, m = 800, 700, 5
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	wh := make([]uint16, n*k)
	for i, v := range w {
		wh[i] = Float32ToBF16(v)
		w[i] = BF16ToFloat32(wh[i])
	}
	x := make([]float32, m*k)
	for i := range x {
		x[i] = BF16ToFloat32(Float32ToBF16(float32(rng.NormFloat64())))
	}
	want := make([]float32, m*n)
	Sgemm(false, true, m, n, k, 1, x, k, w, k, 0, want, n)
	before := offHeapBytes.Load()
	packs := []*PackedB{PackB(true, n, k, w, k), PackHalfB(BF16, true, n, k, wh, k), PackBF16Pairs(true, n, k, wh, k)}
	mapped := offHeapBytes.Load() - before
	if runtime.GOOS == "linux" && mapped < int64(n*k*(4+2+2)) {
		t.Fatalf("%d bytes mapped outside the heap for %d of packs", mapped, n*k*8)
	}
	for _, pb := range packs {
		runtime.GC()
		got := make([]float32, m*n)
		GemmPacked(false, m, 1, x, k, pb, 0, got, n)
		for i := range got {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-3*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%v pack: y[%d] = %v, want %v", pb.Half(), i, got[i], want[i])
			}
		}
	}
	packs = nil
	for i := 0; i < 200 && offHeapBytes.Load() > before; i++ { // the packs are unreachable now: their cleanups unmap them
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if left := offHeapBytes.Load() - before; left > 0 {
		t.Fatalf("%d bytes still mapped after the packs were collected", left)
	}
}

// BenchmarkBF16Decode: y = x·Wᵀ with bf16 W on the SmolLM2-135M projection shapes (fused
// q/k/v 960×576, gate/up 3072×576, down 576×1536) for decode and prefill row counts, in bf16
// arithmetic (pairs) and f32 arithmetic (W widened in registers): the measurements behind
// the kernel choice (UseBF16Pairs). GB/s counts the weight bytes read once per product.
func BenchmarkBF16Decode(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 3))
	for _, s := range [][2]int{{960, 576}, {3072, 576}, {576, 1536}} {
		n, k := s[0], s[1]
		w := randBF16(rng, n*k)
		packs := map[string]*PackedB{"pairs": PackBF16Pairs(true, n, k, w, k), "f32": PackHalfB(BF16, true, n, k, w, k)}
		for _, m := range []int{1, 2, 4, 8, 16, 64, 512} {
			x := make([]float32, m*k)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			y := make([]float32, m*n)
			for _, mode := range []string{"pairs", "f32"} {
				pb := packs[mode]
				b.Run(fmt.Sprintf("%s/%dx%dx%d", mode, m, n, k), func(b *testing.B) {
					start := time.Now()
					for i := 0; i < b.N; i++ {
						GemmPacked(false, m, 1, x, k, pb, 0, y, n)
					}
					sec := time.Since(start).Seconds()
					b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/sec/1e9, "GFLOP/s")
					b.ReportMetric(2*float64(n)*float64(k)*float64(b.N)/sec/1e9, "GB/s")
				})
			}
		}
	}
}

// TestBF16PairRows: the choice is one of its documented answers and honours
// HONE_BF16_PAIRS.
func TestBF16PairRows(t *testing.T) {
	r := BF16PairRows()
	switch r {
	case 0, 1, amxPairRows:
	default:
		t.Fatalf("BF16PairRows = %d", r)
	}
	t.Logf("%s: BF16PairRows = %d", Impl(), r)
	t.Setenv("HONE_BF16_PAIRS", "off")
	if BF16PairRows() != 0 {
		t.Fatal("HONE_BF16_PAIRS=off")
	}
	t.Setenv("HONE_BF16_PAIRS", "on")
	if BF16PairRows() != 1 {
		t.Fatal("HONE_BF16_PAIRS=on")
	}
}

// TestPackAPairsPanels: packing full panels of A to bf16 pairs with the panel kernels
// (packAPairs14AVX512, packAPairs16AVX512) gives the bits of packing row by row (pairRow),
// for depths with and without a tail of pairs, odd depths, offsets into the depth, alpha,
// lda past the row, and the rows of a last partial panel.
func TestPackAPairsPanels(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, name := range Impls() {
		im := implByName(t, name)
		rowwise := *im
		rowwise.packAPairs = [tallRows + 1]func(int, *float32, int, *uint32, float32){}
		for _, mr := range []int{14, 16} {
			if im.packAPairs[mr] == nil {
				continue
			}
			for _, k := range []int{32, 33, 64, 300, 577} {
				for _, p0 := range []int{0, 2, 32} {
					if p0 >= k {
						continue
					}
					mc := 2*mr + 3
					lda := k + 5
					a := make([]float32, mc*lda)
					for i := range a {
						a[i] = float32(rng.NormFloat64())
					}
					a[7] = float32(math.Float32frombits(0x3f808000)) // a tie between two bf16 values
					p := &problem{m: mc, k: k, a: a, lda: lda, alpha: 0.75}
					kp := min(pairKC, (k-p0+1)/2)
					got, want := make([]uint32, mc*kp), make([]uint32, mc*kp)
					row := make([]uint32, kp)
					packAPairs(im, got, row, p, 1, mc-1, p0, kp, mr)
					packAPairs(&rowwise, want, row, p, 1, mc-1, p0, kp, mr)
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("%s mr %d k %d p0 %d: word %d = %#x, row by row %#x", name, mr, k, p0, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

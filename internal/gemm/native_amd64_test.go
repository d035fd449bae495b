//go:build amd64 && !purego

package gemm

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestStreamPrefetchKernelsMatch: the decode kernels that prefetch their weights
// (avx512StreamPF, avx512PairStreamPF) give the same sums, bit for bit, as those that do
// not (the same instructions in the same order besides PREFETCHT0), for every element kind,
// row count and depths around the unrolling and past the prefetch distance. The kernels
// without prefetch are checked against the pure-Go ones by the other tests; whichever set
// decodePrefetch picks on the CPU at hand, the other is covered here.
func TestStreamPrefetchKernelsMatch(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for kind := range 3 {
		esz := elemKind(kind).size()
		for r := range streamMR {
			rows := r + 1
			for _, kc := range []int{1, 3, 4, 5, 17, 64, 129, 300} {
				a := make([]float32, kc*rows)
				for i := range a {
					a[i] = float32(rng.NormFloat64())
				}
				b := make([]byte, kc*panelW*int(esz)+4096)
				for i := 0; i < kc*panelW; i++ {
					switch kind {
					case int(kindF32):
						*(*float32)(unsafe.Pointer(&b[4*i])) = float32(rng.NormFloat64())
					case int(kindBF16):
						*(*uint16)(unsafe.Pointer(&b[2*i])) = Float32ToBF16(float32(rng.NormFloat64()))
					default:
						*(*uint16)(unsafe.Pointer(&b[2*i])) = Float32ToF16(float32(rng.NormFloat64()))
					}
				}
				c0 := make([]float32, rows*(panelW+1))
				for i := range c0 {
					c0[i] = float32(rng.NormFloat64())
				}
				c1 := append([]float32(nil), c0...)
				avx512Stream[kind][r](kc, &a[0], unsafe.Pointer(&b[0]), panelW, &c0[0], panelW+1)
				avx512StreamPF[kind][r](kc, &a[0], unsafe.Pointer(&b[0]), panelW, &c1[0], panelW+1)
				for i := range c0 {
					if c0[i] != c1[i] {
						t.Fatalf("kind %d rows %d kc %d: c[%d] = %v with prefetch, %v without", kind, rows, kc, i, c1[i], c0[i])
					}
				}
			}
		}
	}
	if !implHasPairs() {
		t.Log("no AVX512_BF16: pair kernels not run")
		return
	}
	for r := range streamMR {
		rows := r + 1
		for _, kp := range []int{1, 2, 3, 4, 5, 13, 128, 300} {
			a := make([]uint32, kp*rows)
			for i := range a {
				a[i] = uint32(Float32ToBF16(float32(rng.NormFloat64()))) | uint32(Float32ToBF16(float32(rng.NormFloat64())))<<16
			}
			b := make([]uint16, kp*panelW*2+2048)
			copy(b, randBF16(rng, kp*panelW*2))
			c0 := make([]float32, rows*(panelW+3))
			for i := range c0 {
				c0[i] = float32(rng.NormFloat64())
			}
			c1 := append([]float32(nil), c0...)
			avx512PairStream[r](kp, &a[0], &b[0], &c0[0], panelW+3)
			avx512PairStreamPF[r](kp, &a[0], &b[0], &c1[0], panelW+3)
			for i := range c0 {
				if c0[i] != c1[i] {
					t.Fatalf("pairs rows %d kp %d: c[%d] = %v with prefetch, %v without", rows, kp, i, c1[i], c0[i])
				}
			}
		}
	}
}

func implHasPairs() bool {
	for _, im := range impls {
		if im.pair != nil {
			return true
		}
	}
	return false
}

// TestDecodePrefetchLive: decode's f32 products run under a fresh tuner, which settles after
// its warm-up and pairs exactly (the first product made the warm-up one longer); every
// product, in either mode, gives the same result bit for bit.
func TestDecodePrefetchLive(t *testing.T) {
	if !hasAVX512 || current.Load().streamPF == nil {
		t.Skip("no prefetching decode kernels here")
	}
	t.Logf("CPU vendor %q: prior %v", vendor(), decodePrior)
	t.Setenv("HONE_DECODE_PREFETCH", "")
	defer func(old *PrefetchTuner) { decodeTuners[0][kindF32] = old }(decodeTuners[0][kindF32])
	tuner := NewPrefetchTuner("f32 (test)", decodePrior)
	decodeTuners[0][kindF32] = tuner
	rng := rand.New(rand.NewPCG(13, 14))
	n, k := 512, 160 // 320 KiB of weights
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	pb := PackB(true, n, k, w, k)
	x := make([]float32, k)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	want := make([]float32, n)
	GemmPacked(false, 1, 1, x, k, pb, 0, want, n)
	got := make([]float32, n)
	// One round at least (its warm-up and pairs), tuneRounds at most.
	for it := 0; ; it++ {
		_, settled, _ := tuner.Choice()
		if settled && it < tuneWarm+2*tunePairs-1 {
			t.Fatalf("settled after %d products, before its pairs", it)
		}
		if settled {
			break
		}
		if it > tuneWarm+2*tunePairs*tuneRounds {
			t.Fatalf("not settled after %d products", it)
		}
		GemmPacked(false, 1, 1, x, k, pb, 0, got, n)
		for j := range got {
			if got[j] != want[j] {
				t.Fatalf("product %d: y[%d] = %v, first product %v", it, j, got[j], want[j])
			}
		}
	}
	pf, settled, ratio := tuner.Choice()
	if !settled || ratio <= 0 {
		t.Fatalf("settled %v, ratio %v", settled, ratio)
	}
	t.Logf("f32 decode products in L2: prefetch %v, time with ÷ without %.3f", pf, ratio)
}

// tallGo is the pure-Go reference of the tall kernels (microFn over 16 columns): C[rows×16] +=
// Ap·B, each element one chain of fused multiply-adds in depth order from C, as VFMADD231PS
// rounds (B widened exactly from its kind).
func tallGo(kind elemKind, rows, kc int, a []float32, b unsafe.Pointer, ldb int, c []float32, ldc int) {
	for i := 0; i < rows; i++ {
		for j := 0; j < 16; j++ {
			acc := c[i*ldc+j]
			for p := 0; p < kc; p++ {
				off := uintptr(p*ldb + j)
				var w float32
				switch kind {
				case kindF32:
					w = *(*float32)(unsafe.Add(b, off*4))
				case kindBF16:
					w = BF16ToFloat32(*(*uint16)(unsafe.Add(b, off*2)))
				default:
					w = F16ToFloat32(*(*uint16)(unsafe.Add(b, off*2)))
				}
				acc = float32(math.FMA(float64(a[p*rows+i]), float64(w), float64(acc)))
			}
			c[i*ldc+j] = acc
		}
	}
}

// TestTallKernelsMatchGo: the tall kernels of batched decode (avx512Tall, and avx512TallPF,
// which prefetch B) give the pure-Go reference's sums bit for bit (one fused chain per
// element in depth order from C), for every element kind, row count 1..16 and depths around
// the unrolling and past the prefetch distance; the tall pair kernels (avx512PairTall and
// avx512PairTallPF) give pairGoCols's within the pair kernels' tolerance
// (TestPairKernelsMatchGo), the prefetching ones the same bits as those that do not.
func TestTallKernelsMatchGo(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for kind := range 3 {
		esz := int(elemKind(kind).size())
		for r := range tallMR {
			rows := r + 1
			for _, kc := range []int{1, 3, 4, 5, 17, 64, 129, 300} {
				a := make([]float32, kc*rows)
				for i := range a {
					a[i] = float32(rng.NormFloat64())
				}
				b := make([]byte, kc*panelW*esz+16384)
				for i := 0; i < kc*panelW; i++ {
					switch kind {
					case int(kindF32):
						*(*float32)(unsafe.Pointer(&b[4*i])) = float32(rng.NormFloat64())
					case int(kindBF16):
						*(*uint16)(unsafe.Pointer(&b[2*i])) = Float32ToBF16(float32(rng.NormFloat64()))
					default:
						*(*uint16)(unsafe.Pointer(&b[2*i])) = Float32ToF16(float32(rng.NormFloat64()))
					}
				}
				const ldc = 16 + 5
				want := make([]float32, rows*ldc)
				for i := range want {
					want[i] = float32(rng.NormFloat64())
				}
				got, gotPF := append([]float32(nil), want...), append([]float32(nil), want...)
				// The second half of the panel, as runPacked calls them.
				bh := unsafe.Pointer(&b[16*esz])
				tallGo(elemKind(kind), rows, kc, a, bh, panelW, want, ldc)
				avx512Tall[kind][r](kc, &a[0], bh, panelW, &got[0], ldc)
				avx512TallPF[kind][r](kc, &a[0], bh, panelW, &gotPF[0], ldc)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(gotPF[i]) != math.Float32bits(want[i]) {
						t.Fatalf("kind %d rows %d kc %d: c[%d] = %v (prefetching %v), Go %v", kind, rows, kc, i, got[i], gotPF[i], want[i])
					}
				}
			}
		}
	}
	if !implHasPairs() {
		t.Log("no AVX512_BF16: pair kernels not run")
		return
	}
	for r := range tallMR {
		rows := r + 1
		for _, kp := range []int{1, 2, 3, 4, 5, 13, 128, 300} {
			a := make([]uint32, kp*rows)
			for i := range a {
				a[i] = uint32(Float32ToBF16(float32(rng.NormFloat64()))) | uint32(Float32ToBF16(float32(rng.NormFloat64())))<<16
			}
			b := make([]uint16, kp*panelW*2+16384)
			copy(b, randBF16(rng, kp*panelW*2))
			const ldc = 16 + 3
			want := make([]float32, rows*ldc)
			for i := range want {
				want[i] = float32(rng.NormFloat64())
			}
			got, gotPF := append([]float32(nil), want...), append([]float32(nil), want...)
			// Σ|terms| per output, for the tolerance.
			mag := make([]float64, len(want))
			for i := 0; i < rows; i++ {
				for j := 0; j < 16; j++ {
					m := math.Abs(float64(want[i*ldc+j]))
					for q := 0; q < kp; q++ {
						w := 2 * (q*panelW + 16 + j)
						aw, bw := a[q*rows+i], uint32(b[w])|uint32(b[w+1])<<16
						m += math.Abs(float64(math.Float32frombits(aw<<16))*float64(math.Float32frombits(bw<<16))) +
							math.Abs(float64(math.Float32frombits(aw&0xffff0000))*float64(math.Float32frombits(bw&0xffff0000)))
					}
					mag[i*ldc+j] = m
				}
			}
			bh := &b[2*16] // the second half of the panel
			pairGoCols(rows, 16, kp, &a[0], bh, &want[0], ldc)
			avx512PairTall[r](kp, &a[0], bh, &got[0], ldc)
			avx512PairTallPF[r](kp, &a[0], bh, &gotPF[0], ldc)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(gotPF[i]) {
					t.Fatalf("pairs rows %d kp %d: c[%d] = %v with prefetch, %v without", rows, kp, i, gotPF[i], got[i])
				}
				if d := math.Abs(float64(got[i] - want[i])); d > float64(2*kp+2)*6e-8*mag[i] {
					t.Fatalf("pairs rows %d kp %d: c[%d] = %v, Go %v", rows, kp, i, got[i], want[i])
				}
			}
		}
	}
}

//go:build amd64 && !purego

package gemm

import (
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

// TestDecodePrefetchChoice: the vendor rule and its override; logs this CPU's choice.
func TestDecodePrefetchChoice(t *testing.T) {
	t.Logf("CPU vendor %q: decode prefetch %v", vendor(), decodePrefetch(vendor()))
	t.Setenv("HONE_DECODE_PREFETCH", "")
	if !decodePrefetch("GenuineIntel") || decodePrefetch("AuthenticAMD") {
		t.Fatal("by vendor: Intel prefetches, AMD does not")
	}
	t.Setenv("HONE_DECODE_PREFETCH", "off")
	if decodePrefetch("GenuineIntel") {
		t.Fatal("HONE_DECODE_PREFETCH=off ignored")
	}
	t.Setenv("HONE_DECODE_PREFETCH", "on")
	if !decodePrefetch("AuthenticAMD") {
		t.Fatal("HONE_DECODE_PREFETCH=on ignored")
	}
}

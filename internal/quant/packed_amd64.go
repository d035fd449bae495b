//go:build amd64 && !purego

package quant

import (
	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
)

func init() {
	if asmVNNI {
		packedKernel, packedKernelPF, packedKernelsInUse = packed16AVX512, packed16AVX512PF, true
		for _, t := range []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q4_K, gguf.Q6_K} { // packable's
			x1Tuners[t] = gemm.NewPrefetchTuner(t.String(), gemm.DecodePrefetchPrior())
		}
	}
}

// packed16AVX512 is packed16Go by the assembly kernels, behind a check of the slices'
// lengths (the assembly reads len(d)/n blocks without bounds checks).
func packed16AVX512(t gguf.TensorType, w []byte, q []int8, d, s []float32, n int, out []float32) {
	packed16Asm(t, w, q, d, s, n, out, false)
}

// packed16AVX512PF is packed16AVX512 whose one-row kernels prefetch the weights in software.
func packed16AVX512PF(t gguf.TensorType, w []byte, q []int8, d, s []float32, n int, out []float32) {
	packed16Asm(t, w, q, d, s, n, out, true)
}

func packed16Asm(t gguf.TensorType, w []byte, q []int8, d, s []float32, n int, out []float32, prefetchX1 bool) {
	nb, ns := len(d)/n, len(d)
	if t == gguf.Q6_K {
		ns *= 2 // sums per 16
	}
	if len(d) != n*nb || len(w) < packedBlockBytes(t)*nb || len(q) < 32*n*nb || len(s) < ns || len(out) < packRows*n || n != 1 && n != 4 {
		panic("quant: packed kernel: weights, activations or out shorter than len(d)/n blocks")
	}
	switch {
	case t == gguf.Q8_0 && n == 4:
		packed16Q8_0x4AVX512(w, q, d, s, (*[64]float32)(out))
	case t == gguf.Q8_0 && prefetchX1:
		packed16Q8_0x1PFAVX512(w, q, d, s, (*[16]float32)(out))
	case t == gguf.Q8_0:
		packed16Q8_0x1AVX512(w, q, d, s, (*[16]float32)(out))
	case t == gguf.Q5_0 && n == 4:
		packed16Q5_0x4AVX512(w, q, d, s, (*[64]float32)(out))
	case t == gguf.Q5_0 && prefetchX1:
		packed16Q5_0x1PFAVX512(w, q, d, s, (*[16]float32)(out))
	case t == gguf.Q5_0:
		packed16Q5_0x1AVX512(w, q, d, s, (*[16]float32)(out))
	case t == gguf.Q4_K && n == 4:
		packed16Q4_Kx4AVX512(w, q, d, s, (*[64]float32)(out))
	case t == gguf.Q4_K && prefetchX1:
		packed16Q4_Kx1PFAVX512(w, q, d, s, (*[16]float32)(out))
	case t == gguf.Q4_K:
		packed16Q4_Kx1AVX512(w, q, d, s, (*[16]float32)(out))
	case t == gguf.Q4_0 && n == 4:
		packed16Q4_0x4AVX512(w, q, d, s, (*[64]float32)(out))
	case t == gguf.Q4_0 && prefetchX1:
		packed16Q4_0x1PFAVX512(w, q, d, s, (*[16]float32)(out))
	case t == gguf.Q4_0:
		packed16Q4_0x1AVX512(w, q, d, s, (*[16]float32)(out))
	case t == gguf.Q4_1 && n == 4:
		packed16Q4_1x4AVX512(w, q, d, s, (*[64]float32)(out))
	case t == gguf.Q4_1 && prefetchX1:
		packed16Q4_1x1PFAVX512(w, q, d, s, (*[16]float32)(out))
	case t == gguf.Q4_1:
		packed16Q4_1x1AVX512(w, q, d, s, (*[16]float32)(out))
	case t == gguf.Q6_K && n == 4:
		packed16Q6_Kx4AVX512(w, q, d, s, (*[64]float32)(out))
	case t == gguf.Q6_K && prefetchX1:
		packed16Q6_Kx1PFAVX512(w, q, d, s, (*[16]float32)(out))
	case t == gguf.Q6_K:
		packed16Q6_Kx1AVX512(w, q, d, s, (*[16]float32)(out))
	default:
		panic("quant: packed kernel of type " + t.String())
	}
}

//go:noescape
func packed16Q8_0x4AVX512(w []byte, q []int8, d, s []float32, out *[64]float32)

//go:noescape
func packed16Q8_0x1AVX512(w []byte, q []int8, d, s []float32, out *[16]float32)

//go:noescape
func packed16Q5_0x4AVX512(w []byte, q []int8, d, s []float32, out *[64]float32)

//go:noescape
func packed16Q5_0x1AVX512(w []byte, q []int8, d, s []float32, out *[16]float32)

//go:noescape
func packed16Q4_Kx4AVX512(w []byte, q []int8, d, s []float32, out *[64]float32)

//go:noescape
func packed16Q4_Kx1AVX512(w []byte, q []int8, d, s []float32, out *[16]float32)

//go:noescape
func packed16Q6_Kx4AVX512(w []byte, q []int8, d, s []float32, out *[64]float32)

//go:noescape
func packed16Q6_Kx1AVX512(w []byte, q []int8, d, s []float32, out *[16]float32)

//go:noescape
func packed16Q4_0x4AVX512(w []byte, q []int8, d, s []float32, out *[64]float32)

//go:noescape
func packed16Q4_0x1AVX512(w []byte, q []int8, d, s []float32, out *[16]float32)

//go:noescape
func packed16Q4_1x4AVX512(w []byte, q []int8, d, s []float32, out *[64]float32)

//go:noescape
func packed16Q4_1x1AVX512(w []byte, q []int8, d, s []float32, out *[16]float32)

//go:noescape
func packed16Q8_0x1PFAVX512(w []byte, q []int8, d, s []float32, out *[16]float32)

//go:noescape
func packed16Q5_0x1PFAVX512(w []byte, q []int8, d, s []float32, out *[16]float32)

//go:noescape
func packed16Q4_Kx1PFAVX512(w []byte, q []int8, d, s []float32, out *[16]float32)

//go:noescape
func packed16Q4_0x1PFAVX512(w []byte, q []int8, d, s []float32, out *[16]float32)

//go:noescape
func packed16Q4_1x1PFAVX512(w []byte, q []int8, d, s []float32, out *[16]float32)

//go:noescape
func packed16Q6_Kx1PFAVX512(w []byte, q []int8, d, s []float32, out *[16]float32)

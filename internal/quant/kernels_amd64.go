//go:build amd64 && !purego

package quant

import "golang.org/x/sys/cpu"

// asmVNNI and asmAVX2 report whether the CPU (and OS) support the assembly kernels'
// instruction sets: AVX-512 F, BW, VL with VNNI (VPDPBUSD), and AVX2 with FMA and F16C.
// Both use VCVTPH2PS (F16C) for the float16 scales.
var (
	asmAVX2 = cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
	asmVNNI = asmAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
		cpu.X86.HasAVX512VNNI
)

func init() {
	switch {
	case asmVNNI:
		dotQ8_0, dotQ4_0, dotQ4_1 = dotQ8_0AVX512, dotQ4_0AVX512, dotQ4_1AVX512
		dotQ5_0, dotQ5_1 = dotQ5_0AVX512, dotQ5_1AVX512
		dotQ4_K, dotQ5_K, dotQ6_K = dotQ4_KAVX512, dotQ5_KAVX512, dotQ6_KAVX512
	case asmAVX2:
		dotQ8_0, dotQ4_0, dotQ4_1 = dotQ8_0AVX2, dotQ4_0AVX2, dotQ4_1AVX2
		dotQ5_0, dotQ5_1 = dotQ5_0AVX2, dotQ5_1AVX2
		dotQ4_K, dotQ5_K, dotQ6_K = dotQ4_KAVX2, dotQ5_KAVX2, dotQ6_KAVX2
	}
}

// The AVX-512 VNNI kernels (kernels_amd64.s), with the signatures of the Go ones.

//go:noescape
func dotQ8_0AVX512(w []byte, q []int8, d []float32) float32

//go:noescape
func dotQ4_0AVX512(w []byte, q []int8, d []float32) float32

//go:noescape
func dotQ4_1AVX512(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dotQ5_0AVX512(w []byte, q []int8, d []float32) float32

//go:noescape
func dotQ5_1AVX512(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dotQ4_KAVX512(w []byte, q []int8, d []float32, bsums []int16) float32

//go:noescape
func dotQ5_KAVX512(w []byte, q []int8, d []float32, bsums []int16) float32

//go:noescape
func dotQ6_KAVX512(w []byte, q []int8, d []float32, bsums []int16) float32

// The AVX2 kernels (kernels_amd64.s), for CPUs without AVX-512 VNNI.

//go:noescape
func dotQ8_0AVX2(w []byte, q []int8, d []float32) float32

//go:noescape
func dotQ4_0AVX2(w []byte, q []int8, d []float32) float32

//go:noescape
func dotQ4_1AVX2(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dotQ5_0AVX2(w []byte, q []int8, d []float32) float32

//go:noescape
func dotQ5_1AVX2(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dotQ4_KAVX2(w []byte, q []int8, d []float32, bsums []int16) float32

//go:noescape
func dotQ5_KAVX2(w []byte, q []int8, d []float32, bsums []int16) float32

//go:noescape
func dotQ6_KAVX2(w []byte, q []int8, d []float32, bsums []int16) float32

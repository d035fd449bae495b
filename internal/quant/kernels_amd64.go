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
		setAsmKernels(dotQ8_0AVX512, dotQ4_0AVX512, dotQ5_0AVX512, dotQ4_1AVX512, dotQ5_1AVX512,
			dotQ4_KAVX512, dotQ5_KAVX512, dotQ6_KAVX512)
		setAsmKernels4(dot4Q8_0AVX512, dot4Q4_0AVX512, dot4Q4_1AVX512, dot4Q5_0AVX512, dot4Q5_1AVX512)
		setAsmKernels1(dot1Q8_0AVX512, dot1Q4_0AVX512, dot1Q4_1AVX512, dot1Q5_0AVX512, dot1Q5_1AVX512)
		quantizeActs32 = quantizeActs32Checked
		dot4Q4_K, dot4Q6_K = checked4K(dot4Q4_KAVX512, 144), checked4K(dot4Q6_KAVX512, 210)
		dot1Q4_K, dot1Q6_K = checkedK(dot1Q4_KAVX512, 144), checkedK(dot1Q6_KAVX512, 210)
		row1Q4_K, row1Q6_K = dot1Q4_KAVX512, dot1Q6_KAVX512
	case asmAVX2:
		setAsmKernels(dotQ8_0AVX2, dotQ4_0AVX2, dotQ5_0AVX2, dotQ4_1AVX2, dotQ5_1AVX2,
			dotQ4_KAVX2, dotQ5_KAVX2, dotQ6_KAVX2)
		setAsmKernels4(dot4Q8_0AVX2, dot4Q4_0AVX2, dot4Q4_1AVX2, dot4Q5_0AVX2, dot4Q5_1AVX2)
		setAsmKernels1(dot1Q8_0AVX2, dot1Q4_0AVX2, dot1Q4_1AVX2, dot1Q5_0AVX2, dot1Q5_1AVX2)
	}
}

// setAsmKernels installs assembly kernels behind a check of the slices' lengths (the
// assembly reads len(d) blocks without bounds checks).
func setAsmKernels(q80, q40, q50 kern32, q41, q51 kern32s, q4k, q5k, q6k kernK) {
	dotQ8_0, dotQ4_0, dotQ5_0 = checked32(q80, 34), checked32(q40, 18), checked32(q50, 22)
	dotQ4_1, dotQ5_1 = checked32s(q41, 20), checked32s(q51, 24)
	dotQ4_K, dotQ5_K, dotQ6_K = checkedK(q4k, 144), checkedK(q5k, 176), checkedK(q6k, 210)
	rowQ8_0, rowQ4_0, rowQ4_1, rowQ5_0, rowQ5_1 = q80, q40, q41, q50, q51
	rowQ4_K, rowQ5_K, rowQ6_K = q4k, q5k, q6k
	asmKernelsInUse = true
}

// setAsmKernels4 installs multi-row assembly kernels behind a check of the slices' lengths.
func setAsmKernels4(q80, q40, q41, q50, q51 kern4) {
	dot4Q8_0, dot4Q4_0, dot4Q4_1 = checked4(q80, 34), checked4(q40, 18), checked4(q41, 20)
	dot4Q5_0, dot4Q5_1 = checked4(q50, 22), checked4(q51, 24)
}

// setAsmKernels1 installs the single-row versions of the multi-row assembly kernels: behind
// a check of the slices' lengths (dot1Xxx), and as they are for MatMulT (row1Xxx).
func setAsmKernels1(q80, q40, q41, q50, q51 kern1) {
	dot1Q8_0, dot1Q4_0, dot1Q4_1 = checked32s(q80, 34), checked32s(q40, 18), checked32s(q41, 20)
	dot1Q5_0, dot1Q5_1 = checked32s(q50, 22), checked32s(q51, 24)
	row1Q8_0, row1Q4_0, row1Q4_1, row1Q5_0, row1Q5_1 = q80, q40, q41, q50, q51
}

func checked4(f kern4, size int) kern4 {
	return func(w []byte, q []int8, d, s []float32, out *[4]float32) {
		nb := len(d) / 4
		if len(d) != 4*nb || len(w) < size*nb || len(q) < 4*32*nb || len(s) < 4*nb {
			panic("quant: multi-row kernel: weights or activations shorter than len(d)/4 blocks")
		}
		f(w, q, d, s, out)
	}
}

func checked4K(f kern4K, size int) kern4K {
	return func(w []byte, q []int8, d []float32, bsums []int16, out *[4]float32) {
		nb := len(d) / 4
		if len(d) != 4*nb || len(w) < size*nb || len(q) < 4*256*nb || len(bsums) < 4*16*nb {
			panic("quant: multi-row kernel: weights or activations shorter than len(d)/4 super-blocks")
		}
		f(w, q, d, bsums, out)
	}
}

func checked32(f kern32, size int) kern32 {
	return func(w []byte, q []int8, d []float32) float32 {
		if len(w) < size*len(d) || len(q) < 32*len(d) {
			panic("quant: row kernel: weights or activations shorter than len(d) blocks")
		}
		return f(w, q, d)
	}
}

func checked32s(f kern32s, size int) kern32s {
	return func(w []byte, q []int8, d, s []float32) float32 {
		if len(w) < size*len(d) || len(q) < 32*len(d) || len(s) < len(d) {
			panic("quant: row kernel: weights or activations shorter than len(d) blocks")
		}
		return f(w, q, d, s)
	}
}

func checkedK(f kernK, size int) kernK {
	return func(w []byte, q []int8, d []float32, bsums []int16) float32 {
		if len(w) < size*len(d) || len(q) < 256*len(d) || len(bsums) < 16*len(d) {
			panic("quant: row kernel: weights or activations shorter than len(d) blocks")
		}
		return f(w, q, d, bsums)
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

// The AVX-512 VNNI multi-row kernels (kernels_amd64.s), with the signatures of the Go ones.

//go:noescape
func dot4Q8_0AVX512(w []byte, q []int8, d, s []float32, out *[4]float32)

//go:noescape
func dot4Q4_0AVX512(w []byte, q []int8, d, s []float32, out *[4]float32)

//go:noescape
func dot4Q4_1AVX512(w []byte, q []int8, d, s []float32, out *[4]float32)

//go:noescape
func dot4Q5_0AVX512(w []byte, q []int8, d, s []float32, out *[4]float32)

//go:noescape
func dot4Q5_1AVX512(w []byte, q []int8, d, s []float32, out *[4]float32)

// The AVX2 multi-row kernels (kernels_amd64.s).

//go:noescape
func dot4Q8_0AVX2(w []byte, q []int8, d, s []float32, out *[4]float32)

//go:noescape
func dot4Q4_0AVX2(w []byte, q []int8, d, s []float32, out *[4]float32)

//go:noescape
func dot4Q4_1AVX2(w []byte, q []int8, d, s []float32, out *[4]float32)

//go:noescape
func dot4Q5_0AVX2(w []byte, q []int8, d, s []float32, out *[4]float32)

//go:noescape
func dot4Q5_1AVX2(w []byte, q []int8, d, s []float32, out *[4]float32)

// quantizeActs32Checked is quantizeActs32AVX512 behind a check of the slices' lengths.
func quantizeActs32Checked(q []int8, d, s []float32, x []float32) {
	if len(q) < 32*len(d) || len(s) < len(d) || len(x) < 32*len(d) {
		panic("quant: quantizeActs32: slices shorter than len(d) blocks")
	}
	quantizeActs32AVX512(q, d, s, x)
}

// quantizeActs32AVX512 is quantizeActs32Go in AVX-512 (the same values: VCVTPS2DQ rounds
// ties to even as math.RoundToEven does).
//
//go:noescape
func quantizeActs32AVX512(q []int8, d, s []float32, x []float32)

//go:noescape
func dot4Q4_KAVX512(w []byte, q []int8, d []float32, bsums []int16, out *[4]float32)

//go:noescape
func dot4Q6_KAVX512(w []byte, q []int8, d []float32, bsums []int16, out *[4]float32)

// The single-row versions of the multi-row kernels (kernels_amd64.s): the same operations,
// in the same order, as one row of dot4XxxAVX512, dot4XxxAVX2, dot4Q4_KAVX512 and
// dot4Q6_KAVX512.

//go:noescape
func dot1Q8_0AVX512(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dot1Q4_0AVX512(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dot1Q4_1AVX512(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dot1Q5_0AVX512(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dot1Q5_1AVX512(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dot1Q8_0AVX2(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dot1Q4_0AVX2(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dot1Q4_1AVX2(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dot1Q5_0AVX2(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dot1Q5_1AVX2(w []byte, q []int8, d, s []float32) float32

//go:noescape
func dot1Q4_KAVX512(w []byte, q []int8, d []float32, bsums []int16) float32

//go:noescape
func dot1Q6_KAVX512(w []byte, q []int8, d []float32, bsums []int16) float32

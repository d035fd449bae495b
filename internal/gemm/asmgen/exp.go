package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// expAffineAVX512 generates, for package kernels,
//
//	func expAffineAVX512(n int, dst, src *float32, a, b float32) float32
//
// dst[i] = e^(a·src[i]+b) for i < n (n a multiple of 16) and the sum of the results: the
// algorithm of kernels.Exp (x = n·ln2 + r, ln2 in two parts, a degree-6 polynomial for e^r)
// sixteen lanes at a time, with 2^n applied by VSCALEFPS (which also gives the subnormal
// results, 0 below about -103.3 and +Inf above 88.72) and x clamped to [-104, 89] first.
func expAffineAVX512(name string) {
	TEXT(name, NOSPLIT, "func(n int, dst, src *float32, a, b float32) float32")
	declare(name, "(n int, dst, src *float32, a, b float32) float32", "")
	n := Load(Param("n"), RCX)
	dst := Load(Param("dst"), RDI)
	src := Load(Param("src"), RSI)
	VBROADCASTSS(Load(Param("a"), X0), Z20)
	VBROADCASTSS(Load(Param("b"), X1), Z21)
	// Constants: the clamp bounds, log2(e), ln2 in two parts, the Horner coefficients.
	consts := []float32{-104, 89, 1.44269504088896341, 0.693359375, -2.12194440e-4,
		1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1}
	regs := []VecPhysical{Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31, Z18}
	for i, c := range consts {
		g := GLOBL(fmt.Sprintf("%s_c%d", name, i), RODATA|NOPTR)
		DATA(0, U32(math.Float32bits(c))) // the bit pattern: the assembler reads float literals as float64
		VBROADCASTSS(g, regs[i])
	}
	r := expRegs{a: Z20, b: Z21, lo: regs[0], hi: regs[1], log2e: regs[2], ln2hi: regs[3], ln2lo: regs[4],
		first: regs[5], rest: []VecPhysical{regs[6], regs[7], regs[8], regs[9], regs[10], regs[10]}}
	VPXORD(Z19, Z19, Z19) // the sum
	x, t, p := Z3, Z4, Z5
	loop16(name, n, func() {
		VMOVUPS(Mem{Base: src}, x)
		expLanes(r, x, t, p)
		VMOVUPS(p, Mem{Base: dst})
		VADDPS(p, Z19, Z19)
		ADDQ(U32(64), src)
		ADDQ(U32(64), dst)
	})
	returnSum(Z19)
	VZEROUPPER()
	RET()
}

// maxAVX512 generates func maxAVX512(n int, x *float32) float32: the largest of x[:n] (n a
// positive multiple of 16; NaNs are not looked for).
func maxAVX512(name string) {
	TEXT(name, NOSPLIT, "func(n int, x *float32) float32")
	declare(name, "(n int, x *float32) float32", "")
	n := Load(Param("n"), RCX)
	x := Load(Param("x"), RSI)
	VMOVUPS(Mem{Base: x}, Z0)
	ADDQ(U32(64), x)
	SHRQ(U8(4), n)
	DECQ(n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	VMAXPS(Mem{Base: x}, Z0, Z0)
	ADDQ(U32(64), x)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VEXTRACTF64X4(U8(1), Z0, Y1)
	VMAXPS(Y1, Y0, Y0)
	VEXTRACTF128(U8(1), Y0, X1)
	VMAXPS(X1, X0, X0)
	VPERMILPS(U8(0b01001110), X0, X1)
	VMAXPS(X1, X0, X0)
	VPERMILPS(U8(0b10110001), X0, X1)
	VMAXPS(X1, X0, X0)
	Store(X0, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// scaleAVX512 generates func scaleAVX512(n int, x *float32, s float32): x[i] *= s for
// i < n (n a multiple of 16).
func scaleAVX512(name string) {
	TEXT(name, NOSPLIT, "func(n int, x *float32, s float32)")
	declare(name, "(n int, x *float32, s float32)", "")
	n := Load(Param("n"), RCX)
	x := Load(Param("x"), RSI)
	VBROADCASTSS(Load(Param("s"), X1), Z1)
	loop16(name, n, func() {
		VMULPS(Mem{Base: x}, Z1, Z0)
		VMOVUPS(Z0, Mem{Base: x})
		ADDQ(U32(64), x)
	})
	VZEROUPPER()
	RET()
}

// returnSum stores the sum of z's sixteen float32 lanes as the function's first result
// (halves added, then quarters, then pairs; clobbers Y0 and Y1).
func returnSum(z VecPhysical) {
	VEXTRACTF64X4(U8(1), z, Y1)
	VADDPS(Y1, z.AsY(), Y0)
	VEXTRACTF128(U8(1), Y0, X1)
	VADDPS(X1, X0, X0)
	VHADDPS(X0, X0, X0)
	VHADDPS(X0, X0, X0)
	Store(X0, ReturnIndex(0))
}

// returnSum4 returns the sum of the four accumulators Z0–Z3 ((Z0+Z1) + (Z2+Z3), then
// returnSum) and ends the function.
func returnSum4() {
	VADDPS(Z1, Z0, Z0)
	VADDPS(Z3, Z2, Z2)
	VADDPS(Z2, Z0, Z0)
	returnSum(Z0)
	VZEROUPPER()
	RET()
}

// loop16 emits a loop over the n/16 blocks of 16 floats (n in a register, clobbered),
// running body, which advances the pointers, once per block.
func loop16(name string, n Register, body func()) {
	SHRQ(U8(4), n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	body()
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
}

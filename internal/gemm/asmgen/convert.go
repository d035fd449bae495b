package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// convertAVX512 generates the vectorised half ↔ f32 conversions (n a multiple of 16).
func convertAVX512() {
	for kind := 1; kind <= 2; kind++ {
		name := "decode" + kindNames[kind] + "AVX512"
		TEXT(name, NOSPLIT, "func(dst *float32, src *uint16, n int)")
		declare(name, "(dst *float32, src *uint16, n int)", "")
		dst := Load(Param("dst"), RDI)
		src := Load(Param("src"), RSI)
		n := Load(Param("n"), RCX)
		SHRQ(U8(4), n)
		JZ(LabelRef(name + "_done"))
		Label(name + "_loop")
		loadB(kind, Mem{Base: src}, Z0, true)
		VMOVUPS(Z0, Mem{Base: dst})
		ADDQ(U8(32), src)
		ADDQ(U8(64), dst)
		DECQ(n)
		JNZ(LabelRef(name + "_loop"))
		Label(name + "_done")
		VZEROUPPER()
		RET()
	}

	name := "encodeF16AVX512"
	TEXT(name, NOSPLIT, "func(dst *uint16, src *float32, n int)")
	declare(name, "(dst *uint16, src *float32, n int)", "")
	{
		dst := Load(Param("dst"), RDI)
		src := Load(Param("src"), RSI)
		n := Load(Param("n"), RCX)
		SHRQ(U8(4), n)
		JZ(LabelRef(name + "_done"))
		Label(name + "_loop")
		VMOVUPS(Mem{Base: src}, Z0)
		VCVTPS2PH(U8(0), Z0, Mem{Base: dst}) // imm 0: round to nearest even
		ADDQ(U8(64), src)
		ADDQ(U8(32), dst)
		DECQ(n)
		JNZ(LabelRef(name + "_loop"))
		Label(name + "_done")
		VZEROUPPER()
		RET()
	}

	name = "encodeBF16AVX512"
	TEXT(name, NOSPLIT, "func(dst *uint16, src *float32, n int)")
	declare(name, "(dst *uint16, src *float32, n int)", "")
	{
		dst := Load(Param("dst"), RDI)
		src := Load(Param("src"), RSI)
		n := Load(Param("n"), RCX)
		one, bias, abs, inf, quiet := Z10, Z11, Z12, Z13, Z14
		for _, c := range []struct {
			v uint32
			z VecPhysical
		}{{1, one}, {0x7fff, bias}, {0x7fffffff, abs}, {0x7f800000, inf}, {0x40, quiet}} {
			MOVL(U32(c.v), EAX)
			VPBROADCASTD(EAX, c.z)
		}
		SHRQ(U8(4), n)
		JZ(LabelRef(name + "_done"))
		Label(name + "_loop")
		VMOVDQU32(Mem{Base: src}, Z0)
		VPSRLD(U8(16), Z0, Z1) // x >> 16
		VPANDD(one, Z1, Z2)    // lowest kept bit: ties go to even
		VPADDD(Z2, Z0, Z2)
		VPADDD(bias, Z2, Z2)
		VPSRLD(U8(16), Z2, Z2) // rounded
		VPANDD(abs, Z0, Z3)
		VPCMPUD(U8(6), inf, Z3, K1) // |x| > Inf bits: NaN
		VPORD(quiet, Z1, K1, Z2)    // NaN: x >> 16 with the quiet bit
		VPMOVDW(Z2, Mem{Base: dst})
		ADDQ(U8(64), src)
		ADDQ(U8(32), dst)
		DECQ(n)
		JNZ(LabelRef(name + "_loop"))
		Label(name + "_done")
		VZEROUPPER()
		RET()
	}
}

// convertAVX2 generates the half ↔ f32 conversions with YMM registers (n a multiple of 8).
func convertAVX2() {
	for kind := 1; kind <= 2; kind++ {
		name := "decode" + kindNames[kind] + "AVX2"
		TEXT(name, NOSPLIT, "func(dst *float32, src *uint16, n int)")
		declare(name, "(dst *float32, src *uint16, n int)", "")
		dst := Load(Param("dst"), RDI)
		src := Load(Param("src"), RSI)
		n := Load(Param("n"), RCX)
		SHRQ(U8(3), n)
		JZ(LabelRef(name + "_done"))
		Label(name + "_loop")
		loadB(kind, Mem{Base: src}, Y0, false)
		VMOVUPS(Y0, Mem{Base: dst})
		ADDQ(U8(16), src)
		ADDQ(U8(32), dst)
		DECQ(n)
		JNZ(LabelRef(name + "_loop"))
		Label(name + "_done")
		VZEROUPPER()
		RET()
	}

	name := "encodeF16AVX2"
	TEXT(name, NOSPLIT, "func(dst *uint16, src *float32, n int)")
	declare(name, "(dst *uint16, src *float32, n int)", "")
	{
		dst := Load(Param("dst"), RDI)
		src := Load(Param("src"), RSI)
		n := Load(Param("n"), RCX)
		SHRQ(U8(3), n)
		JZ(LabelRef(name + "_done"))
		Label(name + "_loop")
		VMOVUPS(Mem{Base: src}, Y0)
		VCVTPS2PH(U8(0), Y0, Mem{Base: dst}) // imm 0: round to nearest even
		ADDQ(U8(32), src)
		ADDQ(U8(16), dst)
		DECQ(n)
		JNZ(LabelRef(name + "_loop"))
		Label(name + "_done")
		VZEROUPPER()
		RET()
	}

	name = "encodeBF16AVX2"
	TEXT(name, NOSPLIT, "func(dst *uint16, src *float32, n int)")
	declare(name, "(dst *uint16, src *float32, n int)", "")
	{
		dst := Load(Param("dst"), RDI)
		src := Load(Param("src"), RSI)
		n := Load(Param("n"), RCX)
		one, bias, abs, inf, quiet := Y10, Y11, Y12, Y13, Y14
		for _, c := range []struct {
			v uint32
			y VecPhysical
		}{{1, one}, {0x7fff, bias}, {0x7fffffff, abs}, {0x7f800000, inf}, {0x40, quiet}} {
			MOVL(U32(c.v), EAX)
			MOVD(EAX, X15)
			VPBROADCASTD(X15, c.y)
		}
		SHRQ(U8(3), n)
		JZ(LabelRef(name + "_done"))
		Label(name + "_loop")
		VMOVDQU(Mem{Base: src}, Y0)
		VPSRLD(U8(16), Y0, Y1) // x >> 16
		VPAND(one, Y1, Y2)     // lowest kept bit: ties go to even
		VPADDD(Y2, Y0, Y2)
		VPADDD(bias, Y2, Y2)
		VPSRLD(U8(16), Y2, Y2) // rounded
		VPAND(abs, Y0, Y3)
		VPCMPGTD(inf, Y3, Y3) // |x| > Inf bits (both non-negative): NaN
		VPOR(quiet, Y1, Y1)   // NaN result: x >> 16 with the quiet bit
		VPBLENDVB(Y3, Y1, Y2, Y2)
		VEXTRACTI128(U8(1), Y2, X4)
		VPACKUSDW(X4, X2, X2)
		VMOVDQU(X2, Mem{Base: dst})
		ADDQ(U8(32), src)
		ADDQ(U8(16), dst)
		DECQ(n)
		JNZ(LabelRef(name + "_loop"))
		Label(name + "_done")
		VZEROUPPER()
		RET()
	}
}

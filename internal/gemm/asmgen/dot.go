package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

var xRegs = []GPPhysical{R8, R9, R10, R11, R12, R13}

// dotSetup loads the dot-kernel arguments: k/vec in CX (flags set by the shift: zero skips
// the loop), x row pointers in R8.., W row pointers in BX, DX, SI, DI, element index R14 = 0.
func dotSetup(kind, mx, vec int) (w [4]GPPhysical, p GPPhysical) {
	x := Load(Param("x"), RAX)
	ldx := Load(Param("ldx"), RDX)
	SHLQ(U8(2), ldx)
	MOVQ(x, xRegs[0])
	for i := 1; i < mx; i++ {
		LEAQ(Mem{Base: xRegs[i-1], Index: ldx, Scale: 1}, xRegs[i])
	}
	w0 := Load(Param("w"), RBX)
	ldw := Load(Param("ldw"), RSI)
	if eltSize(kind) == 4 {
		SHLQ(U8(2), ldw)
	} else {
		SHLQ(U8(1), ldw)
	}
	LEAQ(Mem{Base: w0, Index: ldw, Scale: 2}, RDI)
	ADDQ(ldw, RDI)
	LEAQ(Mem{Base: w0, Index: ldw, Scale: 1}, RDX)
	LEAQ(Mem{Base: w0, Index: ldw, Scale: 2}, RSI)
	p = R14
	XORQ(p, p)
	k := Load(Param("k"), RCX)
	if vec == 16 {
		SHRQ(U8(4), k)
	} else {
		SHRQ(U8(3), k)
	}
	return [4]GPPhysical{RBX, RDX, RSI, RDI}, p
}

// dotAVX512 generates out[i][j] = x_i·w_j for i < mx, j < 4, k a multiple of 16.
// Registers: W rows Z0..Z3, x Z4, accumulators Z8.. (4 per x row).
func dotAVX512(name string, kind, mx int) {
	TEXT(name, NOSPLIT, dotSigAvo)
	declare(name, dotSig, "")
	acc := func(i, j int) VecPhysical { return zreg(8 + i*4 + j) }
	for i := 0; i < mx; i++ {
		for j := 0; j < 4; j++ {
			VPXORD(acc(i, j), acc(i, j), acc(i, j))
		}
	}
	w, p := dotSetup(kind, mx, 16)
	JZ(LabelRef(name + "_reduce"))
	Label(name + "_loop")
	for j := 0; j < 4; j++ {
		loadB(kind, Mem{Base: w[j], Index: p, Scale: uint8(eltSize(kind))}, zreg(j), true)
	}
	for i := 0; i < mx; i++ {
		VMOVUPS(Mem{Base: xRegs[i], Index: p, Scale: 4}, Z4)
		for j := 0; j < 4; j++ {
			VFMADD231PS(zreg(j), Z4, acc(i, j))
		}
	}
	ADDQ(U8(16), p)
	DECQ(RCX)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_reduce")
	out := Load(Param("out"), RAX)
	ldo := Load(Param("ldo"), RCX)
	SHLQ(U8(2), ldo)
	for i := 0; i < mx; i++ {
		for j := 0; j < 4; j++ { // zmm → ymm in Y0..Y3 (VEX-encodable for the horizontal adds)
			VEXTRACTF64X4(U8(1), acc(i, j), Y4)
			VADDPS(Y4, asY(acc(i, j)), yreg(j))
		}
		hsum4Y(Y0, Y1, Y2, Y3, Mem{Base: out})
		if i+1 < mx {
			ADDQ(ldo, out)
		}
	}
	VZEROUPPER()
	RET()
}

// dotAVX2 generates the dot kernel with YMM registers (k a multiple of 8): x rows in
// Y0..Y2, W row in Y3, accumulators Y4..Y15.
func dotAVX2(name string, kind, mx int) {
	TEXT(name, NOSPLIT, dotSigAvo)
	declare(name, dotSig, "")
	acc := func(i, j int) VecPhysical { return yreg(4 + i*4 + j) }
	for i := 0; i < mx; i++ {
		for j := 0; j < 4; j++ {
			VXORPS(acc(i, j), acc(i, j), acc(i, j))
		}
	}
	w, p := dotSetup(kind, mx, 8)
	JZ(LabelRef(name + "_reduce"))
	Label(name + "_loop")
	for i := 0; i < mx; i++ {
		VMOVUPS(Mem{Base: xRegs[i], Index: p, Scale: 4}, yreg(i))
	}
	for j := 0; j < 4; j++ {
		loadB(kind, Mem{Base: w[j], Index: p, Scale: uint8(eltSize(kind))}, Y3, false)
		for i := 0; i < mx; i++ {
			VFMADD231PS(Y3, yreg(i), acc(i, j))
		}
	}
	ADDQ(U8(8), p)
	DECQ(RCX)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_reduce")
	out := Load(Param("out"), RAX)
	ldo := Load(Param("ldo"), RCX)
	SHLQ(U8(2), ldo)
	for i := 0; i < mx; i++ {
		hsum4Y(acc(i, 0), acc(i, 1), acc(i, 2), acc(i, 3), Mem{Base: out})
		if i+1 < mx {
			ADDQ(ldo, out)
		}
	}
	VZEROUPPER()
	RET()
}

func asY(r VecPhysical) VecPhysical { return r.AsY().(VecPhysical) }

const dotRowsSig = "(k, groups int, x *float32, ldx int, w unsafe.Pointer, ldw int, out *float32, ldo int, alpha float32)"
const dotRowsSigAvo = "func(k, groups int, x *float32, ldx int, w *byte, ldw int, out *float32, ldo int, alpha float32)"

// dotRowsAVX512 generates out[i·ldo + 4g + j] = alpha·(x_i·w_{4g+j}) for i < mx, j < 4 and
// g < groups (groups ≥ 1, k a multiple of 16): the dot kernel (dotAVX512, the same sums in
// the same order, then the product by alpha package gemm's dotGroups takes) run over many
// groups of 4 rows of W in one call, writing out directly, so that products with many rows
// of W and little depth (attention's scores) do not pay a Go call per 4 × mx outputs.
// Registers: x rows R8..R13, the group's W rows BX, DX, SI, DI from AX, the element index
// R14, accumulators Z8.., alpha in X5; the group count, out, ldo and ldw live in the frame.
func dotRowsAVX512(name string, kind, mx int) {
	TEXT(name, NOSPLIT, dotRowsSigAvo)
	declare(name, dotRowsSig, "")
	locals := AllocLocal(40)
	groupsL, outL, ldoL, ldwL, ldw4L := locals.Offset(0), locals.Offset(8), locals.Offset(16), locals.Offset(24), locals.Offset(32)
	esz := eltSize(kind)
	x := Load(Param("x"), RAX)
	ldx := Load(Param("ldx"), RDX)
	SHLQ(U8(2), ldx)
	MOVQ(x, xRegs[0])
	for i := 1; i < mx; i++ {
		LEAQ(Mem{Base: xRegs[i-1], Index: ldx, Scale: 1}, xRegs[i])
	}
	Load(Param("groups"), RCX)
	MOVQ(RCX, groupsL)
	Load(Param("out"), RCX)
	MOVQ(RCX, outL)
	Load(Param("ldo"), RCX)
	SHLQ(U8(2), RCX)
	MOVQ(RCX, ldoL)
	Load(Param("ldw"), RCX)
	if esz == 4 {
		SHLQ(U8(2), RCX)
	} else {
		SHLQ(U8(1), RCX)
	}
	MOVQ(RCX, ldwL)
	SHLQ(U8(2), RCX)
	MOVQ(RCX, ldw4L)
	Load(Param("alpha"), X5)
	VBROADCASTSS(X5, X5)
	Load(Param("w"), RAX)
	acc := func(i, j int) VecPhysical { return zreg(8 + i*4 + j) }
	w := [4]GPPhysical{RBX, RDX, RSI, RDI}
	p := R14
	Label(name + "_group")
	for i := 0; i < mx; i++ {
		for j := 0; j < 4; j++ {
			VPXORD(acc(i, j), acc(i, j), acc(i, j))
		}
	}
	MOVQ(RAX, RBX)
	MOVQ(ldwL, p)
	LEAQ(Mem{Base: RAX, Index: p, Scale: 1}, RDX)
	LEAQ(Mem{Base: RAX, Index: p, Scale: 2}, RSI)
	LEAQ(Mem{Base: RSI, Index: p, Scale: 1}, RDI)
	XORQ(p, p)
	Load(Param("k"), RCX)
	SHRQ(U8(4), RCX)
	JZ(LabelRef(name + "_reduce"))
	Label(name + "_loop")
	for j := 0; j < 4; j++ {
		loadB(kind, Mem{Base: w[j], Index: p, Scale: uint8(esz)}, zreg(j), true)
	}
	for i := 0; i < mx; i++ {
		VMOVUPS(Mem{Base: xRegs[i], Index: p, Scale: 4}, Z4)
		for j := 0; j < 4; j++ {
			VFMADD231PS(zreg(j), Z4, acc(i, j))
		}
	}
	ADDQ(U8(16), p)
	DECQ(RCX)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_reduce")
	MOVQ(outL, RCX)
	for i := 0; i < mx; i++ {
		for j := 0; j < 4; j++ { // as dotAVX512
			VEXTRACTF64X4(U8(1), acc(i, j), Y4)
			VADDPS(Y4, asY(acc(i, j)), yreg(j))
		}
		hsum4YScaled(Y0, Y1, Y2, Y3, X5, Mem{Base: RCX})
		if i+1 < mx {
			ADDQ(ldoL, RCX)
		}
	}
	ADDQ(U8(16), outL)
	ADDQ(ldw4L, RAX)
	DECQ(groupsL)
	JNZ(LabelRef(name + "_group"))
	VZEROUPPER()
	RET()
}

// dotRowsAVX2 is dotRowsAVX512 with the AVX2 dot kernel (dotAVX2: mx ≤ 3, k a multiple of
// 8): x rows R8..R10, accumulators Y4..Y15, alpha broadcast into X1 for the stores.
func dotRowsAVX2(name string, kind, mx int) {
	TEXT(name, NOSPLIT, dotRowsSigAvo)
	declare(name, dotRowsSig, "")
	locals := AllocLocal(40)
	groupsL, outL, ldoL, ldwL, ldw4L := locals.Offset(0), locals.Offset(8), locals.Offset(16), locals.Offset(24), locals.Offset(32)
	esz := eltSize(kind)
	x := Load(Param("x"), RAX)
	ldx := Load(Param("ldx"), RDX)
	SHLQ(U8(2), ldx)
	MOVQ(x, xRegs[0])
	for i := 1; i < mx; i++ {
		LEAQ(Mem{Base: xRegs[i-1], Index: ldx, Scale: 1}, xRegs[i])
	}
	Load(Param("groups"), RCX)
	MOVQ(RCX, groupsL)
	Load(Param("out"), RCX)
	MOVQ(RCX, outL)
	Load(Param("ldo"), RCX)
	SHLQ(U8(2), RCX)
	MOVQ(RCX, ldoL)
	Load(Param("ldw"), RCX)
	if esz == 4 {
		SHLQ(U8(2), RCX)
	} else {
		SHLQ(U8(1), RCX)
	}
	MOVQ(RCX, ldwL)
	SHLQ(U8(2), RCX)
	MOVQ(RCX, ldw4L)
	Load(Param("w"), RAX)
	acc := func(i, j int) VecPhysical { return yreg(4 + i*4 + j) }
	w := [4]GPPhysical{RBX, RDX, RSI, RDI}
	p := R14
	Label(name + "_group")
	for i := 0; i < mx; i++ {
		for j := 0; j < 4; j++ {
			VXORPS(acc(i, j), acc(i, j), acc(i, j))
		}
	}
	MOVQ(RAX, RBX)
	MOVQ(ldwL, p)
	LEAQ(Mem{Base: RAX, Index: p, Scale: 1}, RDX)
	LEAQ(Mem{Base: RAX, Index: p, Scale: 2}, RSI)
	LEAQ(Mem{Base: RSI, Index: p, Scale: 1}, RDI)
	XORQ(p, p)
	Load(Param("k"), RCX)
	SHRQ(U8(3), RCX)
	JZ(LabelRef(name + "_reduce"))
	Label(name + "_loop")
	for i := 0; i < mx; i++ {
		VMOVUPS(Mem{Base: xRegs[i], Index: p, Scale: 4}, yreg(i))
	}
	for j := 0; j < 4; j++ {
		loadB(kind, Mem{Base: w[j], Index: p, Scale: uint8(esz)}, Y3, false)
		for i := 0; i < mx; i++ {
			VFMADD231PS(Y3, yreg(i), acc(i, j))
		}
	}
	ADDQ(U8(8), p)
	DECQ(RCX)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_reduce")
	Load(Param("alpha"), X1)
	VBROADCASTSS(X1, X1)
	MOVQ(outL, RCX)
	for i := 0; i < mx; i++ {
		hsum4YScaled(acc(i, 0), acc(i, 1), acc(i, 2), acc(i, 3), X1, Mem{Base: RCX})
		if i+1 < mx {
			ADDQ(ldoL, RCX)
		}
	}
	ADDQ(U8(16), outL)
	ADDQ(ldw4L, RAX)
	DECQ(groupsL)
	JNZ(LabelRef(name + "_group"))
	VZEROUPPER()
	RET()
}

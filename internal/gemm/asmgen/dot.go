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

package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// transpose8 transposes the 8×8 f32 block in Y0..Y7 (row r in Yr) using Y8..Y15 and calls
// store(j, v) with column j of the block in v (one of Y8..Y15).
func transpose8(store func(j int, v VecPhysical)) {
	r := func(i int) VecPhysical { return yreg(i) }
	t := func(i int) VecPhysical { return yreg(8 + i) }
	for i := 0; i < 4; i++ { // t(2i): r2i[0] r2i+1[0] r2i[1] r2i+1[1] per 128-bit lane
		VUNPCKLPS(r(2*i+1), r(2*i), t(2*i))
		VUNPCKHPS(r(2*i+1), r(2*i), t(2*i+1))
	}
	for h := 0; h < 2; h++ { // rows 4h..4h+3: r(4h+c) lane L = column 4L+c
		VSHUFPS(U8(0x44), t(4*h+2), t(4*h), r(4*h+0))
		VSHUFPS(U8(0xEE), t(4*h+2), t(4*h), r(4*h+1))
		VSHUFPS(U8(0x44), t(4*h+3), t(4*h+1), r(4*h+2))
		VSHUFPS(U8(0xEE), t(4*h+3), t(4*h+1), r(4*h+3))
	}
	for c := 0; c < 4; c++ {
		VPERM2F128(U8(0x20), r(4+c), r(c), t(c))   // column c
		VPERM2F128(U8(0x31), r(4+c), r(c), t(4+c)) // column 4+c
		store(c, t(c))
		store(4+c, t(4+c))
	}
}

// packTAVX2 generates the transposing B pack with YMM registers (kc a multiple of 8).
func packTAVX2(name string, kind int) {
	TEXT(name, NOSPLIT, packTSigAvo)
	declare(name, packTSig, "")
	kc := Load(Param("kc"), RCX)
	src := Load(Param("src"), RSI)
	lds := Load(Param("lds"), RDX)
	dst := Load(Param("dst"), RDI)
	esz := eltSize(kind)
	if esz == 4 {
		SHLQ(U8(2), lds)
	} else {
		SHLQ(U8(1), lds)
	}
	LEAQ(Mem{Base: lds, Index: lds, Scale: 2}, R8) // 3*lds
	SHRQ(U8(3), kc)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	MOVQ(src, RAX)
	for g := 0; g < 4; g++ { // rows 8g..8g+7 → dst columns 8g..8g+7
		for r := 0; r < 8; r++ {
			m := Mem{Base: RAX}
			switch r % 4 {
			case 1:
				m = Mem{Base: RAX, Index: lds, Scale: 1}
			case 2:
				m = Mem{Base: RAX, Index: lds, Scale: 2}
			case 3:
				m = Mem{Base: RAX, Index: R8, Scale: 1}
			}
			loadB(kind, m, yreg(r), false)
			if r%4 == 3 {
				LEAQ(Mem{Base: RAX, Index: lds, Scale: 4}, RAX)
			}
		}
		g := g
		transpose8(func(j int, v VecPhysical) {
			VMOVUPS(v, Mem{Base: dst, Disp: j*4*panelW + g*32})
		})
	}
	ADDQ(U32(8*esz), src)
	ADDQ(U32(8*4*panelW), dst)
	DECQ(kc)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// packAAVX2 generates the A pack of a full AVX2 panel: dst[p*MR+i] = alpha*src[i*lda+p] for
// i < MR (6) and p < kc, kc a multiple of 8.
func packAAVX2(name string) {
	TEXT(name, NOSPLIT, "func(kc int, src *float32, lda int, dst *float32, alpha float32)")
	declare(name, "(kc int, src *float32, lda int, dst *float32, alpha float32)", "")
	kc := Load(Param("kc"), RCX)
	src := Load(Param("src"), RSI)
	lda := Load(Param("lda"), RDX)
	dst := Load(Param("dst"), RDI)
	alpha := paramAddr("alpha")
	SHLQ(U8(2), lda)
	LEAQ(Mem{Base: lda, Index: lda, Scale: 2}, R8) // 3*lda
	SHRQ(U8(3), kc)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	VBROADCASTSS(alpha, Y15)
	MOVQ(src, RAX)
	for r := 0; r < 8; r++ {
		if r >= avx2MR {
			VXORPS(yreg(r), yreg(r), yreg(r))
			continue
		}
		m := Mem{Base: RAX}
		switch r % 4 {
		case 1:
			m = Mem{Base: RAX, Index: lda, Scale: 1}
		case 2:
			m = Mem{Base: RAX, Index: lda, Scale: 2}
		case 3:
			m = Mem{Base: RAX, Index: R8, Scale: 1}
		}
		VMULPS(m, Y15, yreg(r))
		if r%4 == 3 {
			LEAQ(Mem{Base: RAX, Index: lda, Scale: 4}, RAX)
		}
	}
	transpose8(func(j int, v VecPhysical) { // 6 lanes: 4 + 2
		d := Mem{Base: dst, Disp: j * 4 * avx2MR}
		VMOVUPS(v.AsX(), d)
		VEXTRACTF128(U8(1), v, X0)
		VMOVLPS(X0, d.Offset(16))
	})
	ADDQ(U8(32), src)
	ADDQ(U32(8*4*avx2MR), dst)
	DECQ(kc)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// packTAVX512 generates the transposing B pack: dst[p*32+j] = src[j*lds+p] for j < 32 and
// p < kc, kc a multiple of 16, widening 16-bit kinds. Each 16×16 block is transposed in
// registers (unpack ps, unpack pd, two rounds of 128-bit lane shuffles).
func packTAVX512(name string, kind int) {
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
	SHRQ(U8(4), kc)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	MOVQ(src, RAX)           // pointer to the current group of 4 rows
	for g := 0; g < 2; g++ { // rows 16g..16g+15 → dst columns 16g..16g+15
		for r := 0; r < 16; r++ {
			m := Mem{Base: RAX}
			switch r % 4 {
			case 1:
				m = Mem{Base: RAX, Index: lds, Scale: 1}
			case 2:
				m = Mem{Base: RAX, Index: lds, Scale: 2}
			case 3:
				m = Mem{Base: RAX, Index: R8, Scale: 1}
			}
			loadB(kind, m, zreg(r), true)
			if r%4 == 3 {
				LEAQ(Mem{Base: RAX, Index: lds, Scale: 4}, RAX)
			}
		}
		g := g
		transpose16(func(j int, v VecPhysical) {
			VMOVUPS(v, Mem{Base: dst, Disp: j*4*panelW + g*64})
		})
	}
	ADDQ(U32(16*esz), src)
	ADDQ(U32(16*4*panelW), dst)
	DECQ(kc)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// transpose16 transposes the 16×16 f32 block in Z0..Z15 (row r in Zr) using Z16..Z31 and
// calls store(j, v) with column j of the block in v.
func transpose16(store func(j int, v VecPhysical)) {
	r := func(i int) VecPhysical { return zreg(i) }
	t := func(i int) VecPhysical { return zreg(16 + i) }
	for i := 0; i < 8; i++ { // t(2i) lane: r2i[0] r2i+1[0] r2i[1] r2i+1[1]; t(2i+1): elements 2, 3
		VUNPCKLPS(r(2*i+1), r(2*i), t(2*i))
		VUNPCKHPS(r(2*i+1), r(2*i), t(2*i+1))
	}
	for q := 0; q < 4; q++ { // r(4q+c) lane L: column 4L+c of rows 4q..4q+3
		VUNPCKLPD(t(4*q+2), t(4*q), r(4*q+0))
		VUNPCKHPD(t(4*q+2), t(4*q), r(4*q+1))
		VUNPCKLPD(t(4*q+3), t(4*q+1), r(4*q+2))
		VUNPCKHPD(t(4*q+3), t(4*q+1), r(4*q+3))
	}
	for c := 0; c < 4; c++ { // 4×4 transpose of the 128-bit lanes of r(c), r(4+c), r(8+c), r(12+c)
		VSHUFF32X4(U8(0x44), r(4+c), r(c), t(4*c+0))
		VSHUFF32X4(U8(0xEE), r(4+c), r(c), t(4*c+1))
		VSHUFF32X4(U8(0x44), r(12+c), r(8+c), t(4*c+2))
		VSHUFF32X4(U8(0xEE), r(12+c), r(8+c), t(4*c+3))
	}
	for c := 0; c < 4; c++ {
		VSHUFF32X4(U8(0x88), t(4*c+2), t(4*c+0), r(4*c+0)) // column c
		VSHUFF32X4(U8(0xDD), t(4*c+2), t(4*c+0), r(4*c+1)) // column 4+c
		VSHUFF32X4(U8(0x88), t(4*c+3), t(4*c+1), r(4*c+2)) // column 8+c
		VSHUFF32X4(U8(0xDD), t(4*c+3), t(4*c+1), r(4*c+3)) // column 12+c
		for l := 0; l < 4; l++ {
			store(4*l+c, r(4*c+l))
		}
	}
}

// paramAddr returns the stack address of a scalar argument (for embedded broadcasts).
func paramAddr(name string) Mem {
	b, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

// packAAVX512 generates the A pack of a full panel of mr rows: dst[p*mr+i] = alpha*src[i*lda+p]
// for i < mr and p < kc, kc a multiple of 16 (rows loaded 16 columns at a time, transposed
// in registers, stored MR lanes wide).
func packAAVX512(name string, mr int) {
	TEXT(name, NOSPLIT, "func(kc int, src *float32, lda int, dst *float32, alpha float32)")
	declare(name, "(kc int, src *float32, lda int, dst *float32, alpha float32)", "")
	kc := Load(Param("kc"), RCX)
	src := Load(Param("src"), RSI)
	lda := Load(Param("lda"), RDX)
	dst := Load(Param("dst"), RDI)
	alpha := paramAddr("alpha")
	SHLQ(U8(2), lda)
	LEAQ(Mem{Base: lda, Index: lda, Scale: 2}, R8) // 3*lda
	MOVL(U32(1<<mr-1), EAX)
	KMOVW(EAX, K1)
	SHRQ(U8(4), kc)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	MOVQ(src, RAX)
	for r := 0; r < 16; r++ {
		if r >= mr {
			VPXORD(zreg(r), zreg(r), zreg(r))
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
		VMOVUPS(m, zreg(r))
		VMULPS_BCST(alpha, zreg(r), zreg(r))
		if r%4 == 3 {
			LEAQ(Mem{Base: RAX, Index: lda, Scale: 4}, RAX)
		}
	}
	transpose16(func(j int, v VecPhysical) {
		VMOVUPS(v, K1, Mem{Base: dst, Disp: j * 4 * mr})
	})
	ADDQ(U8(64), src)
	ADDQ(U32(16*4*mr), dst)
	DECQ(kc)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// packATAVX512 generates the A pack for a transposed A: dst[p*rows+i] = alpha*src[p*lda+i]
// for i < rows (1..16) and p < kc.
func packATAVX512(name string) {
	TEXT(name, NOSPLIT, "func(kc, rows int, src *float32, lda int, dst *float32, alpha float32)")
	declare(name, "(kc, rows int, src *float32, lda int, dst *float32, alpha float32)", "")
	kc := Load(Param("kc"), RCX)
	rows := Load(Param("rows"), RBX)
	src := Load(Param("src"), RSI)
	lda := Load(Param("lda"), RDX)
	dst := Load(Param("dst"), RDI)
	VBROADCASTSS(paramAddr("alpha"), Z1)
	SHLQ(U8(2), lda)
	// K1 = (1 << rows) - 1
	MOVL(U32(1), EAX)
	SHLXL(EBX, EAX, EAX)
	DECL(EAX)
	KMOVW(EAX, K1)
	SHLQ(U8(2), rows) // bytes per packed depth step
	TESTQ(kc, kc)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	VMULPS_Z(Mem{Base: src}, Z1, K1, Z0)
	VMOVUPS(Z0, K1, Mem{Base: dst})
	ADDQ(lda, src)
	ADDQ(rows, dst)
	DECQ(kc)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

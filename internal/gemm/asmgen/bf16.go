package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// bf16 pair kernels (AVX512_BF16): C[rows×32] += Ap·B in bf16 arithmetic with f32
// accumulation, one VDPBF16PS per 16 outputs and two depth steps. Ap holds, per depth pair,
// one 32-bit word per row: the row's two bf16 values (even depth in the low half); B holds,
// per depth pair, 32 such words (one per column, 128 bytes). Go's assembler does not know
// the AVX512_BF16 instructions, so VDPBF16PS is emitted as its EVEX bytes.

const pairSig = "(kp int, a *uint32, b *uint16, c *float32, ldc int)"
const pairSigAvo = "func(kp int, a *uint32, b *uint16, c *float32, ldc int)"

// vdpbf16ps emits VDPBF16PS zmm(src2), zmm(src1), zmm(dst): dst[i] += src1.bf16[2i+1]·
// src2.bf16[2i+1] + src1.bf16[2i]·src2.bf16[2i] (EVEX.512.F3.0F38.W0 52 /r).
func vdpbf16ps(dst, src1, src2 int) { evex(0x52, 0b10, dst, src1, src2) }

// evex emits an EVEX.512.0F38.W0 register-form instruction: opcode op, prefix pp (2 = F3,
// 3 = F2), dst in ModRM.reg, src1 in EVEX.vvvv, src2 in ModRM.rm.
func evex(op, pp, dst, src1, src2 int) {
	p0 := (^dst>>3&1)<<7 | (^src2>>4&1)<<6 | (^src2>>3&1)<<5 | (^dst>>4&1)<<4 | 0b010
	p1 := (^src1&0xF)<<3 | 1<<2 | pp
	p2 := 0b10<<5 | (^src1>>4&1)<<3
	modrm := 0xC0 | (dst&7)<<3 | src2&7
	// Six bytes as a little-endian LONG and WORD.
	Instruction(&ir.Instruction{Opcode: "LONG", Operands: []Op{U32(uint32(0x62 | p0<<8 | p1<<16 | p2<<24))}})
	Instruction(&ir.Instruction{Opcode: "WORD", Operands: []Op{U16(uint16(op | modrm<<8))}})
}

// vcvtne2ps2bf16 emits VCVTNE2PS2BF16 zmm(src2), zmm(src1), zmm(dst): the low 16 words of
// dst are src2 rounded to bf16 (to nearest even), the high 16 src1.
func vcvtne2ps2bf16(dst, src1, src2 int) { evex(0x72, 0b11, dst, src1, src2) }

// packRowAVX512 generates dst[q] = bf16(alpha·src[2q]) | bf16(alpha·src[2q+1])<<16 for
// q < n (n a multiple of 16): one row of an A operand packed to bf16 pairs.
func packRowAVX512(name string) {
	TEXT(name, NOSPLIT, "func(n int, src *float32, dst *uint32, alpha float32)")
	declare(name, "(n int, src *float32, dst *uint32, alpha float32)", "")
	n := Load(Param("n"), RCX)
	src := Load(Param("src"), RSI)
	dst := Load(Param("dst"), RDI)
	alpha := Load(Param("alpha"), X3)
	VBROADCASTSS(alpha, Z3)
	loop16(name, n, func() { // 16 pairs: 32 floats in, 16 words out
		VMULPS(Mem{Base: src}, Z3, Z0)
		VMULPS(Mem{Base: src, Disp: 64}, Z3, Z1)
		vcvtne2ps2bf16(2, 1, 0)
		VMOVDQU32(Z2, Mem{Base: dst})
		ADDQ(U32(128), src)
		ADDQ(U32(64), dst)
	})
	VZEROUPPER()
	RET()
}

// microPairAVX512 generates C[rows×32] += Ap·B over kp depth pairs. Accumulators Z4..Z31
// (two per row), starting from C, one chain of VDPBF16PS per element in depth order whatever
// the row count (as microAVX512); B in Z0/Z1, the broadcast A pair in Z2/Z3.
func microPairAVX512(name string, rows int) { microPairAVX512PF(name, rows, 0) }

// microPairAVX512PF is microPairAVX512 that, when pf > 0, prefetches every cache line of B pf
// bytes ahead (the streaming kernels of decode).
func microPairAVX512PF(name string, rows int, pf int) {
	TEXT(name, NOSPLIT, pairSigAvo)
	declare(name, pairSig, "")
	kp := Load(Param("kp"), RCX)
	a := Load(Param("a"), RAX)
	b := Load(Param("b"), RBX)
	acc := func(i, h int) int { return 4 + i*2 + h }
	loadC(rows, 64, func(i, h int) VecPhysical { return zreg(acc(i, h)) }, false)
	step := func(aOff, bOff int) {
		VMOVDQU32(Mem{Base: b, Disp: bOff}, Z0)
		VMOVDQU32(Mem{Base: b, Disp: bOff + 64}, Z1)
		for i := 0; i < rows; i++ {
			t := 2 + i%2
			VPBROADCASTD(Mem{Base: a, Disp: aOff + 4*i}, zreg(t))
			vdpbf16ps(acc(i, 0), 0, t)
			vdpbf16ps(acc(i, 1), 1, t)
		}
	}
	aStep := 4 * rows
	prefetch := func() { PREFETCHT0(Mem{Base: b, Disp: 128 * 4 * 2}) }
	if pf > 0 {
		prefetch = func() {
			for line := 0; line < 4*128; line += 64 {
				PREFETCHT0(Mem{Base: b, Disp: pf + line})
			}
		}
	}
	unrolledLoop(name, kp, prefetch,
		func(u int) { step(aStep*u, 128*u) },
		func(steps int) {
			ADDQ(U32(aStep*steps), a)
			ADDQ(U32(128*steps), b)
		})
	storeC(rows, 64, func(i, h int) VecPhysical { return zreg(acc(i, h)) })
}

// pairKernels generates the bf16 pair micro-kernels for 1..avx512MR rows and returns the Go
// table of them.
func pairKernels() string {
	s := "var avx512PairMicro = []pairFn{"
	for rows := 1; rows <= avx512MR; rows++ {
		name := fmt.Sprintf("microPairAVX512R%d", rows)
		microPairAVX512(name, rows)
		s += name + ", "
	}
	s += "}\n\n// avx512PairStream: the pair kernels of decode (1..streamMR rows), without software\n" +
		"// prefetch (the same kernels as avx512PairMicro's).\nvar avx512PairStream = []pairFn{"
	for rows := 1; rows <= streamMR; rows++ {
		s += fmt.Sprintf("microPairAVX512R%d, ", rows)
	}
	s += "}\n\n// avx512PairStreamPF: avx512PairStream prefetching B streamPF bytes ahead.\nvar avx512PairStreamPF = []pairFn{"
	for rows := 1; rows <= streamMR; rows++ {
		name := fmt.Sprintf("streamPFPairAVX512R%d", rows)
		microPairAVX512PF(name, rows, streamPF)
		s += name + ", "
	}
	return s + "}\n"
}

// packAPairsAVX512 generates the A pack of a full panel of mr rows in bf16 pairs:
// dst[q*mr+i] = bf16(alpha·src[i*lda+2q]) | bf16(alpha·src[i*lda+2q+1])<<16 for i < mr and
// q < kp, kp a multiple of 16 (as packRowAVX512 rounds; 32 floats of each row converted to 16
// pairs, the 16×16 block of pairs transposed in registers, stored mr lanes wide).
func packAPairsAVX512(name string, mr int) {
	TEXT(name, NOSPLIT, "func(kp int, src *float32, lda int, dst *uint32, alpha float32)")
	declare(name, "(kp int, src *float32, lda int, dst *uint32, alpha float32)", "")
	kp := Load(Param("kp"), RCX)
	src := Load(Param("src"), RSI)
	lda := Load(Param("lda"), RDX)
	dst := Load(Param("dst"), RDI)
	alpha := paramAddr("alpha")
	SHLQ(U8(2), lda)
	LEAQ(Mem{Base: lda, Index: lda, Scale: 2}, R8) // 3*lda
	MOVL(U32(1<<mr-1), EAX)
	KMOVW(EAX, K1)
	SHRQ(U8(4), kp)
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
		m64 := m
		m64.Disp += 64
		VMOVUPS(m, Z16)
		VMOVUPS(m64, Z17)
		VMULPS_BCST(alpha, Z16, Z16)
		VMULPS_BCST(alpha, Z17, Z17)
		vcvtne2ps2bf16(r, 17, 16) // pairs 0..15 of the row
		if r%4 == 3 {
			LEAQ(Mem{Base: RAX, Index: lda, Scale: 4}, RAX)
		}
	}
	transpose16(func(j int, v VecPhysical) {
		VMOVDQU32(v, K1, Mem{Base: dst, Disp: j * 4 * mr})
	})
	ADDQ(U32(128), src)
	ADDQ(U32(16*4*mr), dst)
	DECQ(kp)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

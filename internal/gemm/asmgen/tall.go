package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Tall kernels: C[rows×16] += Ap·B for up to tallMR rows, one ZMM accumulator per row (Z16..Z31),
// the A values broadcast from memory inside the multiply-add (EVEX embedded broadcast), so
// that one B vector of 16 columns serves every row. They are decode's kernels for 5..16 rows
// (batched decode): the 14-row kernels split 16 rows into 14 + 2, the 2-row pass latency-bound
// and reading B a second time; here each half panel of B is read once for all the rows, and
// 16 independent chains cover the multiply-add's latency. Each element is still one chain in
// depth order starting from C (row invariance).

// tallMR is the most rows of a tall kernel.
const tallMR = 16

// tallPF is the prefetch distance of the tall kernels that prefetch: a B stream of 16 rows
// runs into the memory's bandwidth, not the multiply-adds', and on an AMD EPYC (Zen 5) one core
// read a batch-16 decode's weights (pair-packed bf16) at 14 GB/s without software prefetch,
// 16, 17, 20, 22 and 23-25 GB/s prefetching 1, 2, 4, 8 and 12-24 KiB ahead (2026-11-29).
const tallPF = 8192

// microTallAVX512 generates C[rows×16] += Ap·B (microFn: f32 arithmetic, B f32 or 16-bit
// widened in registers, rows ldb elements apart; the A panel holds rows values per depth
// step). When pf > 0 it also prefetches the B row pf bytes ahead of each one it reads.
func microTallAVX512(name string, kind, rows, pf int) {
	TEXT(name, NOSPLIT, microSigAvo)
	declare(name, microSig, "")
	kc := Load(Param("kc"), RCX)
	a := Load(Param("a"), RAX)
	b := Load(Param("b"), RBX)
	ldb := Load(Param("ldb"), RDX)
	esz := eltSize(kind)
	if esz == 4 {
		SHLQ(U8(2), ldb)
	} else {
		SHLQ(U8(1), ldb)
	}
	acc := func(i int) VecPhysical { return zreg(16 + i) }
	tallLoadC(rows, acc)
	step := func(u, aOff int) {
		v := zreg(u)
		if pf > 0 {
			PREFETCHT0(Mem{Base: b, Disp: pf})
		}
		loadB(kind, Mem{Base: b}, v, true)
		for i := 0; i < rows; i++ {
			VFMADD231PS_BCST(Mem{Base: a, Disp: aOff + 4*i}, v, acc(i))
		}
		ADDQ(ldb, b)
	}
	aStep := 4 * rows
	unrolledLoop(name, kc, nil, func(u int) { step(u, aStep*u) }, func(steps int) { ADDQ(U32(aStep*steps), a) })
	tallStoreC(rows, acc)
}

// microPairTallAVX512 generates C[rows×16] += Ap·B in bf16 arithmetic (pairFn over 16 columns:
// B holds per depth pair 16 words of a panel of panelW, 128 bytes apart; Ap rows words per
// depth pair): one VDPBF16PS per row and depth pair, the row's pair broadcast from memory.
// When pf > 0 it also prefetches B pf bytes ahead.
func microPairTallAVX512(name string, rows, pf int) {
	TEXT(name, NOSPLIT, pairSigAvo)
	declare(name, pairSig, "")
	kp := Load(Param("kp"), RCX)
	a := Load(Param("a"), RAX)
	b := Load(Param("b"), RBX)
	acc := func(i int) VecPhysical { return zreg(16 + i) }
	tallLoadC(rows, acc)
	const bStep = 4 * panelW // bytes per depth pair of a panel
	step := func(u, aOff int) {
		if pf > 0 {
			PREFETCHT0(Mem{Base: b, Disp: pf + bStep*u})
		}
		VMOVDQU32(Mem{Base: b, Disp: bStep * u}, zreg(u))
		for i := 0; i < rows; i++ {
			vdpbf16psBcst(16+i, u, 0 /* RAX */, aOff+4*i)
		}
	}
	aStep := 4 * rows
	unrolledLoop(name, kp, nil, func(u int) { step(u, aStep*u) },
		func(steps int) {
			ADDQ(U32(aStep*steps), a)
			ADDQ(U32(bStep*steps), b)
		})
	tallStoreC(rows, acc)
}

// vdpbf16psBcst emits VDPBF16PS disp(base){1to16}, zmm(src1), zmm(dst): dst[i] +=
// src1.bf16[2i+1]·m.bf16[1] + src1.bf16[2i]·m.bf16[0], the 32-bit word at disp(base) broadcast
// (EVEX.512.F3.0F38.W0 52 /r with EVEX.b; base a general register number other than RSP and
// R12, which would need a SIB byte). The displacement is a disp8 scaled by 4 (the broadcast
// element) when it fits, else a disp32.
func vdpbf16psBcst(dst, src1, base, disp int) {
	p0 := (^dst>>3&1)<<7 | 1<<6 | (^base>>3&1)<<5 | (^dst>>4&1)<<4 | 0b010
	p1 := (^src1&0xF)<<3 | 1<<2 | 0b10
	p2 := 0b10<<5 | 1<<4 | (^src1>>4&1)<<3
	if base&7 == 4 {
		panic("vdpbf16psBcst: RSP or R12 as base needs a SIB byte")
	}
	emit := func(op string, v Op) { Instruction(&ir.Instruction{Opcode: op, Operands: []Op{v}}) }
	emit("LONG", U32(uint32(0x62|p0<<8|p1<<16|p2<<24)))
	if disp%4 == 0 && disp/4 >= -128 && disp/4 <= 127 {
		modrm := 0b01<<6 | (dst&7)<<3 | base&7
		emit("WORD", U16(uint16(0x52|modrm<<8)))
		emit("BYTE", U8(uint8(int8(disp/4))))
		return
	}
	modrm := 0b10<<6 | (dst&7)<<3 | base&7
	emit("WORD", U16(uint16(0x52|modrm<<8)))
	emit("LONG", U32(uint32(int32(disp))))
}

// tallLoadC loads rows rows of 16 floats of C (parameters c and ldc) into acc(i); clobbers RDI
// and RSI.
func tallLoadC(rows int, acc func(i int) VecPhysical) {
	c := Load(Param("c"), RDI)
	ldc := Load(Param("ldc"), RSI)
	SHLQ(U8(2), ldc)
	for i := 0; i < rows; i++ {
		VMOVUPS(Mem{Base: c}, acc(i))
		if i+1 < rows {
			ADDQ(ldc, c)
		}
	}
}

// tallStoreC stores acc(i) into rows rows of 16 floats of C and returns from the kernel.
func tallStoreC(rows int, acc func(i int) VecPhysical) {
	c := Load(Param("c"), RDI)
	ldc := Load(Param("ldc"), RSI)
	SHLQ(U8(2), ldc)
	for i := 0; i < rows; i++ {
		VMOVUPS(acc(i), Mem{Base: c})
		if i+1 < rows {
			ADDQ(ldc, c)
		}
	}
	VZEROUPPER()
	RET()
}

// tallKernels generates the tall kernels (every kind, 1..tallMR rows, with and without
// prefetch) and the A pack of a full 16-row panel, and returns their Go tables.
func tallKernels() string {
	s := ""
	for _, pf := range []int{0, tallPF} {
		prefix, doc := "microTall", "// avx512Tall: the tall micro-kernels (16 columns) for 1..tallMR rows, by B kind.\n"
		if pf > 0 {
			prefix, doc = "streamPFTall", "// avx512TallPF: avx512Tall prefetching B streamPF bytes ahead.\n"
		}
		table := "avx512Tall"
		if pf > 0 {
			table += "PF"
		}
		s += doc + "var " + table + " = [3][]microFn{\n"
		for kind := range kindNames {
			s += "\t{"
			for rows := 1; rows <= tallMR; rows++ {
				name := fmt.Sprintf("%sAVX512%sR%d", prefix, kindNames[kind], rows)
				microTallAVX512(name, kind, rows, pf)
				s += name + ", "
			}
			s += "},\n"
		}
		s += "}\n\n"
		pdoc := "// avx512PairTall: the tall bf16 pair kernels (16 columns) for 1..tallMR rows.\n"
		if pf > 0 {
			pdoc = "// avx512PairTallPF: avx512PairTall prefetching B streamPF bytes ahead.\n"
		}
		s += pdoc + "var " + fmt.Sprintf("avx512PairTall%s", map[bool]string{true: "PF", false: ""}[pf > 0]) + " = []pairFn{"
		for rows := 1; rows <= tallMR; rows++ {
			name := fmt.Sprintf("%sPairAVX512R%d", prefix, rows)
			microPairTallAVX512(name, rows, pf)
			s += name + ", "
		}
		s += "}\n\n"
	}
	packAAVX512("packA16AVX512", tallMR)
	return s
}

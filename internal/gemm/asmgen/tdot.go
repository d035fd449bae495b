package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// tdotAVX512 generates the transposed decode kernel for y = x·Wᵀ with up to 16 rows of x:
// out[r*16+i] += Σ_p w[r*ldw+p]·xt[p*16+i] for 16 rows r of W (f32) and the 16 lanes i of
// the packed xᵀ. Each W element is broadcast straight from its row (no packing of W), and
// one FMA covers all 16 rows of x, so W streams once at the FMA rate.
func tdotAVX512(name string) {
	TEXT(name, NOSPLIT, "func(k int, xt *float32, w *float32, ldw int, out *float32)")
	declare(name, "(k int, xt *float32, w *float32, ldw int, out *float32)", "")
	k := Load(Param("k"), RCX)
	xt := Load(Param("xt"), RAX)
	w := Load(Param("w"), R8)
	L := Load(Param("ldw"), RDX)
	SHLQ(U8(2), L)
	// Row bases: R8 = row 0, R9 = row 3, R10 = row 6, R11 = row 9, R12 = row 12, R13 = row 15.
	bases := []GPPhysical{R8, R9, R10, R11, R12, R13}
	for i := 1; i < len(bases); i++ {
		LEAQ(Mem{Base: bases[i-1], Index: L, Scale: 2}, bases[i])
		ADDQ(L, bases[i])
	}
	_ = w
	row := func(r, disp int) Mem {
		type loc struct {
			base  int
			scale uint8
		}
		table := map[int]loc{
			0: {0, 0}, 1: {0, 1}, 2: {0, 2}, 4: {0, 4}, 8: {0, 8},
			3: {1, 0}, 5: {1, 2}, 7: {1, 4}, 11: {1, 8},
			6: {2, 0}, 10: {2, 4}, 14: {2, 8},
			9: {3, 0}, 13: {3, 4},
			12: {4, 0}, 15: {5, 0},
		}
		l := table[r]
		m := Mem{Base: bases[l.base], Disp: disp}
		if l.scale != 0 {
			m.Index, m.Scale = L, l.scale
		}
		return m
	}
	acc := func(r int) VecPhysical { return zreg(16 + r) }
	for r := 0; r < 16; r++ {
		VPXORD(acc(r), acc(r), acc(r))
	}
	step := func(u int) {
		x := zreg(u % 8)
		VMOVUPS(Mem{Base: xt, Disp: 64 * u}, x)
		for r := 0; r < 16; r++ {
			VFMADD231PS_BCST(row(r, 4*u), x, acc(r))
		}
	}
	const unroll = 8
	cnt := RBX
	MOVQ(k, cnt)
	SHRQ(U8(3), cnt)
	JZ(LabelRef(name + "_tail"))
	Label(name + "_loop")
	for u := 0; u < unroll; u++ {
		step(u)
	}
	ADDQ(U32(64*unroll), xt)
	for _, b := range bases {
		ADDQ(U8(4*unroll), b)
	}
	DECQ(cnt)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_tail")
	ANDQ(U8(unroll-1), k)
	JZ(LabelRef(name + "_done"))
	Label(name + "_tailloop")
	step(0)
	ADDQ(U8(64), xt)
	for _, b := range bases {
		ADDQ(U8(4), b)
	}
	DECQ(k)
	JNZ(LabelRef(name + "_tailloop"))
	Label(name + "_done")
	out := Load(Param("out"), RDI)
	for r := 0; r < 16; r++ {
		m := Mem{Base: out, Disp: 64 * r}
		VADDPS(m, acc(r), acc(r))
		VMOVUPS(acc(r), m)
	}
	VZEROUPPER()
	RET()
}

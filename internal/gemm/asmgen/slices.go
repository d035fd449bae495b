package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The element-wise kernels of package kernels besides exp, max and scale (exp.go): SwiGLU and
// its backward pass, the sum of products (Dot), RMSNorm's scaling and backward pass, the
// residual add, y += a·x, RoPE's rotation and the AdamW update. Each covers a whole slice of
// any length: blocks of 16 float32, then the rest with its lanes masked (K1), so that an
// element is computed by the same instructions wherever it falls in the slice (batch
// invariance), and the element-wise ones compute what the Go fallback writes in package
// kernels, operation for operation (no FMA where Go rounds a product before adding it).

// sliceKernels generates every kernel of this file.
func sliceKernels() {
	genSwiGLU("swigluAVX512", true)
	genSwiGLU("swigluNoEAVX512", false)
	genSwiGLUBack("swigluBackAVX512")
	genDot("dotAVX512")
	genAdd("addAVX512")
	genAxpy("axpyAVX512")
	genMulScale("mulScaleAVX512")
	genRope("ropeAVX512")
	genDot3F64("dot3F64AVX512")
	genRMSBack("rmsBackAVX512", false)
	genRMSBack("rmsBackAccAVX512", true)
	genAdamW("adamwAVX512")
}

// sliceLoop emits a loop over the n elements of the slices (n in R8, clobbered) in blocks of
// 16 float32: body(false) for every whole block with off (RAX) holding its byte offset, then
// body(true) once if n mod 16 ≠ 0, with K1 holding the rest's lanes. Clobbers RCX and R9.
func sliceLoop(name string, body func(tail bool)) {
	n, off := R8, RAX
	tailMask(n)
	ANDQ(I8(-16), n)
	SHLQ(U8(2), n) // bytes of the whole blocks
	XORQ(off, off)
	TESTQ(n, n)
	JZ(LabelRef(name + "_tail"))
	Label(name + "_loop")
	body(false)
	ADDQ(U8(64), off)
	CMPQ(off, n)
	JB(LabelRef(name + "_loop"))
	Label(name + "_tail")
	TESTQ(RCX, RCX)
	JZ(LabelRef(name + "_done"))
	body(true)
	Label(name + "_done")
}

// tailMask sets RCX = n mod 16 and K1 = its lanes, (1 << RCX) − 1; clobbers R9.
func tailMask(n Register) {
	MOVQ(n, RCX)
	ANDQ(U8(15), RCX)
	MOVL(U32(1), R9L)
	SHLL(CL, R9L)
	DECL(R9L)
	KMOVW(R9L, K1)
}

// at is element block off of the slice at p.
func at(p Register) Mem { return Mem{Base: p, Index: RAX, Scale: 1} }

// load loads 16 float32 at m into z (the tail's lanes only, zeroing the others, when tail).
func load(m Mem, z VecPhysical, tail bool) {
	if tail {
		VMOVUPS_Z(m, K1, z)
	} else {
		VMOVUPS(m, z)
	}
}

// store stores 16 float32 of z at m (the tail's lanes only when tail).
func store(z VecPhysical, m Mem, tail bool) {
	if tail {
		VMOVUPS(z, K1, m)
	} else {
		VMOVUPS(z, m)
	}
}

// constF32 broadcasts the float32 constant c (a read-only datum name) into z.
func constF32(name string, c float32, z VecPhysical) {
	g := GLOBL(name, RODATA|NOPTR)
	DATA(0, U32(math.Float32bits(c))) // the bit pattern: the assembler reads float literals as float64
	VBROADCASTSS(g, z)
}

// expRegs are the registers of the exponential's constants (expConsts) and of its operand.
type expRegs struct {
	a, b, lo, hi, log2e, ln2hi, ln2lo, first VecPhysical
	rest                                     []VecPhysical
}

// expConsts loads the constants of e^(a·x+b) in the registers of expAffineAVX512 (exp.go):
// a and b into Z20 and Z21, the clamp bounds, log2(e), ln2 in two parts and the Horner
// coefficients into Z22–Z31 and Z18 (Z18 holds 1).
func expConsts(name string, a, b float32) expRegs {
	consts := []float32{a, b, -104, 89, 1.44269504088896341, 0.693359375, -2.12194440e-4,
		1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1}
	regs := []VecPhysical{Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31, Z18}
	for i, c := range consts {
		constF32(fmt.Sprintf("%s_c%d", name, i), c, regs[i])
	}
	return expRegs{a: regs[0], b: regs[1], lo: regs[2], hi: regs[3], log2e: regs[4], ln2hi: regs[5],
		ln2lo: regs[6], first: regs[7], rest: []VecPhysical{regs[8], regs[9], regs[10], regs[11], regs[12], regs[12]}}
}

// expLanes sets p = e^(a·x+b) lane by lane, clobbering x and t: the instructions of
// expAffineAVX512's loop (exp.go) and of the fused SwiGLU, so that the two give the same bits
// (TestSwiGLUKeepsExp checks it).
func expLanes(r expRegs, x, t, p VecPhysical) {
	VFMADD132PS(r.a, r.b, x) // x = x·a + b
	VMAXPS(r.lo, x, x)
	VMINPS(r.hi, x, x)
	VMULPS(r.log2e, x, t)
	VRNDSCALEPS(U8(0), t, t)    // n, to nearest
	VFNMADD231PS(r.ln2hi, t, x) // r = x - n·ln2hi
	VFNMADD231PS(r.ln2lo, t, x) // r -= n·ln2lo
	VMOVAPS(r.first, p)
	for _, c := range r.rest {
		VFMADD132PS(x, c, p) // p = p·r + c
	}
	VSCALEFPS(t, p, p) // p·2^n
}

// genSwiGLU generates func name(n int, out, e, gate, up *float32) (withE) or
// func name(n int, out, gate, up *float32): e = e^(−g) (stored when withE) and
// out = g/(1+e)·u, in one pass (out may alias gate).
func genSwiGLU(name string, withE bool) {
	sig := "(n int, out, gate, up *float32)"
	if withE {
		sig = "(n int, out, e, gate, up *float32)"
	}
	TEXT(name, NOSPLIT, "func"+sig)
	declare(name, sig, "")
	Load(Param("n"), R8)
	out := Load(Param("out"), RDI)
	var e Register
	if withE {
		e = Load(Param("e"), RDX)
	}
	gate := Load(Param("gate"), RSI)
	up := Load(Param("up"), RBX)
	r := expConsts(name, -1, 0)
	one := Z18
	g, u, x, t, p, q := Z0, Z1, Z3, Z4, Z5, Z6
	sliceLoop(name, func(tail bool) {
		load(at(gate), g, tail)
		load(at(up), u, tail)
		VMOVAPS(g, x)
		expLanes(r, x, t, p)
		if withE {
			store(p, at(e), tail)
		}
		VADDPS(one, p, q) // 1 + e
		VDIVPS(q, g, q)   // g/(1+e)
		VMULPS(u, q, q)
		store(q, at(out), tail)
	})
	VZEROUPPER()
	RET()
}

// genSwiGLUBack generates func swigluBackAVX512(n int, dg, du, dy, gate, up, e *float32):
// the gradients of out = silu(g)·u given dy and e = e^(−g): with s = 1/(1+e),
// du = dy·g·s and dg = dy·u·s·(1 + g·(1−s)), left to right.
func genSwiGLUBack(name string) {
	const sig = "(n int, dg, du, dy, gate, up, e *float32)"
	TEXT(name, NOSPLIT, "func"+sig)
	declare(name, sig, "")
	Load(Param("n"), R8)
	dg := Load(Param("dg"), RDI)
	du := Load(Param("du"), RSI)
	dy := Load(Param("dy"), RDX)
	gate := Load(Param("gate"), RBX)
	up := Load(Param("up"), R10)
	e := Load(Param("e"), R11)
	one := Z18
	constF32(name+"_one", 1, one)
	d, g, u, s, t, w := Z0, Z1, Z2, Z3, Z4, Z5
	sliceLoop(name, func(tail bool) {
		load(at(e), s, tail)
		load(at(dy), d, tail)
		load(at(gate), g, tail)
		load(at(up), u, tail)
		VADDPS(one, s, s)
		VDIVPS(s, one, s) // s = 1/(1+e)
		VMULPS(g, d, t)
		VMULPS(s, t, t)
		store(t, at(du), tail)
		VSUBPS(s, one, w) // 1 − s
		VMULPS(w, g, w)
		VADDPS(one, w, w) // 1 + g·(1−s)
		VMULPS(u, d, t)
		VMULPS(s, t, t)
		VMULPS(w, t, t)
		store(t, at(dg), tail)
	})
	VZEROUPPER()
	RET()
}

// genDot generates func dotAVX512(n int, a, b *float32) float32: Σ a[i]·b[i] in four
// accumulators of 16 lanes (blocks of 64), then single blocks into the first and the masked
// rest into the second, summed (0+1)+(2+3) and then lane by lane: the same order for a given
// n wherever the slices lie.
func genDot(name string) {
	TEXT(name, NOSPLIT, "func(n int, a, b *float32) float32")
	declare(name, "(n int, a, b *float32) float32", "")
	n := Load(Param("n"), R8)
	a := Load(Param("a"), RSI)
	b := Load(Param("b"), RDI)
	off := RAX
	for i := 0; i < 4; i++ {
		VPXORD(zreg(i), zreg(i), zreg(i))
	}
	tailMask(n)
	MOVQ(n, R10)
	ANDQ(I8(-64), R10)
	SHLQ(U8(2), R10) // bytes of the blocks of 64
	ANDQ(I8(-16), n)
	SHLQ(U8(2), n) // bytes of the whole blocks of 16
	XORQ(off, off)
	TESTQ(R10, R10)
	JZ(LabelRef(name + "_16"))
	Label(name + "_loop64")
	for i := 0; i < 4; i++ {
		VMOVUPS(Mem{Base: a, Index: off, Scale: 1, Disp: 64 * i}, zreg(4+i))
		VFMADD231PS(Mem{Base: b, Index: off, Scale: 1, Disp: 64 * i}, zreg(4+i), zreg(i))
	}
	ADDQ(U32(256), off)
	CMPQ(off, R10)
	JB(LabelRef(name + "_loop64"))
	Label(name + "_16")
	CMPQ(off, n)
	JAE(LabelRef(name + "_tail"))
	VMOVUPS(at(a), Z4)
	VFMADD231PS(at(b), Z4, Z0)
	ADDQ(U8(64), off)
	JMP(LabelRef(name + "_16"))
	Label(name + "_tail")
	TESTQ(RCX, RCX)
	JZ(LabelRef(name + "_sum"))
	VMOVUPS_Z(at(a), K1, Z4)
	VMOVUPS_Z(at(b), K1, Z5)
	VFMADD231PS(Z5, Z4, Z1)
	Label(name + "_sum")
	returnSum4()
}

// genAdd generates func addAVX512(n int, dst, src *float32): dst[i] += src[i].
func genAdd(name string) {
	TEXT(name, NOSPLIT, "func(n int, dst, src *float32)")
	declare(name, "(n int, dst, src *float32)", "")
	Load(Param("n"), R8)
	dst := Load(Param("dst"), RDI)
	src := Load(Param("src"), RSI)
	sliceLoop(name, func(tail bool) {
		load(at(dst), Z0, tail)
		load(at(src), Z1, tail)
		VADDPS(Z1, Z0, Z0)
		store(Z0, at(dst), tail)
	})
	VZEROUPPER()
	RET()
}

// genAxpy generates func axpyAVX512(n int, alpha float32, x, y *float32):
// y[i] += alpha·x[i], the product rounded before the add (as Go computes it).
func genAxpy(name string) {
	TEXT(name, NOSPLIT, "func(n int, alpha float32, x, y *float32)")
	declare(name, "(n int, alpha float32, x, y *float32)", "")
	Load(Param("n"), R8)
	VBROADCASTSS(Load(Param("alpha"), X2), Z2)
	x := Load(Param("x"), RSI)
	y := Load(Param("y"), RDI)
	sliceLoop(name, func(tail bool) {
		load(at(x), Z0, tail)
		load(at(y), Z1, tail)
		VMULPS(Z2, Z0, Z0)
		VADDPS(Z0, Z1, Z1)
		store(Z1, at(y), tail)
	})
	VZEROUPPER()
	RET()
}

// genMulScale generates func mulScaleAVX512(n int, out, x, w *float32, s float32):
// out[i] = x[i]·s·w[i], left to right (RMSNorm's scaling; out may alias x).
func genMulScale(name string) {
	TEXT(name, NOSPLIT, "func(n int, out, x, w *float32, s float32)")
	declare(name, "(n int, out, x, w *float32, s float32)", "")
	Load(Param("n"), R8)
	out := Load(Param("out"), RDI)
	x := Load(Param("x"), RSI)
	w := Load(Param("w"), RDX)
	VBROADCASTSS(Load(Param("s"), X2), Z2)
	sliceLoop(name, func(tail bool) {
		load(at(x), Z0, tail)
		load(at(w), Z1, tail)
		VMULPS(Z2, Z0, Z0)
		VMULPS(Z1, Z0, Z0)
		store(Z0, at(out), tail)
	})
	VZEROUPPER()
	RET()
}

// genRope generates func ropeAVX512(n int, lo, hi, c, s *float32, sgn float32): with
// a = lo[i], b = hi[i] and t = sgn·s[i] (sgn ±1), lo[i] = a·c[i] − b·t and
// hi[i] = b·c[i] + a·t, each product rounded (RoPE's rotation; sgn −1 is the inverse).
func genRope(name string) {
	TEXT(name, NOSPLIT, "func(n int, lo, hi, c, s *float32, sgn float32)")
	declare(name, "(n int, lo, hi, c, s *float32, sgn float32)", "")
	Load(Param("n"), R8)
	lo := Load(Param("lo"), RDI)
	hi := Load(Param("hi"), RSI)
	c := Load(Param("c"), RDX)
	s := Load(Param("s"), RBX)
	VBROADCASTSS(Load(Param("sgn"), X8), Z8)
	a, b, cv, sv := Z0, Z1, Z2, Z3
	sliceLoop(name, func(tail bool) {
		load(at(lo), a, tail)
		load(at(hi), b, tail)
		load(at(c), cv, tail)
		load(at(s), sv, tail)
		VMULPS(Z8, sv, sv)
		VMULPS(cv, a, Z4) // a·c
		VMULPS(sv, b, Z5) // b·t
		VSUBPS(Z5, Z4, Z4)
		VMULPS(cv, b, Z6) // b·c
		VMULPS(sv, a, Z7) // a·t
		VADDPS(Z7, Z6, Z6)
		store(Z4, at(lo), tail)
		store(Z6, at(hi), tail)
	})
	VZEROUPPER()
	RET()
}

// widen converts the 16 float32 of z into float64: the low 8 into lo, the high 8 into hi.
func widen(z, lo, hi VecPhysical) {
	VEXTRACTF64X4(U8(1), z, hi.AsY())
	VCVTPS2PD(z.AsY(), lo)
	VCVTPS2PD(hi.AsY(), hi)
}

// narrow rounds the float64 of lo and hi to float32 into z (lo's in the low 8 lanes); clobbers hi.
func narrow(lo, hi, z VecPhysical) {
	VCVTPD2PS(hi, hi.AsY())
	VCVTPD2PS(lo, z.AsY())
	VINSERTF64X4(U8(1), hi.AsY(), z, z)
}

// genDot3F64 generates func dot3F64AVX512(n int, a, b, c *float32) float64:
// Σ a[i]·b[i]·c[i] in float64 (a·b is exact, its product with c fused into the sum), in 16
// lanes summed at the end: the same order for a given n.
func genDot3F64(name string) {
	TEXT(name, NOSPLIT, "func(n int, a, b, c *float32) float64")
	declare(name, "(n int, a, b, c *float32) float64", "")
	Load(Param("n"), R8)
	a := Load(Param("a"), RSI)
	b := Load(Param("b"), RDI)
	c := Load(Param("c"), RDX)
	VPXORD(Z16, Z16, Z16)
	VPXORD(Z17, Z17, Z17)
	sliceLoop(name, func(tail bool) {
		load(at(a), Z0, tail)
		load(at(b), Z1, tail)
		load(at(c), Z2, tail)
		widen(Z0, Z3, Z4)
		widen(Z1, Z5, Z6)
		widen(Z2, Z7, Z8)
		VMULPD(Z5, Z3, Z3)
		VMULPD(Z6, Z4, Z4)
		VFMADD231PD(Z7, Z3, Z16)
		VFMADD231PD(Z8, Z4, Z17)
	})
	VADDPD(Z17, Z16, Z0)
	VEXTRACTF64X4(U8(1), Z0, Y1)
	VADDPD(Y1, Y0, Y0)
	VEXTRACTF128(U8(1), Y0, X1)
	VADDPD(X1, X0, X0)
	VHADDPD(X0, X0, X0)
	Store(X0, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// genRMSBack generates func name(n int, dx, dy, x, w *float32, inv, k float64): in
// float64, v = inv·dy[i]·w[i] − k·x[i] rounded to float32, then dx[i] = v (or dx[i] += v in
// float32 when acc): RMSNorm's backward pass given the row's scale and k (dx may alias dy).
func genRMSBack(name string, acc bool) {
	const sig = "(n int, dx, dy, x, w *float32, inv, k float64)"
	TEXT(name, NOSPLIT, "func"+sig)
	declare(name, sig, "")
	Load(Param("n"), R8)
	dx := Load(Param("dx"), RDI)
	dy := Load(Param("dy"), RSI)
	x := Load(Param("x"), RDX)
	w := Load(Param("w"), RBX)
	VBROADCASTSD(Load(Param("inv"), X2), Z20)
	VBROADCASTSD(Load(Param("k"), X3), Z21)
	sliceLoop(name, func(tail bool) {
		load(at(dy), Z0, tail)
		load(at(w), Z1, tail)
		load(at(x), Z2, tail)
		widen(Z0, Z3, Z4)
		widen(Z1, Z5, Z6)
		widen(Z2, Z7, Z8)
		VMULPD(Z20, Z3, Z3) // inv·dy
		VMULPD(Z20, Z4, Z4)
		VMULPD(Z5, Z3, Z3) // ·w
		VMULPD(Z6, Z4, Z4)
		VMULPD(Z21, Z7, Z7) // k·x
		VMULPD(Z21, Z8, Z8)
		VSUBPD(Z7, Z3, Z3)
		VSUBPD(Z8, Z4, Z4)
		narrow(Z3, Z4, Z9)
		if acc {
			load(at(dx), Z10, tail)
			VADDPS(Z9, Z10, Z9)
		}
		store(Z9, at(dx), tail)
	})
	VZEROUPPER()
	RET()
}

// genAdamW generates func adamwAVX512(n int, p, grad, m, v *float32, k *float32): AdamW's
// update of n parameters in float32 in PyTorch's order, k = [1−β1, β2, 1−β2, √(1−β2ᵗ),
// lr/(1−β1ᵗ), decay, ε]: m += (1−β1)·(g − m), v = v·β2 + (1−β2)·g·g,
// p = p·decay − step·(m/(√v/√(1−β2ᵗ) + ε)), each operation rounded as Go's (√ correctly
// rounded, as float32(math.Sqrt) of a float32 is).
func genAdamW(name string) {
	const sig = "(n int, p, grad, m, v *float32, k *float32)" // not g: the assembler's name for a register
	TEXT(name, NOSPLIT, "func"+sig)
	declare(name, sig, "")
	Load(Param("n"), R8)
	p := Load(Param("p"), RDI)
	g := Load(Param("grad"), RSI)
	m := Load(Param("m"), RDX)
	v := Load(Param("v"), RBX)
	k := Load(Param("k"), R10)
	w1, b2, w2, bc2, step, decay, eps := Z25, Z26, Z27, Z28, Z29, Z30, Z31
	for i, z := range []VecPhysical{w1, b2, w2, bc2, step, decay, eps} {
		VBROADCASTSS(Mem{Base: k, Disp: 4 * i}, z)
	}
	gv, mv, vv, pv, t, u := Z0, Z1, Z2, Z3, Z4, Z5
	sliceLoop(name, func(tail bool) {
		load(at(g), gv, tail)
		load(at(m), mv, tail)
		load(at(v), vv, tail)
		load(at(p), pv, tail)
		VSUBPS(mv, gv, t) // g − m
		VMULPS(t, w1, t)
		VADDPS(t, mv, mv) // m
		VMULPS(b2, vv, vv)
		VMULPS(gv, w2, t)
		VMULPS(gv, t, t)
		VADDPS(t, vv, vv) // v
		VSQRTPS(vv, u)
		VDIVPS(bc2, u, u)
		VADDPS(eps, u, u) // denominator
		VDIVPS(u, mv, t)
		VMULPS(t, step, t)
		VMULPS(decay, pv, pv)
		VSUBPS(t, pv, pv) // p
		store(mv, at(m), tail)
		store(vv, at(v), tail)
		store(pv, at(p), tail)
	})
	VZEROUPPER()
	RET()
}

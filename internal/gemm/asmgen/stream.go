package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// readSumAVX512 generates the read kernel of the memory bandwidth benchmark: the sum of n
// floats (n a multiple of 64) with four accumulators, every byte read once (STREAM's
// read-only pattern).
func readSumAVX512(name string) {
	TEXT(name, NOSPLIT, "func(n int, p *float32) float32")
	declare(name, "(n int, p *float32) float32", "")
	n := Load(Param("n"), RCX)
	p := Load(Param("p"), RAX)
	for i := 0; i < 4; i++ {
		VPXORD(zreg(i), zreg(i), zreg(i))
	}
	SHRQ(U8(6), n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	for i := 0; i < 4; i++ {
		VADDPS(Mem{Base: p, Disp: 64 * i}, zreg(i), zreg(i))
	}
	ADDQ(U32(256), p)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	returnSum4()
}

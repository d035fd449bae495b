// Command asmgen generates the amd64 assembly kernels of package gemm with avo
// (github.com/mmcloughlin/avo). It lives in its own module so that the main module does not
// depend on avo. Regenerate from this directory with
//
//	go run . -out ../kernels_amd64.s -decl ../kernels_amd64_decl.go
//
// and commit both generated files.
//
// Kernels (all f32 arithmetic; B may be f32, bf16 or f16 and is widened in registers):
//
//   - micro-kernels C[rows×nr] += Ap·B for every row count up to the implementation's MR,
//     where Ap is an A panel packed rows values per depth step and B is read with row stride ldb:
//     AVX-512 nr = 32 (two ZMM per row, MR = 14), AVX2 nr = 16 (two YMM, MR = 6); each element
//     one chain of FMAs in depth order starting from C, whatever the row count (row invariance);
//   - dot kernels out[i][j] = x_i·w_j for up to dotMR rows of x and 4 rows of W, for
//     y = x·Wᵀ, k a multiple of the vector width, and the same over many groups of 4 rows of
//     W per call writing alpha·x_i·w_j (dotRows);
//   - transposing B packs (32 rows of W → a kc×32 panel) and bf16/f16 ↔ f32 conversions;
//   - bf16 pair micro-kernels (AVX512_BF16, bf16.go): C[rows×32] += Ap·B in bf16 arithmetic.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Element kinds of B, in the order of package gemm's elemKind.
var kindNames = []string{"F32", "BF16", "F16"}

const (
	avx512MR    = 14
	avx2MR      = 6
	avx512DotMR = 6
	avx2DotMR   = 3
	panelW      = 32
	// streamMR is the most rows the streaming kernels of decode take. They come in two sets:
	// without software prefetch, and prefetching every line of B streamPF bytes ahead
	// (PREFETCHT0); package gemm picks one per CPU (decodePrefetch). Prefetching 1, 2, 4 or
	// 8 KiB ahead was measured no faster, mostly slower (by up to 40% at 1–2 KiB), than the
	// hardware prefetcher alone on an AMD EPYC (Zen 4) (BenchmarkDecodeBandwidth,
	// 2026-11-25); on an Intel Xeon (Sapphire Rapids class) 4 KiB was the fastest distance,
	// 1.1–1.3× the kernels without (2026-11-27; docs/performance.md).
	streamMR = 4
	streamPF = 4096
)

// decl collects the Go declarations of the generated functions.
var decl bytes.Buffer

func declare(name, sig, doc string) {
	if doc != "" {
		fmt.Fprintf(&decl, "// %s\n//\n", doc)
	}
	fmt.Fprintf(&decl, "//go:noescape\nfunc %s%s\n\n", name, sig)
}

const microSig = "(kc int, a *float32, b unsafe.Pointer, ldb int, c *float32, ldc int)"
const microSigAvo = "func(kc int, a *float32, b *byte, ldb int, c *float32, ldc int)"
const dotSig = "(k, mx int, x *float32, ldx int, w unsafe.Pointer, ldw int, out *float32, ldo int)"
const dotSigAvo = "func(k, mx int, x *float32, ldx int, w *byte, ldw int, out *float32, ldo int)"
const packTSig = "(kc int, src unsafe.Pointer, lds int, dst *float32)"
const packTSigAvo = "func(kc int, src *byte, lds int, dst *float32)"

func main() {
	declOut := flag.String("decl", "", "write the Go declarations of the kernels to this file")
	target := flag.String("target", "gemm", "the package to generate: gemm, or kernels (the element-wise kernels: exp.go, slices.go)")
	flag.Parse()
	ConstraintExpr("amd64,!purego")
	if *target == "kernels" {
		expAffineAVX512("expAffineAVX512")
		maxAVX512("maxAVX512")
		scaleAVX512("scaleAVX512")
		sliceKernels() // slices.go
		Generate()
		writeDecl(*declOut, "kernels", "go run . -target kernels -pkg kernels -out ../../kernels/exp_amd64.s -decl ../../kernels/exp_amd64_decl.go", "")
		return
	}

	var tables bytes.Buffer
	// kindTable writes a Go table, one row per element kind of n kernels: name(kind, i) for
	// i = 1..n, generating each kernel it names. header is the table's doc and declaration.
	kindTable := func(header string, n int, name func(kind, i int) string) {
		tables.WriteString(header + "{\n")
		for kind := range kindNames {
			tables.WriteString("\t{")
			for i := 1; i <= n; i++ {
				fmt.Fprintf(&tables, "%s, ", name(kind, i))
			}
			tables.WriteString("},\n")
		}
		tables.WriteString("}\n\n")
	}
	kernel := func(format string, gen func(name string, kind, i int)) func(kind, i int) string {
		return func(kind, i int) string {
			name := fmt.Sprintf(format, kindNames[kind], i)
			if gen != nil {
				gen(name, kind, i)
			}
			return name
		}
	}
	kindTable("var avx512Micro = [3][]microFn", avx512MR, kernel("microAVX512%sR%d", microAVX512))
	kindTable("// avx512Stream: the micro-kernels of decode (1..streamMR rows), without software\n"+
		"// prefetch (the same kernels as avx512Micro's).\nvar avx512Stream = [3][]microFn", streamMR,
		kernel("microAVX512%sR%d", nil))
	kindTable("// avx512StreamPF: avx512Stream prefetching B streamPF bytes ahead.\nvar avx512StreamPF = [3][]microFn",
		streamMR, kernel("streamPFAVX512%sR%d", func(name string, kind, rows int) { microAVX512PF(name, kind, rows, streamPF) }))
	kindTable("var avx2Micro = [3][]microFn", avx2MR, kernel("microAVX2%sR%d", microAVX2))
	kindTable("var avx512Dot = [3][]dotFn", avx512DotMR, kernel("dotAVX512%sX%d", dotAVX512))
	kindTable("var avx2Dot = [3][]dotFn", avx2DotMR, kernel("dotAVX2%sX%d", dotAVX2))
	kindTable("var avx512DotRows = [3][]dotRowsFn", avx512DotMR, kernel("dotRowsAVX512%sX%d", dotRowsAVX512))
	kindTable("var avx2DotRows = [3][]dotRowsFn", avx2DotMR, kernel("dotRowsAVX2%sX%d", dotRowsAVX2))
	tables.WriteString("var avx512PackT = [3]packTFn{")
	for kind := range kindNames {
		name := fmt.Sprintf("packTAVX512%s", kindNames[kind])
		packTAVX512(name, kind)
		fmt.Fprintf(&tables, "%s, ", name)
	}
	tables.WriteString("}\n\nvar avx2PackT = [3]packTFn{")
	for kind := range kindNames {
		name := fmt.Sprintf("packTAVX2%s", kindNames[kind])
		packTAVX2(name, kind)
		fmt.Fprintf(&tables, "%s, ", name)
	}
	tables.WriteString("}\n\n")
	tables.WriteString(pairKernels())
	tables.WriteString(tallKernels())
	packRowAVX512("packRowBF16AVX512")
	packAPairsAVX512("packAPairs14AVX512", avx512MR)
	packAPairsAVX512("packAPairs16AVX512", tallMR)
	readSumAVX512("readSumAVX512")
	packAAVX2("packAAVX2")
	packAAVX512("packAAVX512", avx512MR)
	packATAVX512("packATAVX512")
	convertAVX512()
	convertAVX2()

	Generate()

	writeDecl(*declOut, "gemm", "go run . -out ../kernels_amd64.s -decl ../kernels_amd64_decl.go",
		fmt.Sprintf("const (\n\tavx512MR = %d\n\tavx2MR = %d\n\tavx512DotMR = %d\n\tavx2DotMR = %d\n\tstreamMR = %d\n\ttallMR = %d\n)\n\n", avx512MR, avx2MR, avx512DotMR, avx2DotMR, streamMR, tallMR)+tables.String()+"\n")
}

// writeDecl writes the Go declarations of the generated functions (and any extra source) of
// package pkg to path, if path is not empty.
func writeDecl(path, pkg, command, extra string) {
	if path == "" {
		return
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "// Code generated by command: %s. DO NOT EDIT.\n\n", command)
	fmt.Fprintf(&out, "//go:build amd64 && !purego\n\npackage %s\n\n", pkg)
	if strings.Contains(decl.String(), "unsafe.") || strings.Contains(extra, "unsafe.") {
		out.WriteString("import \"unsafe\"\n\n")
	}
	out.WriteString(extra)
	out.Write(decl.Bytes())
	src, err := format.Source(out.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, src, 0o644); err != nil {
		log.Fatal(err)
	}
}

// loadB loads one B row segment of 16 (zmm) or 8 (ymm) elements at m into v, widening
// 16-bit kinds. For f32 it is a plain load.
func loadB(kind int, m Mem, v VecPhysical, zmm bool) {
	switch kind {
	case 0:
		VMOVUPS(m, v)
	case 1:
		VPMOVZXWD(m, v)
		VPSLLD(U8(16), v, v)
	case 2:
		VCVTPH2PS(m, v)
	}
}

// eltSize returns the byte size of a B element of kind.
func eltSize(kind int) int {
	if kind == 0 {
		return 4
	}
	return 2
}

// microAVX512 generates C[rows×32] += Ap·B: the accumulators Z4..Z31 start from C and each
// element is one chain of FMAs in depth order, whatever the row count (so that a row's sums
// do not depend on the rows beside it, nor on how the depth is split into blocks: package
// gemm's row invariance). Below 2 rows the chains are latency-bound, which decode's
// products (weights read from memory) do not notice.
func microAVX512(name string, kind, rows int) { microAVX512PF(name, kind, rows, 0) }

// microAVX512PF is microAVX512 that, when pf > 0, prefetches every cache line of B pf bytes
// ahead (B contiguous: a packed panel, ldb = 32): the streaming kernels of decode, whose
// weights come from memory once, across page boundaries where the hardware prefetcher stops.
func microAVX512PF(name string, kind, rows, pf int) {
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
	acc := func(i, h int) VecPhysical { return zreg(4 + i*2 + h) }
	// bf16 with few rows (decode's streaming kernels): a B row of 32 values is widened by
	// interleaving it with zeros (each value becomes the high half of an f32), two shuffles
	// with the row as a memory operand, instead of two widening loads and two shifts. The
	// accumulators then hold the columns in the unpack's order (128-bit lanes of 4 columns:
	// 0, 8, 16, 24 and 4, 12, 20, 28): C is loaded into them in that order and put back in
	// order before it is stored. Z31 holds the zeros (free below 7 rows).
	unpack := kind == 1 && rows <= 6
	loadC(rows, 64, acc, unpack)
	if unpack {
		VPXORD(Z31, Z31, Z31)
	}
	step := func(aOff int) {
		if unpack {
			VPUNPCKLWD(Mem{Base: b}, Z31, Z0)
			VPUNPCKHWD(Mem{Base: b}, Z31, Z1)
		} else {
			loadB(kind, Mem{Base: b}, Z0, true)
			loadB(kind, Mem{Base: b, Disp: 16 * esz}, Z1, true)
		}
		for i := 0; i < rows; i++ {
			t := Z2
			if i%2 == 1 {
				t = Z3
			}
			VBROADCASTSS(Mem{Base: a, Disp: aOff + 4*i}, t)
			VFMADD231PS(Z0, t, acc(i, 0))
			VFMADD231PS(Z1, t, acc(i, 1))
		}
		ADDQ(ldb, b)
	}
	// Main loop: unrolled by 4 depth steps. The packed A panel holds rows values per depth
	// step.
	aStep := 4 * rows
	prefetch := func() { PREFETCHT0(Mem{Base: a, Disp: aStep * 8}) }
	if pf > 0 {
		prefetch = func() {
			for line := 0; line < 4*32*esz; line += 64 {
				PREFETCHT0(Mem{Base: b, Disp: pf + line})
			}
		}
	}
	unrolledLoop(name, kc, prefetch,
		func(u int) { step(aStep * u) }, func(steps int) { ADDQ(U32(aStep*steps), a) })
	if unpack {
		for i := 0; i < rows; i++ {
			lo, hi := acc(i, 0), acc(i, 1)
			VSHUFF32X4(U8(0x44), hi, lo, Z0) // lanes lo0 lo1 hi0 hi1
			VSHUFF32X4(U8(0xEE), hi, lo, Z1) // lo2 lo3 hi2 hi3
			VSHUFF32X4(U8(0xD8), Z0, Z0, lo) // lo0 hi0 lo1 hi1: columns 0..15
			VSHUFF32X4(U8(0xD8), Z1, Z1, hi) // lo2 hi2 lo3 hi3: columns 16..31
		}
	}
	storeC(rows, 64, acc)
}

// microAVX2 generates C[rows×16] += Ap·B with YMM registers: accumulators Y4..Y15, starting
// from C, one chain of FMAs per element in depth order (as microAVX512).
func microAVX2(name string, kind, rows int) {
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
	acc := func(i, h int) VecPhysical { return yreg(4 + i*2 + h) }
	loadC(rows, 32, acc, false)
	step := func(aOff int) {
		loadB(kind, Mem{Base: b}, Y0, false)
		loadB(kind, Mem{Base: b, Disp: 8 * esz}, Y1, false)
		for i := 0; i < rows; i++ {
			t := Y2
			if i%2 == 1 {
				t = Y3
			}
			VBROADCASTSS(Mem{Base: a, Disp: aOff + 4*i}, t)
			VFMADD231PS(Y0, t, acc(i, 0))
			VFMADD231PS(Y1, t, acc(i, 1))
		}
		ADDQ(ldb, b)
	}
	aStep := 4 * rows
	unrolledLoop(name, kc, nil, func(u int) { step(aStep * u) }, func(steps int) { ADDQ(U32(aStep*steps), a) })
	storeC(rows, 32, acc)
}

// unrolledLoop emits a loop over n steps (n in a register, clobbered): the main loop runs
// body(0..3) and advance(4) per iteration (after prefetch, if not nil), the tail loop
// body(0) and advance(1) for the last n mod 4 steps; R8 counts the main loop.
func unrolledLoop(name string, n Register, prefetch func(), body func(u int), advance func(steps int)) {
	const unroll = 4
	cnt := R8
	MOVQ(n, cnt)
	SHRQ(U8(2), cnt)
	JZ(LabelRef(name + "_tail"))
	Label(name + "_loop")
	if prefetch != nil {
		prefetch()
	}
	for u := 0; u < unroll; u++ {
		body(u)
	}
	advance(unroll)
	DECQ(cnt)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_tail")
	ANDQ(U32(unroll-1), n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_tailloop")
	body(0)
	advance(1)
	DECQ(n)
	JNZ(LabelRef(name + "_tailloop"))
	Label(name + "_done")
}

// loadC loads each of rows rows of C (parameters c and ldc; the two halves vecBytes apart)
// into the accumulators acc(i, 0..1), the kernels' starting sums. With unpack (ZMM only), in
// the column order of the bf16 unpacking of microAVX512PF: acc(i, 0) holds the 128-bit lanes
// of columns 0-3, 8-11, 16-19, 24-27 and acc(i, 1) those of 4-7, 12-15, 20-23, 28-31
// (Z0 and Z1 as scratch). Clobbers RDI and RSI.
func loadC(rows, vecBytes int, acc func(i, h int) VecPhysical, unpack bool) {
	c := Load(Param("c"), RDI)
	ldc := Load(Param("ldc"), RSI)
	SHLQ(U8(2), ldc)
	for i := 0; i < rows; i++ {
		if unpack {
			VMOVUPS(Mem{Base: c}, Z0)
			VMOVUPS(Mem{Base: c, Disp: 64}, Z1)
			VSHUFF32X4(U8(0x88), Z1, Z0, acc(i, 0)) // lanes 0, 2 of Z0, then of Z1
			VSHUFF32X4(U8(0xDD), Z1, Z0, acc(i, 1)) // lanes 1, 3
		} else {
			for h := 0; h < 2; h++ {
				VMOVUPS(Mem{Base: c, Disp: vecBytes * h}, acc(i, h))
			}
		}
		if i+1 < rows {
			ADDQ(ldc, c)
		}
	}
}

// storeC stores the accumulators acc(i, 0..1) of each of rows rows into C (parameters c and
// ldc; the two halves vecBytes apart) and returns from the kernel.
func storeC(rows, vecBytes int, acc func(i, h int) VecPhysical) {
	c := Load(Param("c"), RDI)
	ldc := Load(Param("ldc"), RSI)
	SHLQ(U8(2), ldc)
	for i := 0; i < rows; i++ {
		for h := 0; h < 2; h++ {
			VMOVUPS(acc(i, h), Mem{Base: c, Disp: vecBytes * h})
		}
		if i+1 < rows {
			ADDQ(ldc, c)
		}
	}
	VZEROUPPER()
	RET()
}

// hsum4Y stores [Σy0, Σy1, Σy2, Σy3] (sums of the 8 lanes of each) at m; clobbers y0, y2 and X3.
func hsum4Y(y0, y1, y2, y3 VecPhysical, m Mem) {
	hsum4(y0, y1, y2, y3)
	VMOVUPS(y0.AsX(), m)
}

// hsum4YScaled stores alpha·[Σy0, Σy1, Σy2, Σy3] at m, alpha broadcast in the XMM register
// alpha; clobbers y0, y2 and X3.
func hsum4YScaled(y0, y1, y2, y3, alpha VecPhysical, m Mem) {
	hsum4(y0, y1, y2, y3)
	VMULPS(alpha, y0.AsX(), y0.AsX())
	VMOVUPS(y0.AsX(), m)
}

// hsum4 leaves [Σy0, Σy1, Σy2, Σy3] in y0's low 128 bits; clobbers y2 and X3.
func hsum4(y0, y1, y2, y3 VecPhysical) {
	VHADDPS(y1, y0, y0) // a01 a23 b01 b23 | a45 a67 b45 b67
	VHADDPS(y3, y2, y2) // c.. d..
	VHADDPS(y2, y0, y0) // a0123 b0123 c0123 d0123 | a4567 b4567 c4567 d4567
	VEXTRACTF128(U8(1), y0, X3)
	VADDPS(X3, y0.AsX(), y0.AsX())
}

func zreg(i int) VecPhysical {
	return []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
		Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}[i]
}

func yreg(i int) VecPhysical {
	return []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}[i]
}

// Package gemm provides single-precision general matrix multiplication for Hone's CPU engine.
//
// Matrices are row-major. Sgemm computes C = alpha*op(A)*op(B) + beta*C on f32 operands;
// GemmHalfB does the same with a B operand (typically weights) stored as bf16 or f16 bit
// patterns, widened to f32 by the kernels (or, for a transposed B, while packing) so that
// weights stay 16-bit in memory. PackB
// prepacks a B operand once (for weights used by many calls) and GemmPacked multiplies by it.
//
// On amd64 the micro-kernels are Go assembly (AVX-512 or AVX2+FMA, chosen at run time from
// the CPU's features); elsewhere, or with the build tag purego, a pure-Go implementation is
// used. Large products are cache-blocked, packed and spread over a pool of worker goroutines
// sized by SetThreads (default runtime.GOMAXPROCS(0)). A transposed B (y = x·Wᵀ) is
// multiplied by dot-product kernels that stream B without packing it.
//
// Row invariance: a row of C depends only on its row of op(A), its row of C (beta), B, alpha
// and beta, bit for bit: not on the number of rows in the call, the row's position among them,
// the thread count, or which path or kernel set (decode's streaming kernels and batched
// decode's tall ones, with or without software prefetch) the row count selects. Every path sums
// each element in one order: with B not transposed or prepacked, one chain of multiply-adds in
// depth order from C's value (the micro-kernels start from C, one accumulator per element, and
// edge tiles start from C's values too); with a transposed B (Sgemm and GemmHalfB with transB),
// the dot kernels' order (lanes over the depth, then a fixed reduction) at every row count, or,
// in the pure-Go implementation, the micro-kernels' chain (a loop over W in place for up to 16
// rows, the blocked path above: its Go dot loops were slower). So a model's output for a
// sequence does not depend on what else shares its forward pass, as long as the caller's own
// choices (bf16 or f32 arithmetic: BF16PairRows) do not depend on the row count either
// (docs/engine.md, "Batch invariance"). TestRowInvariance checks every implementation but
// AMX's, which no test machine has had: a pair-packed B runs on AMX tiles at every row count,
// its edge tiles starting from C as the full ones do.
//
// Invalid arguments (negative sizes, leading dimensions smaller than a row, slices too short)
// cause a panic whose message names the offending parameter, as in BLAS.
package gemm

import "fmt"

// Half is the 16-bit encoding of a half-precision B operand.
type Half uint8

const (
	// BF16 is bfloat16: the upper 16 bits of an IEEE-754 binary32.
	BF16 Half = iota + 1
	// F16 is IEEE-754 binary16.
	F16
)

// String returns "bf16" or "f16".
func (h Half) String() string {
	switch h {
	case BF16:
		return "bf16"
	case F16:
		return "f16"
	}
	return fmt.Sprintf("Half(%d)", uint8(h))
}

// Sgemm computes C = alpha*op(A)*op(B) + beta*C on row-major f32 matrices;
// op(A) is m×k, op(B) is k×n, C is m×n with leading dimensions lda, ldb, ldc.
// op(X) is X when the matching trans flag is false and Xᵀ when it is true, so A is stored
// m×k (k×m if transA) and B is stored k×n (n×k if transB). When beta is 0, C is not read
// (NaN or Inf already in C does not propagate).
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkArgs("Sgemm", transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	run(&problem{
		transA: transA, transB: transB, m: m, n: n, k: k,
		alpha: alpha, a: a, lda: lda,
		bKind: kindF32, b32: b, ldb: ldb,
		beta: beta, c: c, ldc: ldc,
	})
}

// SgemmBlocked is Sgemm on the cache-blocked path (op(A) and op(B) packed, the micro-kernels)
// whatever the shape: for products of many rows by a transposed B of short depth (training's
// attention scores, 64 deep), where Sgemm's dot kernels, which keep a row's bits whatever the
// number of rows, spend about as much on their reductions as on the multiply-adds. Each
// element is one chain of multiply-adds in depth order from beta·C: for a transposed B not
// Sgemm's bits, and row-invariant among SgemmBlocked's products only.
func SgemmBlocked(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkArgs("SgemmBlocked", transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	p := problem{
		transA: transA, transB: transB, m: m, n: n, k: k,
		alpha: alpha, a: a, lda: lda,
		bKind: kindF32, b32: b, ldb: ldb,
		beta: beta, c: c, ldc: ldc,
	}
	if m == 0 || n == 0 || k == 0 || alpha == 0 {
		run(&p) // C = beta·C
		return
	}
	nt := Threads()
	if m*n*k < minParallelWork {
		nt = 1
	}
	runBlocked(current.Load(), &p, nt)
}

// GemmHalfB is Sgemm with B stored as bf16 or f16 bit patterns, widened to f32 by the kernels
// (a transposed B, packed from many rows, is widened while packing).
func GemmHalfB(h Half, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []uint16, ldb int, beta float32, c []float32, ldc int) {
	kind := halfKind(h, "GemmHalfB")
	checkArgs("GemmHalfB", transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	run(&problem{
		transA: transA, transB: transB, m: m, n: n, k: k,
		alpha: alpha, a: a, lda: lda,
		bKind: kind, b16: b, ldb: ldb,
		beta: beta, c: c, ldc: ldc,
	})
}

func halfKind(h Half, fn string) elemKind {
	switch h {
	case BF16:
		return kindBF16
	case F16:
		return kindF16
	}
	panic(fmt.Sprintf("gemm.%s: h: unknown half format %d (want BF16 or F16)", fn, uint8(h)))
}

// checkArgs panics with a message naming the first invalid parameter.
func checkArgs(fn string, transA, transB bool, m, n, k, lenA, lda, lenB, ldb, lenC, ldc int) {
	if m < 0 {
		panic(fmt.Sprintf("gemm.%s: m = %d < 0", fn, m))
	}
	if n < 0 {
		panic(fmt.Sprintf("gemm.%s: n = %d < 0", fn, n))
	}
	if k < 0 {
		panic(fmt.Sprintf("gemm.%s: k = %d < 0", fn, k))
	}
	// Stored shapes: A is rowsA×colsA, B is rowsB×colsB.
	rowsA, colsA := m, k
	if transA {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if transB {
		rowsB, colsB = n, k
	}
	checkMatrix(fn, "a", "lda", rowsA, colsA, lenA, lda)
	checkMatrix(fn, "b", "ldb", rowsB, colsB, lenB, ldb)
	checkMatrix(fn, "c", "ldc", m, n, lenC, ldc)
}

func checkMatrix(fn, name, ldName string, rows, cols, length, ld int) {
	if ld < max(1, cols) {
		panic(fmt.Sprintf("gemm.%s: %s = %d < max(1, %d columns of %s)", fn, ldName, ld, cols, name))
	}
	if rows == 0 || cols == 0 {
		return
	}
	if need := (rows-1)*ld + cols; length < need {
		panic(fmt.Sprintf("gemm.%s: len(%s) = %d < %d needed for %d×%d with %s %d",
			fn, name, length, need, rows, cols, ldName, ld))
	}
}

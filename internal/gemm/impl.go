package gemm

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// elemKind is the element type of a B operand.
type elemKind uint8

const (
	kindF32 elemKind = iota
	kindBF16
	kindF16
)

func (k elemKind) size() uintptr {
	if k == kindF32 {
		return 4
	}
	return 2
}

// tallRows bounds the rows of a panel of A (the tall kernels' 16).
const tallRows = 16

// panelW is the width of every packed B panel (in columns), whatever the implementation:
// packed data stays valid when the implementation changes. Micro-kernels narrower than
// panelW walk a panel in sub-panels of nr columns with row stride panelW.
const panelW = 32

// dotNW is the number of B rows (outputs per x row) one dot-kernel call produces.
const dotNW = 4

// microFn computes C[0:r, 0:nr] += Ap·B where Ap is a packed r×kc panel of A
// (element (i,p) at a[p*r+i]; r is mr for the full kernel, the row count for the
// row-count kernels) and B is kc×nr with element (p,j) at b[p*ldb+j]
// (ldb in elements). The element type of b depends on the function (f32, bf16 or f16).
type microFn func(kc int, a *float32, b unsafe.Pointer, ldb int, c *float32, ldc int)

// dotFn computes out[i*ldo+j] = Σ_p x[i*ldx+p]·w[j*ldw+p] for i < mx and j < dotNW,
// with 1 <= mx <= dotMR. The element type of w depends on the function.
type dotFn func(k, mx int, x *float32, ldx int, w unsafe.Pointer, ldw int, out *float32, ldo int)

// dotRowsFn computes out[i*ldo+4g+j] = alpha·Σ_p x[i*ldx+p]·w[(4g+j)*ldw+p] for i < mx (the
// function's row count), j < dotNW and g < groups (at least 1), k a multiple of the dot
// kernels' vector: the dot kernel's sums, in its order, over many groups of W rows per call.
type dotRowsFn func(k, groups int, x *float32, ldx int, w unsafe.Pointer, ldw int, out *float32, ldo int, alpha float32)

// packTFn packs 32 rows of a row-major matrix (n×k, elements (j,p) at src[j*lds+p]) for
// p in [0,kc) into dst[p*panelW+j]: the transposing B pack of y = x·Wᵀ. The element type
// of src depends on the function; dst is f32.
type packTFn func(kc int, src unsafe.Pointer, lds int, dst *float32)

// impl is one implementation of the kernels.
type impl struct {
	name      string
	mr        int          // rows of the micro tile (and of each packed A panel)
	nr        int          // columns of the micro tile: panelW or panelW/2
	micro     [3]microFn   // by B kind: the full mr-row micro-kernel
	microRows [3][]microFn // by B kind, optional: micro-kernels for 1..mr rows (index rows-1)
	// chainT: y = x·Wᵀ sums each element as the micro-kernels do (one chain in depth order)
	// instead of by the dot kernels (the pure-Go implementation, whose dot loops were
	// slower): runChainT for few rows, the blocked path for more
	chainT bool
	dotMR  int        // most x rows one dot-kernel call handles
	dotVec int        // the dot kernels need k to be a multiple of this
	dot    [3][]dotFn // by B kind: dot kernels for 1..dotMR rows (index mx-1)
	// optional, by B kind: the dot kernels over many groups of dotNW rows of W per call,
	// writing alpha·sum into C (dotRowsFn), for 1..dotMR rows; the same sums as dot
	dotRows [3][]dotRowsFn
	packT   [3]packTFn // by B kind, optional: transposing B pack of a full panel
	// optional A packs: packA a full mr-row panel of a non-transposed A (kc a multiple of
	// 16), packAT a panel of 1..16 rows of a transposed A; both scale by alpha.
	packA  func(kc int, src *float32, lda int, dst *float32, alpha float32)
	packAT func(kc, rows int, src *float32, lda int, dst *float32, alpha float32)
	// optional bf16 pair micro-kernels for 1..len rows (see bf16pairs.go); nil: pure Go.
	pair []pairFn
	amx  bool // pair-packed products run on AMX tiles (runAMX)
	// optional: micro-kernels for 1..len rows for products with few rows whose B comes from
	// memory once (decode), which run over whole packed panels: streamIm is this
	// implementation with them as its row-count kernels (runPacked), pairStream the same
	// for pair-packed B (runPairs).
	streamIm   *impl
	pairStream []pairFn
	// the same kernels prefetching B in software, where the implementation has them; a
	// PrefetchTuner picks between the two sets (decodeTuners)
	streamPF     *impl
	pairStreamPF []pairFn
	// optional: decode's kernels for more rows than the streaming ones take, up to tallIm.mr
	// (batched decode): tallIm is this implementation with tall micro-kernels (16 columns, one
	// accumulator per row, so that every row shares each B vector and B is read once) as its
	// kernels (runPacked), pairTall the same for pair-packed B (runPairs); tallPF and
	// pairTallPF the same prefetching B in software (a PrefetchTuner picks, decodeTuners).
	tallIm, tallPF       *impl
	pairTall, pairTallPF []pairFn
	// optional: dst[q] = bf16(alpha·src[2q]) | bf16(alpha·src[2q+1])<<16 for q < n (n a
	// multiple of 16), rounding to nearest even (subnormals flushed)
	packRow func(n int, src *float32, dst *uint32, alpha float32)
	// optional, by panel rows: packRow for a full panel of that many rows of A (row i at
	// src[i*lda:]) into the pair kernels' layout, dst[q*rows+i] (kp a multiple of 16)
	packAPairs [tallRows + 1]func(kp int, src *float32, lda int, dst *uint32, alpha float32)
}

var (
	impls   []*impl // best first; generic is always last
	current atomic.Pointer[impl]
)

func register(im *impl) {
	impls = append(impls, im)
}

func init() {
	registerNative() // architecture-specific implementations, best first
	register(genericImpl)
	current.Store(impls[0])
}

// Impl returns the name of the implementation in use: "amx" (the AVX-512 kernels with
// pair-packed products on AMX tiles), "avx512", "avx2" or "generic".
func Impl() string { return current.Load().name }

// Impls returns the names of the implementations this CPU and build support, best first.
func Impls() []string {
	names := make([]string, len(impls))
	for i, im := range impls {
		names[i] = im.name
	}
	return names
}

// SetImpl selects an implementation by name (one of Impls()), for tests and benchmarks.
// Calls already running finish with the implementation they started with.
func SetImpl(name string) error {
	for _, im := range impls {
		if im.name == name {
			current.Store(im)
			return nil
		}
	}
	return fmt.Errorf("gemm: implementation %q not available here (have %v)", name, Impls())
}

// decodePrior is the choice of software prefetch in decode's products before a
// PrefetchTuner has measured: the rule measured per CPU vendor (docs/performance.md, "Decode
// prefetch per CPU"): Intel's Xeons prefetch, AMD's EPYCs do not.
var decodePrior bool

// decodeTuners choose, per number of rows (index 0: one row, the batch-1 decode that reads
// the weights at memory speed; 1: several, up to the streaming kernels' four; 2: more, up to
// the tall kernels' 16: batched decode) and kind of B (index elemKind, and tunePairsIdx for
// pair-packed bf16), between decode's kernels with and without software prefetch; nil where
// the implementations have no prefetching kernels. The row counts decide apart: the choice
// that reads one row's weights faster need not be the faster one at four or 16 rows, which
// do four or 16 times the arithmetic per byte.
var decodeTuners [3][4]*PrefetchTuner

const tunePairsIdx = 3

// decodeTuner returns the tuner of a decode product of m rows by weights of the given kind,
// on the tall kernels when tall.
func decodeTuner(kind, m int, tall bool) *PrefetchTuner {
	if tall {
		return decodeTuners[2][kind]
	}
	return decodeTuners[min(m-1, 1)][kind]
}

// tallPrior is the tall kernels' choice of software prefetch before their tuner has measured,
// on every CPU: 16 rows of products stream the weights from memory at 1.25-1.7× the speed with
// it on an AMD EPYC (Zen 5), whose batch-1 decode reads as fast without (docs/performance.md,
// "Batched decode and the bf16 SFT step"), and Intel's Xeons prefetch at one row already.
const tallPrior = true

// newDecodeTuners makes the tuners of one kind of weights, named name ("f32", ...).
func newDecodeTuners(kind int, name string) {
	decodeTuners[0][kind] = NewPrefetchTuner(name, decodePrior)
	decodeTuners[1][kind] = NewPrefetchTuner(name+" rows>1", decodePrior)
	decodeTuners[2][kind] = NewPrefetchTuner(name+" tall", tallPrior)
}

// DecodePrefetchPrior reports the prior of decode's prefetch tuners on this CPU (see
// PrefetchTuner), for the tuners of other packages' decode kernels (package quant).
func DecodePrefetchPrior() bool { return decodePrior }

// cpuVendorName is the CPU's vendor string where the build reads it (set by registerNative).
var cpuVendorName = "unknown"

// LogAttrs describes the kernels this process runs with, as log attributes: the
// implementation, the worker threads, the CPU vendor, the fewest rows from which bf16 weights
// multiply in bf16 arithmetic (BF16PairRows; 0: never, f32 widening), and how decode's
// software prefetch is chosen (PrefetchTuner).
func LogAttrs() []any {
	prefetch := "no prefetching kernels here"
	if t := decodeTuners[0][kindF32]; t != nil {
		prefetch = "measured per kind on the first decode products"
		if t.forced {
			prefetch = fmt.Sprintf("forced %s (HONE_DECODE_PREFETCH)", map[bool]string{true: "on", false: "off"}[t.state.Load() == tuneOn])
		}
	}
	return []any{"kernels", Impl(), "threads", Threads(), "cpu_vendor", cpuVendorName,
		"bf16_arithmetic_from_rows", BF16PairRows(), "decode_prefetch", prefetch}
}

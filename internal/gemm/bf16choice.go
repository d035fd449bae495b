package gemm

import (
	"os"
	"sync"
	"time"
	"unsafe"
)

// The choice between bf16 and f32 arithmetic for bf16 weights. Both multiply the same 16-bit
// weights (PackBF16Pairs or PackHalfB, the same bytes); bf16 arithmetic also rounds the
// activations to bf16. Which is faster depends on the CPU, not on the instruction set alone:
// AMX tiles beat the f32 kernels from a few dozen rows on; VDPBF16PS does twice the
// multiply-adds of an f32 FMA per instruction, and on AMD Zen 4 it runs at the FMA's rate
// (twice the f32 peak), while on Intel's Sapphire Rapids it was measured below the f32 kernel.
// So without AMX the choice is measured once per process (calibrate): the pair kernels
// against the f32 kernels that widen bf16 in registers, on data in L1, at 1 row (decode)
// and at the full row block (prefill).

// amxPairRows is the fewest rows from which products run on AMX tiles when the CPU has
// them (AMX pads a product to 32-row tiles; decode stays on the f32 kernels).
const amxPairRows = 64

// pairChoice caches BF16PairRows's calibration per implementation.
var pairChoice struct {
	sync.Mutex
	rows map[*impl]int
}

// BF16PairRows returns the fewest rows from which a product by bf16 weights is faster in
// bf16 arithmetic (PackBF16Pairs) than in f32 arithmetic (PackHalfB) with the implementation
// in use, or 0 when it never is (no AVX512_BF16 or AMX, or measured slower): 64 with AMX
// tiles; with VDPBF16PS, 1 when the pair kernels were measured faster at the full row block,
// else 0 (never a row count between: a model whose passes took one arithmetic below it and
// the other above would give a sequence different bits depending on what shares its pass;
// at one row, decode, both read the same 16-bit weights from memory). The environment
// variable HONE_BF16_PAIRS=off gives 0, =on gives 1 (tests, benchmarks).
func BF16PairRows() int {
	im := current.Load()
	switch os.Getenv("HONE_BF16_PAIRS") {
	case "off":
		return 0
	case "on":
		return 1
	}
	if im.amx {
		return amxPairRows
	}
	if im.pair == nil || im.microRows[kindBF16] == nil {
		return 0
	}
	pairChoice.Lock()
	defer pairChoice.Unlock()
	if r, ok := pairChoice.rows[im]; ok {
		return r
	}
	r := calibratePairs(im)
	if pairChoice.rows == nil {
		pairChoice.rows = map[*impl]int{}
	}
	pairChoice.rows[im] = r
	return r
}

// calibratePairs times the pair kernels against the bf16-widening f32 kernels on the same
// multiply-adds at the full row block (im.mr rows), best of a few rounds so that a busy core
// misleads it little, and returns BF16PairRows's answer. Pairs must win by 10% to be
// chosen. It takes about a millisecond. (It also timed one row, and answered 16 when pairs
// won only at the block; that made the arithmetic depend on a pass's row count.)
func calibratePairs(im *impl) int {
	const kp = 64 // depth pairs: B is 8 KiB either way (in L1)
	rows := min(im.mr, len(im.pair))
	a := make([]uint32, kp*rows)
	af := make([]float32, 2*kp*rows)
	b := make([]uint16, 2*kp*panelW)
	for i := range a {
		a[i] = 0x3f803f80 // 1.0 in both halves
	}
	for i := range af {
		af[i] = 1
	}
	for i := range b {
		b[i] = 0x3c00 // 2⁻⁷: the sums stay small and exact
	}
	c := make([]float32, rows*panelW)
	best := func(f func()) time.Duration {
		d := time.Duration(1 << 62)
		for round := 0; round < 5; round++ {
			start := time.Now()
			for i := 0; i < 20; i++ {
				f()
			}
			d = min(d, time.Since(start))
		}
		return d
	}
	faster := func(pair pairFn, f32 microFn) bool {
		tp := best(func() { pair(kp, &a[0], &b[0], &c[0], panelW) })
		tf := best(func() { f32(2*kp, &af[0], unsafe.Pointer(&b[0]), panelW, &c[0], panelW) })
		return float64(tp) < 0.9*float64(tf)
	}
	if faster(im.pair[rows-1], im.microRows[kindBF16][rows-1]) {
		return 1
	}
	return 0
}

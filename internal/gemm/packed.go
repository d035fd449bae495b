package gemm

import (
	"fmt"
	"unsafe"
)

// PackedB is a B operand (k×n after op) packed once into the layout the micro-kernels read,
// for weights used by many products. f32 operands stay f32 and bf16/f16 operands stay
// 16-bit (widened inside the kernels), so a packed operand takes the same memory as the
// original (plus padding of n to a multiple of 32). A PackedB is immutable and may be used
// by any number of goroutines at once; it does not reference the slice it was packed from.
type PackedB struct {
	n, k int
	kind elemKind
	f32  []float32 // kindF32
	u16  []uint16  // kindBF16, kindF16
}

// N returns the number of columns of op(B) (output features).
func (pb *PackedB) N() int { return pb.n }

// K returns the number of rows of op(B) (input features).
func (pb *PackedB) K() int { return pb.k }

// Half returns the 16-bit format of the packed data, or 0 for f32.
func (pb *PackedB) Half() Half {
	switch pb.kind {
	case kindBF16, kindBF16Pair:
		return BF16
	case kindF16:
		return F16
	}
	return 0
}

// PackB packs op(B) (k×n; B stored n×k when transB, the HF weight layout for y = x·Wᵀ) for
// GemmPacked.
func PackB(transB bool, n, k int, b []float32, ldb int) *PackedB {
	checkPackArgs("PackB", transB, n, k, len(b), ldb)
	pb := &PackedB{n: n, k: k, kind: kindF32}
	pb.f32 = allocPacked[float32](pb, packedLen(n, k))
	packWhole(pb.f32, b, transB, n, k, ldb, current.Load().packT[kindF32])
	return pb
}

// PackHalfB is PackB for a B stored as bf16 or f16 bit patterns; the packed operand stays in
// that format.
func PackHalfB(h Half, transB bool, n, k int, b []uint16, ldb int) *PackedB {
	kind := halfKind(h, "PackHalfB")
	checkPackArgs("PackHalfB", transB, n, k, len(b), ldb)
	pb := &PackedB{n: n, k: k, kind: kind}
	pb.u16 = allocPacked[uint16](pb, packedLen(n, k))
	packWhole(pb.u16, b, transB, n, k, ldb, nil)
	return pb
}

func checkPackArgs(fn string, transB bool, n, k, lenB, ldb int) {
	if n < 0 {
		panic(fmt.Sprintf("gemm.%s: n = %d < 0", fn, n))
	}
	if k < 0 {
		panic(fmt.Sprintf("gemm.%s: k = %d < 0", fn, k))
	}
	rows, cols := k, n
	if transB {
		rows, cols = n, k
	}
	checkMatrix(fn, "b", "ldb", rows, cols, lenB, ldb)
}

func packedLen(n, k int) int {
	return (n + panelW - 1) / panelW * panelW * k
}

// packWhole fills dst (zeroed) panel by panel: element (p,j) of op(B) goes to panel
// j/panelW at p*panelW + j%panelW. packT, if not nil, transposes full f32 panels.
func packWhole[E float32 | uint16](dst, b []E, transB bool, n, k, ldb int, packT packTFn) {
	if n == 0 || k == 0 {
		return
	}
	for j0 := 0; j0 < n; j0 += panelW {
		panel := dst[j0*k : (j0+panelW)*k]
		w := min(panelW, n-j0)
		if !transB {
			for p := 0; p < k; p++ {
				copy(panel[p*panelW:p*panelW+w], b[p*ldb+j0:p*ldb+j0+w])
			}
			continue
		}
		if w == panelW && packT != nil {
			packT(k, unsafe.Pointer(&b[j0*ldb]), ldb, (*float32)(unsafe.Pointer(&panel[0])))
			continue
		}
		for r := 0; r < w; r++ {
			for p, v := range b[(j0+r)*ldb : (j0+r)*ldb+k] {
				panel[p*panelW+r] = v
			}
		}
	}
}

// GemmPacked computes C = alpha*op(A)*B + beta*C with B prepacked by PackB, PackHalfB or
// PackBF16Pairs (bf16 arithmetic: A is rounded to bf16):
// op(A) is m×pb.K(), C is m×pb.N() with leading dimension ldc.
func GemmPacked(transA bool, m int, alpha float32, a []float32, lda int, pb *PackedB,
	beta float32, c []float32, ldc int) {
	if pb == nil {
		panic("gemm.GemmPacked: pb is nil")
	}
	checkArgs("GemmPacked", transA, false, m, pb.n, pb.k, len(a), lda, pb.k*max(pb.n, 1), max(pb.n, 1), len(c), ldc)
	run(&problem{
		transA: transA, m: m, n: pb.n, k: pb.k,
		alpha: alpha, a: a, lda: lda,
		bKind: pb.kind, packed: pb,
		beta: beta, c: c, ldc: ldc,
	})
}

// GemmPackedInto computes op(A)·B (alpha 1, beta 0) with B prepacked by PackB, PackHalfB or
// PackBF16Pairs, writing its columns in parts: the widths[i] columns after the parts before
// go to outs[i] (m × widths[i], rows widths[i] apart), as the fused projections of a model
// (q, k and v; gate and up) want them, without the whole product in one matrix and a copy.
// Every width but the last must be a multiple of 32 (a packed panel); where it is not, or
// the product would run on AMX tiles (which take whole runs of panels), it computes nothing
// and returns false, and the caller multiplies into one matrix (GemmPacked). The sums are
// GemmPacked's, bit for bit.
func GemmPackedInto(m int, a []float32, lda int, pb *PackedB, outs [][]float32, widths []int) bool {
	if pb == nil {
		panic("gemm.GemmPackedInto: pb is nil")
	}
	if len(outs) != len(widths) {
		panic("gemm.GemmPackedInto: outs and widths differ in length")
	}
	if len(outs) > maxParts {
		return false
	}
	p := problem{
		m: m, n: pb.n, k: pb.k,
		alpha: 1, a: a, lda: lda,
		bKind: pb.kind, packed: pb,
		ldc: pb.n, nparts: len(outs),
	}
	col := 0
	for i, w := range widths {
		if w <= 0 || (i < len(widths)-1 && w%panelW != 0) {
			return false
		}
		if len(outs[i]) < m*w {
			panic(fmt.Sprintf("gemm.GemmPackedInto: len(outs[%d]) = %d < %d rows × %d columns", i, len(outs[i]), m, w))
		}
		p.parts[i] = cPart{c: outs[i], col0: col, w: w}
		col += w
	}
	if col != pb.n {
		panic(fmt.Sprintf("gemm.GemmPackedInto: widths sum to %d, B has %d columns", col, pb.n))
	}
	if pb.k == 0 || (pb.kind == kindBF16Pair && current.Load().amx) {
		return false
	}
	checkArgs("GemmPackedInto", false, false, m, pb.n, pb.k, len(a), lda, pb.k*max(pb.n, 1), max(pb.n, 1), m*pb.n, pb.n)
	run(&p)
	return true
}

// runPacked multiplies by a prepacked B: no B packing at all; tasks split the rows when
// there are many and the columns otherwise.
func runPacked(im *impl, p *problem, nt int) {
	pb := p.packed
	c := packedCall{p: *p, im: im, kc0: min(kcBlock, p.k)}
	st, tall := im.streamIm, false
	if st == nil || p.m > len(st.microRows[pb.kind]) {
		st, tall = im.tallIm, true
	}
	if st != nil && p.m <= len(st.microRows[pb.kind]) {
		// Decode: few rows, B read from memory once; each task streams its panels whole
		// (contiguous) instead of visiting them once per depth block, with or without
		// software prefetch as the kind's tuner has measured faster. Up to four rows the
		// streaming kernels take whole panels; more (batched decode), the tall kernels take
		// half panels, every row on each B vector.
		probe := decodeTuner(int(pb.kind), p.m, tall).Begin([3]int{p.n, p.k, p.m}, p.n*p.k*int(pb.kind.size()))
		defer probe.End()
		if probe.PF() {
			if !tall && im.streamPF != nil {
				st = im.streamPF
			} else if tall && im.tallPF != nil {
				st = im.tallPF
			}
		}
		c.im, c.kc0 = st, p.k
	}
	c.mc = max(mcBlock/c.im.mr, 1) * c.im.mr
	c.panels = (p.n + panelW - 1) / panelW
	c.tm, c.tn = grid(p.m, c.panels, c.im.mr, c.mc, nt)
	if pb.kind == kindF32 {
		c.base = unsafe.Pointer(&pb.f32[0])
	} else {
		c.base = unsafe.Pointer(&pb.u16[0])
	}
	if c.tm == 1 { // one row range (few rows): pack A once for every task
		abuf := bufPool.Get().(*floatBuf)
		defer bufPool.Put(abuf)
		c.shared = packAAll(c.im, abuf, p, c.mc, c.kc0)
	}
	if nt == 1 {
		c.task(0)
		return
	}
	pc := c // the workers' copy: c stays on the stack of a call made on this goroutine alone
	parallel(c.tm*c.tn, nt, pc.task)
}

// packedCall is one runPacked call, split into tm×tn tasks.
type packedCall struct {
	p      problem
	im     *impl
	base   unsafe.Pointer // the packed B
	kc0    int
	mc     int
	panels int
	tm, tn int
	shared packedA // op(A) packed once when tm is 1 (shared.s nil otherwise)
}

// task computes the t-th block of C.
func (c *packedCall) task(t int) {
	im, p := c.im, &c.p
	pb := p.packed
	m, n, k, kc0, mc, mr := p.m, p.n, p.k, c.kc0, c.mc, im.mr
	esz := pb.kind.size()
	ncPanels := max(ncBlock/panelW, 1)
	i0, i1 := split(m, c.tm, t/c.tn, mr)
	q0, q1 := split(c.panels, c.tn, t%c.tn, 1)
	if i0 >= i1 || q0 >= q1 {
		return
	}
	if !p.clearsPerTile() {
		scaleC(p, i0, i1, q0*panelW, min(q1*panelW, n))
	}
	sb := bufPool.Get().(*floatBuf)
	defer bufPool.Put(sb)
	var ap []float32
	if c.shared.s == nil {
		ap = sb.aligned(min(mc, i1-i0+mr) * kc0)
	}
	for qc, qe := q0, 0; qc < q1; qc = qe {
		// A block of columns stays within one part of C (GemmPackedInto).
		qe = min(qc+ncPanels, q1, (p.partEnd(qc*panelW)+panelW-1)/panelW)
		j0, j1 := qc*panelW, min(qe*panelW, n)
		for pc := 0; pc < k; pc += kc0 {
			kc := min(kc0, k-pc)
			src := &bSource{
				kind:        pb.kind,
				base:        unsafe.Add(c.base, uintptr(qc*k*panelW+pc*panelW)*esz),
				panelStride: k * panelW,
				ldb:         panelW,
			}
			for ic := i0; ic < i1; ic += mc {
				mcc := min(mc, i1-ic)
				a := ap
				if c.shared.s != nil {
					a = c.shared.block(ic, pc)
				} else {
					packA(im, ap, p, ic, mcc, pc, kc)
				}
				cb, ldc := p.cAt(ic, j0)
				macro(im, mcc, j1-j0, kc, a, src, cb, ldc, &sb.tile, pc == 0 && p.clearsPerTile())
			}
		}
	}
}

// Column writes column j of op(B) (K() values) to out as f32: row j of a B packed with transB,
// a weight's row, which is how a model reads its tied embedding's rows from the LM head's pack
// and how a weight whose own copy was let go is restored. Exact: the packed f32 values, or the
// 16-bit ones widened (bf16 pairs included).
func (pb *PackedB) Column(j int, out []float32) {
	pb.checkColumn("Column", j, len(out))
	k := pb.k
	switch pb.kind {
	case kindF32:
		src := pb.f32[j/panelW*panelW*k+j%panelW:]
		for p := range out[:k] {
			out[p] = src[p*panelW]
		}
	default:
		// In pieces through a buffer on the stack: a token's embedding row, no garbage.
		var buf [256]uint16
		dec := F16ToFloat32
		if pb.Half() == BF16 {
			dec = BF16ToFloat32
		}
		for p0 := 0; p0 < k; p0 += len(buf) {
			b := buf[:min(len(buf), k-p0)]
			pb.columnBits(j, p0, b)
			for i, v := range b {
				out[p0+i] = dec(v)
			}
		}
	}
}

// ColumnBits writes column j of op(B) (K() values) of a 16-bit pack (bf16, f16 or bf16
// pairs) to out as its bit patterns.
func (pb *PackedB) ColumnBits(j int, out []uint16) {
	pb.checkColumn("ColumnBits", j, len(out))
	if pb.kind == kindF32 {
		panic("gemm.PackedB.ColumnBits: an f32 pack")
	}
	pb.columnBits(j, 0, out[:pb.k])
}

// columnBits writes elements [p0, p0+len(out)) of column j of a 16-bit pack.
func (pb *PackedB) columnBits(j, p0 int, out []uint16) {
	if pb.kind == kindBF16Pair {
		// Panel j/panelW holds pairStride(k) depth pairs of panelW words (lo: even depth).
		src := pb.u16[j/panelW*pairStride(pb.k)*2*panelW+2*(j%panelW):]
		for i := range out {
			p := p0 + i
			out[i] = src[p/2*2*panelW+p%2]
		}
		return
	}
	src := pb.u16[j/panelW*panelW*pb.k+j%panelW:]
	for i := range out {
		out[i] = src[(p0+i)*panelW]
	}
}

func (pb *PackedB) checkColumn(fn string, j, n int) {
	if j < 0 || j >= pb.n {
		panic(fmt.Sprintf("gemm.PackedB.%s: column %d outside [0, %d)", fn, j, pb.n))
	}
	if n < pb.k {
		panic(fmt.Sprintf("gemm.PackedB.%s: len(out) = %d < K = %d", fn, n, pb.k))
	}
}

// PackRowsT is PackB(true, n, k, W, k) for an n×k W given a row at a time: fill(r, row) writes
// row r (k values). It holds one panel of rows at a time besides the pack, so a weight made on
// the fly (dequantized from a GGUF's blocks) is never held whole in row-major order too.
func PackRowsT(n, k int, fill func(r int, row []float32)) *PackedB {
	checkPackArgs("PackRowsT", true, n, k, n*k, max(k, 1))
	pb := &PackedB{n: n, k: k, kind: kindF32}
	pb.f32 = allocPacked[float32](pb, packedLen(n, k))
	buf := make([]float32, panelW*k)
	for j0 := 0; j0 < n; j0 += panelW {
		w := min(panelW, n-j0)
		for r := range w {
			fill(j0+r, buf[r*k:(r+1)*k])
		}
		packWhole(pb.f32[j0*k:(j0+panelW)*k], buf[:w*k], true, w, k, k, current.Load().packT[kindF32])
	}
	return pb
}

// PackHalfRowsT is PackRowsT for a W of bf16 or f16 bit patterns (PackHalfB(h, true, ...)).
func PackHalfRowsT(h Half, n, k int, fill func(r int, row []uint16)) *PackedB {
	kind := halfKind(h, "PackHalfRowsT")
	checkPackArgs("PackHalfRowsT", true, n, k, n*k, max(k, 1))
	pb := &PackedB{n: n, k: k, kind: kind}
	pb.u16 = allocPacked[uint16](pb, packedLen(n, k))
	buf := make([]uint16, panelW*k)
	for j0 := 0; j0 < n; j0 += panelW {
		w := min(panelW, n-j0)
		for r := range w {
			fill(j0+r, buf[r*k:(r+1)*k])
		}
		packWhole(pb.u16[j0*k:(j0+panelW)*k], buf[:w*k], true, w, k, k, nil)
	}
	return pb
}

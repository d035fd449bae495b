package gemm

import (
	"sync"
	"unsafe"
)

// problem is one call's arguments.
type problem struct {
	transA, transB bool
	m, n, k        int
	alpha          float32
	a              []float32
	lda            int
	bKind          elemKind
	b32            []float32
	b16            []uint16
	ldb            int
	packed         *PackedB // GemmPacked: B is prepacked (bKind, b32/b16 unused)
	beta           float32
	c              []float32
	ldc            int
	parts          [maxParts]cPart // GemmPackedInto: C's columns in nparts parts (c unused)
	nparts         int
}

// maxParts is the most parts GemmPackedInto splits C's columns into (q, k and v: 3). They are
// held in the problem itself, which allocates nothing.
const maxParts = 4

// cPart is the columns [col0, col0+w) of a product written to a matrix of their own (rows w
// apart).
type cPart struct {
	c       []float32
	col0, w int
}

// cAt returns C from row i and column j on, with its leading dimension: p.c, or the part
// holding column j.
func (p *problem) cAt(i, j int) ([]float32, int) {
	if p.nparts == 0 {
		return p.c[i*p.ldc+j:], p.ldc
	}
	k := p.nparts - 1
	for k > 0 && j < p.parts[k].col0 {
		k--
	}
	pt := &p.parts[k]
	return pt.c[i*pt.w+j-pt.col0:], pt.w
}

// partEnd returns the column after the last of column j's part (n without parts).
func (p *problem) partEnd(j int) int {
	for _, pt := range p.parts[:p.nparts] {
		if j < pt.col0+pt.w {
			return pt.col0 + pt.w
		}
	}
	return p.n
}

// Cache blocking. kcBlock is the depth of one packed block (A micro-panel and B micro-panel
// stay in L1 across it), mcBlock the rows of A packed at once (L2), ncBlock the columns of
// B packed at once (shared by the threads, L2/L3).
const (
	kcBlock = 256
	mcBlock = 140
	ncBlock = 3072
	// bBlockFloats bounds the packed B block of the general path (all of k × a column
	// block, shared by the threads in L3): 2M floats, 8 MiB.
	bBlockFloats = 2 << 20
)

// Work thresholds (in multiply-adds) below which a call stays on the calling goroutine.
const minParallelWork = 1 << 18

// rawMaxM is the largest m for which a non-transposed B is read in place by the micro-kernel
// instead of being packed.
const rawMaxM = 16

func run(p *problem) {
	if p.m == 0 || p.n == 0 {
		return
	}
	im := current.Load()
	nt := Threads()
	if p.m*p.n*max(p.k, 1) < minParallelWork {
		nt = 1
	}
	if p.k == 0 || p.alpha == 0 {
		if nt == 1 {
			scaleC(p, 0, p.m, 0, p.n)
			return
		}
		q := p.shared()
		parallel(nt, nt, func(t int) {
			i0, i1 := split(q.m, nt, t, 1)
			scaleC(q, i0, i1, 0, q.n)
		})
		return
	}
	switch {
	case p.packed != nil && p.packed.kind == kindBF16Pair && im.amx:
		runAMX(im, p.shared(), nt)
	case p.packed != nil && p.packed.kind == kindBF16Pair:
		runPairs(im, p.shared(), nt)
	case p.packed != nil:
		runPacked(im, p, nt)
	case p.transB && im.chainT && p.m <= rawMaxM:
		runChainT(p, nt)
	case p.transB && !im.chainT && p.k >= im.dotVec:
		// y = x·Wᵀ by dot products at every m: each element is the dot kernels' sum whatever
		// the row count (row invariance: see the package doc), and W is streamed, never
		// packed. A depth shorter than the kernels' vector (a LoRA product's rank) would be
		// summed by scalar loops: such a W is packed, whatever m.
		runDot(im, p, nt)
	case !p.transB && p.m <= rawMaxM:
		runRaw(im, p, nt)
	default:
		runBlocked(im, p, nt)
	}
}

// shared returns a heap copy of p for closures that the pool's workers run. Capturing p itself
// would move every call's problem to the heap, so the small products that run on the calling
// goroutine alone (attention's, in decode: tens of thousands a step) would each allocate one.
func (p *problem) shared() *problem {
	q := *p
	return &q
}

// tasksPerThread is how many tasks a call makes per thread when the work divides finely:
// tasks are claimed dynamically, so a helper that starts late or a core that is busy with
// something else costs little.
const tasksPerThread = 4

// grid splits an m-row, panels-panel output among tm×tn tasks: row ranges (multiples of mr,
// about one mc block each) times column ranges (whole panels), enough for nt threads to
// balance.
func grid(m, panels, mr, mc, nt int) (tm, tn int) {
	if nt <= 1 {
		return 1, 1
	}
	tm = min((m+mr-1)/mr, (m+mc-1)/mc)
	want := 3 * nt
	tn = 1
	if tm < want {
		tn = min(panels, (want+tm-1)/tm)
	}
	return tm, tn
}

// split returns the t-th of parts near-equal ranges of [0,n), boundaries multiples of unit.
func split(n, parts, t, unit int) (int, int) {
	units := (n + unit - 1) / unit
	lo := units * t / parts * unit
	hi := units * (t + 1) / parts * unit
	return min(lo, n), min(hi, n)
}

// scaleC sets C[i0:i1, j0:j1] *= beta (C = 0 when beta is 0, ignoring what C held).
func scaleC(p *problem, i0, i1, j0, j1 int) {
	if p.beta == 1 {
		return
	}
	for i := i0; i < i1; i++ {
		row := p.c[i*p.ldc+j0 : i*p.ldc+j1]
		if p.beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= p.beta
		}
	}
}

// floatBuf is a reusable scratch buffer. Its fixed arrays are passed to kernels through
// function values, which the compiler cannot prove non-escaping; keeping them in a pooled
// object instead of on the stack avoids an allocation per call.
type floatBuf struct {
	s    []float32
	tile [16 * panelW]float32 // an edge micro-tile
	out  [256]float32         // dot results
	one  [256]float32         // single-row dot results
}

var bufPool = sync.Pool{New: func() any { return new(floatBuf) }}

// aligned returns a 64-byte aligned slice of n floats from buf, growing it if needed.
func (buf *floatBuf) aligned(n int) []float32 {
	if cap(buf.s) < n+16 {
		buf.s = make([]float32, n+16)
	}
	s := buf.s[:cap(buf.s)]
	off := int(uintptr(unsafe.Pointer(&s[0]))&63) / 4
	if off != 0 {
		off = 16 - off
	}
	return s[off : off+n]
}

// packA packs rows [i0,i0+mc) and depth [p0,p0+kc) of op(A), scaled by alpha, into dst as
// micro-panels of im.mr rows, panel q at dst[q*mr*kc:]. When im has row-count kernels, a last
// panel of r < mr rows holds element (i,p) at p*r+i; otherwise every panel is mr rows wide,
// padded with zeros.
func packA(im *impl, dst []float32, p *problem, i0, mc, p0, kc int) {
	mr := im.mr
	dense := im.microRows[0] != nil
	alpha := p.alpha
	for ip := 0; ip < mc; ip += mr {
		rows := min(mr, mc-ip)
		stride := mr
		if dense {
			stride = rows
		}
		panel := dst[ip*kc : ip*kc+stride*kc]
		if !p.transA {
			done := 0
			if rows == mr && im.packA != nil && kc >= 16 {
				done = kc &^ 15
				im.packA(done, &p.a[(i0+ip)*p.lda+p0], p.lda, &panel[0], alpha)
			}
			for r := 0; r < rows; r++ {
				src := p.a[(i0+ip+r)*p.lda+p0+done:][:kc-done]
				for q, v := range src {
					panel[(done+q)*stride+r] = alpha * v
				}
			}
			if rows < stride {
				for q := 0; q < kc; q++ {
					clear(panel[q*stride+rows : q*stride+stride])
				}
			}
			continue
		}
		if im.packAT != nil && rows == stride {
			im.packAT(kc, rows, &p.a[p0*p.lda+i0+ip], p.lda, &panel[0], alpha)
			continue
		}
		for q := 0; q < kc; q++ {
			src := p.a[(p0+q)*p.lda+i0+ip:][:rows]
			d := panel[q*stride : q*stride+stride]
			for r, v := range src {
				d[r] = alpha * v
			}
			clear(d[rows:])
		}
	}
}

// packBPanel packs columns [j0,j0+w) (w <= panelW) and depth [p0,p0+kc) of op(B) into dst as
// f32 (element (p,j) at dst[p*panelW+j]); columns past w are zero.
func packBPanel(im *impl, dst []float32, p *problem, j0, w, p0, kc int) {
	dst = dst[:kc*panelW]
	if p.transB {
		if w == panelW && im.packT[p.bKind] != nil {
			im.packT[p.bKind](kc, p.bPtr(j0*p.ldb+p0), p.ldb, &dst[0])
			return
		}
		if w < panelW {
			clear(dst)
		}
		for r := 0; r < w; r++ {
			off := (j0+r)*p.ldb + p0
			switch p.bKind {
			case kindF32:
				for q, v := range p.b32[off : off+kc] {
					dst[q*panelW+r] = v
				}
			case kindBF16:
				for q, v := range p.b16[off : off+kc] {
					dst[q*panelW+r] = BF16ToFloat32(v)
				}
			default:
				for q, v := range p.b16[off : off+kc] {
					dst[q*panelW+r] = F16ToFloat32(v)
				}
			}
		}
		return
	}
	for q := 0; q < kc; q++ {
		d := dst[q*panelW : q*panelW+panelW]
		off := (p0+q)*p.ldb + j0
		switch p.bKind {
		case kindF32:
			copy(d, p.b32[off:off+w])
		default:
			Half(p.bKind).Decode(d[:w], p.b16[off:off+w])
		}
		clear(d[w:])
	}
}

// packBPanel16 is packBPanel for a non-transposed 16-bit B, packed as 16-bit values.
func packBPanel16(dst []uint16, p *problem, j0, w, p0, kc int) {
	for q := 0; q < kc; q++ {
		d := dst[q*panelW : q*panelW+panelW]
		off := (p0+q)*p.ldb + j0
		copy(d, p.b16[off:off+w])
		clear(d[w:])
	}
}

// bPtr returns a pointer to element off of the stored B.
func (p *problem) bPtr(off int) unsafe.Pointer {
	if p.bKind == kindF32 {
		return unsafe.Pointer(&p.b32[off])
	}
	return unsafe.Pointer(&p.b16[off])
}

// bSource locates the micro-panels of B for macro: panel q (panelW columns starting at
// column q*panelW of the block) starts at base + q*panelStride elements, rows ldb apart.
type bSource struct {
	kind        elemKind
	base        unsafe.Pointer
	panelStride int
	ldb         int
}

func (s *bSource) panel(q int) unsafe.Pointer {
	return unsafe.Add(s.base, uintptr(q*s.panelStride)*s.kind.size())
}

// macro adds Ap·B into C for an mc×nc block: ap holds the packed A block (mr-row panels of
// depth kc) and src the B panels; c points at C's block origin. Only B panels whose columns
// lie in [0,nc) are read beyond nc when src is packed (zero-padded) or full.
func macro(im *impl, mc, nc, kc int, ap []float32, src *bSource, c []float32, ldc int, tmp *[16 * panelW]float32, zero bool) {
	mr, nr := im.mr, im.nr
	full := im.micro[src.kind]
	rowsK := im.microRows[src.kind]
	esz := src.kind.size()
	for jr := 0; jr < nc; jr += nr {
		bp := unsafe.Add(src.panel(jr/panelW), uintptr(jr%panelW)*esz)
		cols := min(nr, nc-jr)
		for ir := 0; ir < mc; ir += mr {
			rows := min(mr, mc-ir)
			a := &ap[ir*kc]
			mk := full
			if rows < mr && rowsK != nil {
				mk = rowsK[rows-1]
			}
			if cols == nr && (rows == mr || rowsK != nil) {
				if zero {
					zeroTile(c[ir*ldc+jr:], ldc, rows, cols)
				}
				mk(kc, a, bp, src.ldb, &c[ir*ldc+jr], ldc)
				continue
			}
			t := tmp[:mr*nr]
			if zero {
				clear(t)
			} else {
				loadEdge(t, nr, c[ir*ldc+jr:], ldc, rows, cols)
			}
			mk(kc, a, bp, src.ldb, &t[0], nr)
			storeEdge(c[ir*ldc+jr:], ldc, t, nr, rows, cols)
		}
	}
}

// zeroTile sets the rows×cols corner of c (rows ldc apart) to 0: with beta 0, each tile of C
// is cleared just before the first depth block's kernel starts from it (in cache), instead of
// the whole of C in a pass of its own (which, for a large C, wrote it to memory and read it
// back). Starting from 0 either way, the sums are the same bits.
func zeroTile(c []float32, ldc, rows, cols int) {
	if cols == 32 && len(c) >= (rows-1)*ldc+32 {
		for i := 0; i < rows; i++ {
			*(*[32]float32)(c[i*ldc : i*ldc+32]) = [32]float32{}
		}
		return
	}
	for i := 0; i < rows; i++ {
		clear(c[i*ldc : i*ldc+cols])
	}
}

// clearsPerTile reports whether a product's kernels clear each tile of C as they first reach
// it (beta 0 and some depth), so that the task need not clear C first.
func (p *problem) clearsPerTile() bool { return p.beta == 0 && p.k > 0 }

// loadEdge copies the rows×cols corner of c (rows ldc apart) into tile t (rows ldt apart),
// zeros elsewhere: an edge tile that a micro-kernel computes in scratch starts, as every tile,
// from C's values (the kernels sum each element in one chain from C, so that a row's sums do
// not depend on the tile it falls in).
func loadEdge(t []float32, ldt int, c []float32, ldc, rows, cols int) {
	clear(t)
	for i := 0; i < rows; i++ {
		copy(t[i*ldt:i*ldt+cols], c[i*ldc:i*ldc+cols])
	}
}

// storeEdge copies the rows×cols corner of tile t (rows ldt apart) back into c (rows ldc
// apart).
func storeEdge(c []float32, ldc int, t []float32, ldt, rows, cols int) {
	for i := 0; i < rows; i++ {
		copy(c[i*ldc:i*ldc+cols], t[i*ldt:i*ldt+cols])
	}
}

// runBlocked is the general path. For each column block the threads pack op(B) (all of
// its depth) together; then each task takes a block of rows (or columns, when rows are few)
// and runs through every depth block, packing its A block per depth step, so that its C
// block stays in L2 across the whole depth instead of streaming through memory once per
// depth block.
func runBlocked(im *impl, p *problem, nt int) {
	m, n, k := p.m, p.n, p.k
	if n <= 16 && im.tallIm != nil {
		// At most 16 columns (a LoRA gradient's rank): the tall kernels' 16-wide tiles, not
		// half-empty edge tiles of the 32-wide kernels; the same chains, so the same bits.
		im = im.tallIm
	}
	c := blockedCall{p: *p, im: im}
	c.mc = max(mcBlock/im.mr, 1) * im.mr
	c.kc0 = min(kcBlock, k)
	nc0 := min((n+panelW-1)/panelW*panelW, max(panelW, bBlockFloats/k/panelW*panelW))
	c.kblocks = (k + c.kc0 - 1) / c.kc0
	bbuf := bufPool.Get().(*floatBuf)
	defer bufPool.Put(bbuf)
	c.bpack = bbuf.aligned(k * nc0)
	// A non-transposed 16-bit B is copied into 16-bit panels (the kernels widen it, as they
	// do prepacked ones): no conversion, and half the bytes to pack and read.
	c.bKind = kindF32
	if !p.transB && p.bKind != kindF32 {
		c.bKind, c.bpack16 = p.bKind, unsafe.Slice((*uint16)(unsafe.Pointer(&c.bpack[0])), len(c.bpack))
	}
	// Split C among tasks: by rows when there are enough, else by columns too.
	c.tm, c.tn = grid(m, (n+panelW-1)/panelW, im.mr, c.mc, nt)
	if nt == 1 { // tm = tn = 1
		for jc := 0; jc < n; jc += nc0 {
			c.columns(jc, nc0, 1)
			for t := range c.packTasks {
				c.pack(t)
			}
			c.task(0)
		}
		return
	}
	pc := c // the workers' copy: c stays on the stack of a call made on this goroutine alone
	for jc := 0; jc < n; jc += nc0 {
		pc.columns(jc, nc0, nt)
		parallel(pc.packTasks, nt, pc.pack)
		parallel(pc.tm*pc.tn, nt, pc.task)
	}
}

// blockedCall is one runBlocked call; columns sets the column block that pack and task work
// on.
type blockedCall struct {
	p       problem
	im      *impl
	mc, kc0 int
	kblocks int
	bpack   []float32 // the column block's packed B: depth block pc at bpack[pc*ncp:]
	bKind   elemKind  // of the packed panels: f32, or B's own 16-bit kind (bpack16)
	bpack16 []uint16  // bpack's memory as 16-bit panels, for a non-transposed 16-bit B
	tm, tn  int

	jc, nc, panels, ncp int // the column block: columns [jc, jc+nc), ncp padded to panels
	packTasks           int
}

func (c *blockedCall) columns(jc, nc0, nt int) {
	c.jc, c.nc = jc, min(nc0, c.p.n-jc)
	c.panels = (c.nc + panelW - 1) / panelW
	c.ncp = c.panels * panelW
	c.packTasks = min(c.kblocks*c.panels, 2*nt)
}

// pack packs the t-th of packTasks shares of the column block's B panels (all depth blocks),
// panels kc*panelW apart within a depth block.
func (c *blockedCall) pack(t int) {
	p, k, kc0 := &c.p, c.p.k, c.kc0
	u0, u1 := split(c.kblocks*c.panels, c.packTasks, t, 1)
	for u := u0; u < u1; u++ {
		pc, q := u/c.panels*kc0, u%c.panels
		kc := min(kc0, k-pc)
		j := q * panelW
		if c.bpack16 != nil {
			packBPanel16(c.bpack16[pc*c.ncp+q*kc*panelW:], p, c.jc+j, min(panelW, c.nc-j), pc, kc)
			continue
		}
		packBPanel(c.im, c.bpack[pc*c.ncp+q*kc*panelW:], p, c.jc+j, min(panelW, c.nc-j), pc, kc)
	}
}

// task computes the t-th of tm×tn blocks of the column block of C through every depth block.
func (c *blockedCall) task(t int) {
	im, p, k, kc0, mc := c.im, &c.p, c.p.k, c.kc0, c.mc
	i0, i1 := split(p.m, c.tm, t/c.tn, im.mr)
	q0, q1 := split(c.panels, c.tn, t%c.tn, 1)
	j0, j1 := c.jc+q0*panelW, min(c.jc+q1*panelW, c.jc+c.nc)
	if i0 >= i1 || j0 >= j1 {
		return
	}
	if !p.clearsPerTile() {
		scaleC(p, i0, i1, j0, j1)
	}
	abuf := bufPool.Get().(*floatBuf)
	defer bufPool.Put(abuf)
	ap := abuf.aligned(mc * kc0)
	for ic := i0; ic < i1; ic += mc {
		mcc := min(mc, i1-ic)
		for pc := 0; pc < k; pc += kc0 {
			kc := min(kc0, k-pc)
			src := &bSource{kind: c.bKind, panelStride: kc * panelW, ldb: panelW,
				base: unsafe.Add(unsafe.Pointer(&c.bpack[0]), uintptr(pc*c.ncp+q0*kc*panelW)*c.bKind.size())}
			packA(im, ap, p, ic, mcc, pc, kc)
			macro(im, mcc, j1-j0, kc, ap, src, p.c[ic*p.ldc+j0:], p.ldc, &abuf.tile, pc == 0 && p.clearsPerTile())
		}
	}
}

// runRaw handles few rows with a non-transposed B: the micro-kernels read B in place (f32 or
// 16-bit), so B is streamed once and never packed; only a last partial panel is packed.
func runRaw(im *impl, p *problem, nt int) {
	panels := (p.n + panelW - 1) / panelW
	tasks := min(panels, tasksPerThread*nt)
	abuf := bufPool.Get().(*floatBuf)
	defer bufPool.Put(abuf)
	ap := packAAll(im, abuf, p, p.m, min(kcBlock, p.k)) // few rows: packed once, shared by the tasks
	if nt == 1 {
		rawPanels(im, p, &ap, 0, panels)
		return
	}
	q, a := p.shared(), ap
	parallel(tasks, nt, func(t int) {
		q0, q1 := split(panels, tasks, t, 1)
		rawPanels(im, q, &a, q0, q1)
	})
}

// rawPanels is runRaw's work on the column panels [q0,q1) of C.
func rawPanels(im *impl, p *problem, ap *packedA, q0, q1 int) {
	m, n, k := p.m, p.n, p.k
	kc0 := min(kcBlock, k)
	j0, j1 := q0*panelW, min(q1*panelW, n)
	if j0 >= j1 {
		return
	}
	if !p.clearsPerTile() {
		scaleC(p, 0, m, j0, j1)
	}
	sb := bufPool.Get().(*floatBuf)
	defer bufPool.Put(sb)
	edge := sb.aligned(kc0 * panelW)
	full := (j1 - j0) / panelW * panelW // columns covered by complete panels
	for pc := 0; pc < k; pc += kc0 {
		kc := min(kc0, k-pc)
		a := ap.block(0, pc)
		if full > 0 {
			src := &bSource{kind: p.bKind, base: p.bPtr(pc*p.ldb + j0), panelStride: panelW, ldb: p.ldb}
			macro(im, m, full, kc, a, src, p.c[j0:], p.ldc, &sb.tile, pc == 0 && p.clearsPerTile())
		}
		if j0+full < j1 {
			w := j1 - j0 - full
			packBPanel(im, edge, p, j0+full, w, pc, kc)
			src := &bSource{kind: kindF32, base: unsafe.Pointer(&edge[0]), panelStride: kc * panelW, ldb: panelW}
			macro(im, m, w, kc, a, src, p.c[j0+full:], p.ldc, &sb.tile, pc == 0 && p.clearsPerTile())
		}
	}
}

// packedA is a whole op(A) (rows [0,m)) packed block by block: the block of rows [ic, ic+mc)
// and depth [pc, pc+kc) at ic*k + pc*roundup(rows of the block, mr).
type packedA struct {
	s        []float32
	m, k, mc int
	mr       int
}

func (a *packedA) block(ic, pc int) []float32 {
	rows := min(a.mc, a.m-ic)
	rp := (rows + a.mr - 1) / a.mr * a.mr
	return a.s[ic*a.k+pc*rp:]
}

// packAAll packs op(A) rows [0,m) in mc-row, kc0-deep blocks into buf.
func packAAll(im *impl, buf *floatBuf, p *problem, mc, kc0 int) packedA {
	m, k, mr := p.m, p.k, im.mr
	mp := (m + mr - 1) / mr * mr
	a := packedA{s: buf.aligned(mp * k), m: m, k: k, mc: mc, mr: mr}
	for ic := 0; ic < m; ic += mc {
		mcc := min(mc, m-ic)
		for pc := 0; pc < k; pc += kc0 {
			packA(im, a.block(ic, pc), p, ic, mcc, pc, min(kc0, k-pc))
		}
	}
	return a
}

// runDot handles y = x·Wᵀ: each group of dotNW rows of W is streamed once and dotted with
// every row of x while it sits in L1 (in the multi-group kernels, a task's groups are
// streamed once per dotMR rows of x).
func runDot(im *impl, p *problem, nt int) {
	m, k := p.m, p.k
	x, ldx := p.a, p.lda
	if p.transA { // x = Aᵀ: gather it once (m×k, small)
		xbuf := bufPool.Get().(*floatBuf)
		defer bufPool.Put(xbuf)
		x = xbuf.aligned(m * k)
		for q := 0; q < k; q++ {
			for i, v := range p.a[q*p.lda : q*p.lda+m] {
				x[i*k+q] = v
			}
		}
		ldx = k
	}
	groups := (p.n + dotNW - 1) / dotNW
	if nt == 1 {
		dotGroups(im, p, x, ldx, 0, groups)
		return
	}
	tasks := min(groups, tasksPerThread*nt)
	q := p.shared()
	parallel(tasks, nt, func(t int) {
		g0, g1 := split(groups, tasks, t, 1)
		dotGroups(im, q, x, ldx, g0, g1)
	})
}

// dotGroups is runDot's work on the groups [g0,g1) of dotNW rows of W; x is op(A), rows ldx
// apart.
func dotGroups(im *impl, p *problem, x []float32, ldx, g0, g1 int) {
	m, n, k := p.m, p.n, p.k
	kerns := im.dot[p.bKind]
	if rk := im.dotRows[p.bKind]; rk != nil && k%im.dotVec == 0 {
		// The groups of dotNW rows in one kernel call per dotMR rows of x, which writes
		// alpha·sum: into C when beta is 0, else into scratch, added to beta·C after (a LoRA
		// delta's product of depth its rank, accumulated into the output): the same sums and
		// the same alpha·sum + beta·C as below.
		if full := min(g1, n/dotNW); full > g0 && p.beta == 0 {
			for i0 := 0; i0 < m; i0 += im.dotMR {
				mx := min(im.dotMR, m-i0)
				rk[mx-1](k, full-g0, &x[i0*ldx], ldx, p.bPtr(g0*dotNW*p.ldb), p.ldb, &p.c[i0*p.ldc+g0*dotNW], p.ldc, p.alpha)
			}
			g0 = full
		} else if full > g0 {
			const chunk = 64 // groups per kernel call
			sb := bufPool.Get().(*floatBuf)
			tmp := sb.aligned(im.dotMR * chunk * dotNW)
			for gc := g0; gc < full; gc += chunk {
				ng := min(chunk, full-gc)
				w := ng * dotNW
				for i0 := 0; i0 < m; i0 += im.dotMR {
					mx := min(im.dotMR, m-i0)
					rk[mx-1](k, ng, &x[i0*ldx], ldx, p.bPtr(gc*dotNW*p.ldb), p.ldb, &tmp[0], w, p.alpha)
					for i := 0; i < mx; i++ {
						crow := p.c[(i0+i)*p.ldc+gc*dotNW:][:w]
						for r, t := range tmp[i*w : (i+1)*w] {
							crow[r] = t + p.beta*crow[r]
						}
					}
				}
			}
			bufPool.Put(sb)
			g0 = full
		}
		if g0 >= g1 {
			return
		}
	}
	// One depth block: blocking k to keep x in L1 was measured slower (more reductions).
	kb := k
	esz := p.bKind.size()
	sb := bufPool.Get().(*floatBuf)
	defer bufPool.Put(sb)
	out := sb.out[:16*dotNW]
	for p0 := 0; p0 < k; p0 += kb {
		kl := min(kb, k-p0)
		kv := kl / im.dotVec * im.dotVec // the kernels' part; the rest is added by dotTail
		for g := g0; g < g1; g++ {
			j := g * dotNW
			rows := min(dotNW, n-j)
			for i0 := 0; i0 < m; i0 += im.dotMR {
				mx := min(im.dotMR, m-i0)
				kern := kerns[mx-1]
				xp := &x[i0*ldx+p0]
				if rows == dotNW {
					kern(kv, mx, xp, ldx, p.bPtr(j*p.ldb+p0), p.ldb, &out[0], dotNW)
				} else {
					// Fewer than dotNW rows left: point every lane at one row (ldw 0).
					for r := 0; r < rows; r++ {
						one := sb.one[:16*dotNW]
						kern(kv, mx, xp, ldx, unsafe.Add(p.bPtr(0), uintptr((j+r)*p.ldb+p0)*esz), 0, &one[0], dotNW)
						for i := 0; i < mx; i++ {
							out[i*dotNW+r] = one[i*dotNW]
						}
					}
				}
				if kv < kl {
					dotTail(p, x[i0*ldx:], ldx, mx, j, rows, p0+kv, out)
				}
				for i := 0; i < mx; i++ {
					crow := p.c[(i0+i)*p.ldc+j:][:rows]
					o := out[i*dotNW : i*dotNW+rows]
					switch {
					case p0 > 0:
						for r := range crow {
							crow[r] += p.alpha * o[r]
						}
					case p.beta == 0:
						for r := range crow {
							crow[r] = p.alpha * o[r]
						}
					default:
						for r := range crow {
							crow[r] = p.alpha*o[r] + p.beta*crow[r]
						}
					}
				}
			}
		}
	}
}

// dotTail adds Σ_{p >= k0} x_i[p]·w_j[p] to out[i*dotNW+r] for rows j..j+rows of W.
func dotTail(p *problem, x []float32, ldx, mx, j, rows, k0 int, out []float32) {
	for r := 0; r < rows; r++ {
		off := (j+r)*p.ldb + k0
		for i := 0; i < mx; i++ {
			xr := x[i*ldx+k0 : i*ldx+p.k]
			var s float32
			switch p.bKind {
			case kindF32:
				for q, v := range p.b32[off : off+len(xr)] {
					s += xr[q] * v
				}
			case kindBF16:
				for q, v := range p.b16[off : off+len(xr)] {
					s += xr[q] * BF16ToFloat32(v)
				}
			default:
				for q, v := range p.b16[off : off+len(xr)] {
					s += xr[q] * F16ToFloat32(v)
				}
			}
			out[i*dotNW+r] += s
		}
	}
}

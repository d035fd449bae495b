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
}

// Cache blocking. kcBlock is the depth of one packed block (A micro-panel and B micro-panel
// stay in L1 across it), mcBlock the rows of A packed at once (L2), ncBlock the columns of
// B packed at once (shared by the threads, L2/L3).
const (
	kcBlock = 256
	mcBlock = 144
	ncBlock = 3072
)

// Work thresholds (in multiply-adds) below which a call stays on the calling goroutine.
const minParallelWork = 1 << 18

// dotMaxM is the largest m for which y = x·Wᵀ uses the dot-product kernels (B streamed once,
// never packed) rather than the packed blocked path.
const dotMaxM = 16

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
		parallel(nt, nt, func(t int) {
			i0, i1 := split(p.m, nt, t, 1)
			scaleC(p, i0, i1, 0, p.n)
		})
		return
	}
	switch {
	case p.packed != nil:
		runPacked(im, p, nt)
	case p.transB && p.m <= dotMaxM:
		runDot(im, p, nt)
	case !p.transB && p.m <= rawMaxM:
		runRaw(im, p, nt)
	default:
		runBlocked(im, p, nt)
	}
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

// floatBuf is a reusable scratch buffer.
type floatBuf struct{ s []float32 }

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
// micro-panels of mr rows: element (i,p) of panel q at dst[q*mr*kc + p*mr + i]. Rows past mc
// are zero.
func packA(dst []float32, p *problem, i0, mc, p0, kc, mr int) {
	alpha := p.alpha
	for ip := 0; ip < mc; ip += mr {
		panel := dst[ip*kc : ip*kc+mr*kc]
		rows := min(mr, mc-ip)
		if !p.transA {
			for r := 0; r < rows; r++ {
				src := p.a[(i0+ip+r)*p.lda+p0:][:kc]
				for q, v := range src {
					panel[q*mr+r] = alpha * v
				}
			}
			if rows < mr {
				for q := 0; q < kc; q++ {
					clear(panel[q*mr+rows : q*mr+mr])
				}
			}
			continue
		}
		for q := 0; q < kc; q++ {
			src := p.a[(p0+q)*p.lda+i0+ip:][:rows]
			d := panel[q*mr : q*mr+mr]
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
		case kindBF16:
			for j, v := range p.b16[off : off+w] {
				d[j] = BF16ToFloat32(v)
			}
		default:
			for j, v := range p.b16[off : off+w] {
				d[j] = F16ToFloat32(v)
			}
		}
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
func macro(im *impl, mc, nc, kc int, ap []float32, src *bSource, c []float32, ldc int) {
	mr, nr := im.mr, im.nr
	full := im.micro[src.kind]
	rowsK := im.microRows[src.kind]
	var tmp [16 * panelW]float32
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
				mk(kc, a, bp, src.ldb, &c[ir*ldc+jr], ldc)
				continue
			}
			t := tmp[:mr*nr]
			clear(t)
			mk(kc, a, bp, src.ldb, &t[0], nr)
			for i := 0; i < rows; i++ {
				crow := c[(ir+i)*ldc+jr:][:cols]
				for j := range crow {
					crow[j] += t[i*nr+j]
				}
			}
		}
	}
}

// runBlocked is the general path: for each (column block, depth block) the threads pack B
// together, then each multiplies its share of the rows (or columns, when rows are few).
func runBlocked(im *impl, p *problem, nt int) {
	m, n, k := p.m, p.n, p.k
	mr := im.mr
	mc := max(mcBlock/mr, 1) * mr
	nc0 := min(ncBlock, (n+panelW-1)/panelW*panelW)
	kc0 := min(kcBlock, k)
	bbuf := bufPool.Get().(*floatBuf)
	defer bufPool.Put(bbuf)
	bpack := bbuf.aligned(kc0 * nc0)

	// Split C among tasks: by rows when there are enough, else by columns too.
	tm := nt
	for tm > 1 && m < tm*mr*2 {
		tm--
	}
	tn := max(nt/tm, 1)
	tasks := tm * tn

	for jc := 0; jc < n; jc += nc0 {
		nc := min(nc0, n-jc)
		panels := (nc + panelW - 1) / panelW
		for pc := 0; pc < k; pc += kc0 {
			kc := min(kc0, k-pc)
			parallel(min(nt, panels), nt, func(t int) {
				q0, q1 := split(panels, min(nt, panels), t, 1)
				for q := q0; q < q1; q++ {
					j := q * panelW
					packBPanel(im, bpack[q*kc*panelW:], p, jc+j, min(panelW, nc-j), pc, kc)
				}
			})
			src := &bSource{kind: kindF32, base: unsafe.Pointer(&bpack[0]), panelStride: kc * panelW, ldb: panelW}
			first := pc == 0
			parallel(tasks, nt, func(t int) {
				i0, i1 := split(m, tm, t/tn, mr)
				q0, q1 := split(panels, tn, t%tn, 1)
				j0, j1 := jc+q0*panelW, min(jc+q1*panelW, jc+nc)
				if i0 >= i1 || j0 >= j1 {
					return
				}
				if first {
					scaleC(p, i0, i1, j0, j1)
				}
				abuf := bufPool.Get().(*floatBuf)
				ap := abuf.aligned(mc * kc)
				sub := *src
				sub.base = src.panel(q0)
				for ic := i0; ic < i1; ic += mc {
					mcc := min(mc, i1-ic)
					packA(ap, p, ic, mcc, pc, kc, mr)
					macro(im, mcc, j1-j0, kc, ap, &sub, p.c[ic*p.ldc+j0:], p.ldc)
				}
				bufPool.Put(abuf)
			})
		}
	}
}

// runRaw handles few rows with a non-transposed B: the micro-kernels read B in place (f32 or
// 16-bit), so B is streamed once and never packed; only a last partial panel is packed.
func runRaw(im *impl, p *problem, nt int) {
	m, n, k := p.m, p.n, p.k
	mr := im.mr
	panels := (n + panelW - 1) / panelW
	nt = min(nt, panels)
	parallel(nt, nt, func(t int) {
		q0, q1 := split(panels, nt, t, 1)
		j0, j1 := q0*panelW, min(q1*panelW, n)
		if j0 >= j1 {
			return
		}
		scaleC(p, 0, m, j0, j1)
		abuf := bufPool.Get().(*floatBuf)
		defer bufPool.Put(abuf)
		mp := (m + mr - 1) / mr * mr
		kc0 := min(kcBlock, k)
		ap := abuf.aligned(mp*kc0 + kc0*panelW)
		edge := ap[mp*kc0:]
		full := (j1 - j0) / panelW * panelW // columns covered by complete panels
		for pc := 0; pc < k; pc += kc0 {
			kc := min(kc0, k-pc)
			packA(ap, p, 0, m, pc, kc, mr)
			if full > 0 {
				src := &bSource{kind: p.bKind, base: p.bPtr(pc*p.ldb + j0), panelStride: panelW, ldb: p.ldb}
				macro(im, m, full, kc, ap, src, p.c[j0:], p.ldc)
			}
			if j0+full < j1 {
				w := j1 - j0 - full
				packBPanel(im, edge, p, j0+full, w, pc, kc)
				src := &bSource{kind: kindF32, base: unsafe.Pointer(&edge[0]), panelStride: kc * panelW, ldb: panelW}
				macro(im, m, w, kc, ap, src, p.c[j0+full:], p.ldc)
			}
		}
	})
}

// runDot handles y = x·Wᵀ with few rows: each group of dotNW rows of W is streamed once and
// dotted with every row of x while it sits in L1.
func runDot(im *impl, p *problem, nt int) {
	m, n, k := p.m, p.n, p.k
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
	groups := (n + dotNW - 1) / dotNW
	nt = min(nt, groups)
	kerns := im.dot[p.bKind]
	kv := k / im.dotVec * im.dotVec // the kernels' part of k; the rest is added here
	esz := p.bKind.size()
	parallel(nt, nt, func(t int) {
		g0, g1 := split(groups, nt, t, 1)
		var out [16 * dotNW]float32
		for g := g0; g < g1; g++ {
			j := g * dotNW
			rows := min(dotNW, n-j)
			for i0 := 0; i0 < m; i0 += im.dotMR {
				mx := min(im.dotMR, m-i0)
				kern := kerns[mx-1]
				xp := &x[i0*ldx]
				if rows == dotNW {
					kern(kv, mx, xp, ldx, p.bPtr(j*p.ldb), p.ldb, &out[0], dotNW)
				} else {
					// Fewer than dotNW rows left: point every lane at one row (ldw 0).
					for r := 0; r < rows; r++ {
						var one [16 * dotNW]float32
						kern(kv, mx, xp, ldx, unsafe.Add(p.bPtr(0), uintptr((j+r)*p.ldb)*esz), 0, &one[0], dotNW)
						for i := 0; i < mx; i++ {
							out[i*dotNW+r] = one[i*dotNW]
						}
					}
				}
				if kv < k {
					dotTail(p, x[i0*ldx:], ldx, mx, j, rows, kv, out[:])
				}
				for i := 0; i < mx; i++ {
					crow := p.c[(i0+i)*p.ldc+j:][:rows]
					for r := range crow {
						if p.beta == 0 {
							crow[r] = p.alpha * out[i*dotNW+r]
						} else {
							crow[r] = p.alpha*out[i*dotNW+r] + p.beta*crow[r]
						}
					}
				}
			}
		}
	})
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

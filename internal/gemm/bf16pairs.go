package gemm

import (
	"math"
	"unsafe"
)

// bf16 arithmetic. A PackedB made by PackBF16Pairs multiplies in bf16 with f32 accumulation,
// as PyTorch and oneDNN do for bf16 models: A is rounded to bf16 (to nearest, ties to even)
// while it is packed, and each pair of depth steps is one VDPBF16PS on CPUs with
// AVX512_BF16 (twice the multiply-adds of an f32 FMA per instruction). Elsewhere a pure-Go
// kernel computes the same sums in the same order: the two products of a pair are exact in
// f32, added odd first, then even, as the instruction does (it also flushes subnormal inputs
// and results to zero, which the Go kernel does not).

// kindBF16Pair marks a PackedB in the pair layout: per panel of panelW columns and per depth
// pair q, panelW 32-bit words, word j holding (B[2q][j], B[2q+1][j]) as bf16 (even depth in
// the low half); an odd k is padded with a zero depth step, and the depth pairs of a panel
// are padded with zeros to a multiple of 16 (an AMX tile's depth).
const kindBF16Pair elemKind = 3

// pairKC is the depth pairs of a block of runPairs's products of many rows (512 of the depth,
// twice the f32 kernels' kcBlock: a pair step is two depth steps). Each block loads and stores
// C once per tile, and a product whose C does not fit in L2 (512 × 4864 for Qwen2.5-0.5B's
// gate and up projections) reads it from memory each time: on an AMD EPYC (Zen 5) one core
// ran the LoRA-training shapes of BenchmarkGEMMBF16Pairs at 1.02–1.17× the speed of 128 pairs
// (332 → 390 GFLOP/s at 512 × 4864 × 896) and 512 pairs no faster (2026-11-29). A block's B
// panel (256 pairs × 128 bytes) and A panel (14 rows × 1 KiB) still fit the L1 cache.
const pairKC = 256

// pairStride is the number of depth pairs a packed panel holds for depth k.
func pairStride(k int) int { return ((k+1)/2 + 15) / 16 * 16 }

// pairFn computes C[rows×panelW] += Ap·B over kp depth pairs: Ap holds rows words per depth
// pair (a row's two bf16 values, even depth low), B panelW words per depth pair; ldc in
// elements. rows is fixed per function.
type pairFn func(kp int, a *uint32, b *uint16, c *float32, ldc int)

// PackBF16Pairs packs op(B) (k×n; B stored n×k when transB, the HF weight layout for
// y = x·Wᵀ), given as bf16 bit patterns, for GemmPacked with bf16 arithmetic (see above).
// The packed operand takes the memory of B (plus padding of n to a multiple of 32 and of k
// to an even number).
func PackBF16Pairs(transB bool, n, k int, b []uint16, ldb int) *PackedB {
	checkPackArgs("PackBF16Pairs", transB, n, k, len(b), ldb)
	kp := pairStride(k)
	panels := (n + panelW - 1) / panelW
	pb := &PackedB{n: n, k: k, kind: kindBF16Pair}
	pb.u16 = allocPacked[uint16](pb, panels*kp*2*panelW)
	if n == 0 || k == 0 {
		return pb
	}
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&pb.u16[0])), len(pb.u16)/2)
	for q := 0; q < panels; q++ {
		panel := words[q*kp*panelW : (q+1)*kp*panelW]
		j0, w := q*panelW, min(panelW, n-q*panelW)
		if transB { // rows of B are columns of op(B): each pair is adjacent in a row
			for jj := 0; jj < w; jj++ {
				row := b[(j0+jj)*ldb : (j0+jj)*ldb+k]
				for p := 0; p+1 < k; p += 2 {
					panel[p/2*panelW+jj] = uint32(row[p]) | uint32(row[p+1])<<16
				}
				if k%2 == 1 {
					panel[k/2*panelW+jj] = uint32(row[k-1])
				}
			}
			continue
		}
		for p := 0; p < k; p += 2 { // two rows of B at a time, read along the row
			lo := b[p*ldb+j0 : p*ldb+j0+w]
			d := panel[p/2*panelW : p/2*panelW+w]
			if p+1 < k {
				hi := b[(p+1)*ldb+j0 : (p+1)*ldb+j0+w]
				for jj := range d {
					d[jj] = uint32(lo[jj]) | uint32(hi[jj])<<16
				}
			} else {
				for jj := range d {
					d[jj] = uint32(lo[jj])
				}
			}
		}
	}
	return pb
}

// pairKernels returns the implementation's bf16 pair micro-kernels (index rows-1), the
// pure-Go ones when it has none.
func pairKernels(im *impl) []pairFn {
	if im.pair != nil {
		return im.pair
	}
	return genericPair
}

// runPairs is GemmPacked for a pair-packed B: tasks split rows and column panels as
// runPacked does; each task packs its A rows to bf16 pairs per depth block.
func runPairs(im *impl, p *problem, nt int) {
	kern := pairKernels(im)
	pb := p.packed
	m, n, k := p.m, p.n, p.k
	kpAll, kpS := (k+1)/2, pairStride(k)
	// Depth pairs per block: at most pairKC, the blocks of a depth as even as the unrolling
	// allows (576 deep: 144 + 144 pairs, not 256 + 32, whose short calls load and store C for
	// little work).
	blocks := (kpAll + pairKC - 1) / pairKC
	kcp := min(pairKC, ((kpAll+blocks-1)/blocks+3)&^3)
	kw := panelW // columns of a kernel call
	if tall := m > len(im.pairStream); !tall || m <= len(im.pairTall) {
		// Decode: each task streams its panels whole (all of the depth at once), with or
		// without software prefetch as the pairs' tuner has measured faster. Up to four rows
		// the streaming kernels take whole panels; more (batched decode), the tall kernels
		// take half panels, every row on each B vector.
		kern, kcp = im.pairStream, max(kpAll, 1)
		if tall {
			kern, kw = im.pairTall, panelW/2
		}
		probe := decodeTuner(tunePairsIdx, m, tall).Begin([3]int{n, k, m}, 2*n*k)
		defer probe.End()
		if probe.PF() {
			if !tall && im.pairStreamPF != nil {
				kern = im.pairStreamPF
			} else if tall && im.pairTallPF != nil {
				kern = im.pairTallPF
			}
		}
	}
	mr := len(kern)
	panels := (n + panelW - 1) / panelW
	mc := max(mcBlock/mr, 1) * mr
	tm, tn := grid(m, panels, mr, mc, nt)
	words := unsafe.Pointer(&pb.u16[0])
	// One row range (m <= mc: decode, short passes): A is packed once, every depth block
	// (block pq at shared[pq*m:]), for all the tasks, which split the columns.
	var shared []uint32
	if tm == 1 && m <= mc && k > 0 {
		buf := bufPool.Get().(*floatBuf)
		defer bufPool.Put(buf)
		fs := buf.aligned(m*kpAll + kcp)
		ws := unsafe.Slice((*uint32)(unsafe.Pointer(&fs[0])), len(fs))
		shared = ws[:m*kpAll]
		for pq := 0; pq < kpAll; pq += kcp {
			packAPairs(im, shared[pq*m:], ws[m*kpAll:], p, 0, m, 2*pq, min(kcp, kpAll-pq), mr)
		}
	}
	parallel(tm*tn, nt, func(t int) {
		i0, i1 := split(m, tm, t/tn, mr)
		q0, q1 := split(panels, tn, t%tn, 1)
		if i0 >= i1 || q0 >= q1 {
			return
		}
		if !p.clearsPerTile() {
			scaleC(p, i0, i1, q0*panelW, min(q1*panelW, n))
		}
		if k == 0 {
			return
		}
		var ap, row []uint32 // the packed A block, one row's pairs
		if shared == nil {
			buf := bufPool.Get().(*floatBuf)
			defer bufPool.Put(buf)
			na := min(mc, i1-i0) * min(kcp, kpAll)
			fs := buf.aligned(na + kcp)
			ws := unsafe.Slice((*uint32)(unsafe.Pointer(&fs[0])), len(fs))
			ap, row = ws[:na], ws[na:na+kcp]
		}
		tile := bufPool.Get().(*floatBuf)
		defer bufPool.Put(tile)
		for pq := 0; pq < kpAll; pq += kcp {
			kp := min(kcp, kpAll-pq)
			for ic := i0; ic < i1; ic += mc {
				mcc := min(mc, i1-ic)
				if shared != nil { // ic = 0, mcc = m
					ap = shared[pq*m : pq*m+m*kp]
				} else {
					packAPairs(im, ap, row, p, ic, mcc, 2*pq, kp, mr)
				}
				for q := q0; q < q1; q++ {
					for h := 0; h < panelW && q*panelW+h < n; h += kw {
						bp := (*uint16)(unsafe.Add(words, uintptr((q*kpS+pq)*panelW+h)*4))
						cols := min(kw, n-q*panelW-h)
						for ir := 0; ir < mcc; ir += mr {
							rows := min(mr, mcc-ir)
							a := &ap[ir*kp]
							c, ldc := p.cAt(ic+ir, q*panelW+h)
							zero := pq == 0 && p.clearsPerTile()
							if cols == kw {
								if zero {
									zeroTile(c, ldc, rows, cols)
								}
								kern[rows-1](kp, a, bp, &c[0], ldc)
								continue
							}
							tt := tile.tile[:rows*panelW]
							if zero {
								clear(tt)
							} else {
								loadEdge(tt, panelW, c, ldc, rows, cols)
							}
							kern[rows-1](kp, a, bp, &tt[0], panelW)
							storeEdge(c, ldc, tt, panelW, rows, cols)
						}
					}
				}
			}
		}
	})
}

// packAPairs packs rows [i0,i0+mc) and depth [p0,p0+2kp) of op(A), scaled by alpha and
// rounded to bf16, into dst as panels of mr rows (the last one of the rows left), panel
// ip/mr at dst[ip*kp:], word q*rows+i holding depths p0+2q (low) and p0+2q+1 (high) of row
// i; depths past k are zero. row is scratch of at least kp words.
func packAPairs(im *impl, dst, row []uint32, p *problem, i0, mc, p0, kp, mr int) {
	for ip := 0; ip < mc; ip += mr {
		rows := min(mr, mc-ip)
		panel := dst[ip*kp : ip*kp+rows*kp]
		done := 0 // pairs packed by the panel kernel: those pairRow would convert in vectors
		if rows == mr && mr <= tallRows && im.packAPairs[mr] != nil && !p.transA {
			if done = min(kp, max(0, (p.k-p0)/2)) &^ 15; done > 0 {
				im.packAPairs[mr](done, &p.a[(i0+ip)*p.lda+p0], p.lda, &panel[0], p.alpha)
			}
		}
		for r := 0; r < rows; r++ {
			pairRow(im, row[:kp-done], p, i0+ip+r, p0+2*done)
			for q, w := range row[:kp-done] {
				panel[(done+q)*rows+r] = w
			}
		}
	}
}

// pairRow writes row i of op(A) from depth p0 on, scaled by alpha and rounded to bf16, as
// len(dst) pairs (even depth in the low half); depths past k are zero.
func pairRow(im *impl, dst []uint32, p *problem, i, p0 int) {
	k, alpha := p.k, p.alpha
	full := min(len(dst), max(0, (k-p0)/2)) // pairs with both depths inside k
	if !p.transA {
		src := p.a[i*p.lda+p0:]
		done := 0
		if im.packRow != nil && full >= 16 {
			done = full &^ 15
			im.packRow(done, &src[0], &dst[0], alpha)
		}
		for q := done; q < full; q++ {
			dst[q] = uint32(roundBF16(alpha*src[2*q])) | uint32(roundBF16(alpha*src[2*q+1]))<<16
		}
	} else {
		for q := 0; q < full; q++ {
			d := p0 + 2*q
			dst[q] = uint32(roundBF16(alpha*p.a[d*p.lda+i])) | uint32(roundBF16(alpha*p.a[(d+1)*p.lda+i]))<<16
		}
	}
	for q := full; q < len(dst); q++ {
		var lo float32
		if d := p0 + 2*q; d < k {
			if p.transA {
				lo = p.a[d*p.lda+i]
			} else {
				lo = p.a[i*p.lda+d]
			}
		}
		dst[q] = uint32(roundBF16(alpha * lo)) // its odd depth is past k
	}
}

// roundBF16 is Float32ToBF16 without the NaN case (a NaN input still gives a NaN or ±Inf
// pattern, which propagates as it would in f32).
func roundBF16(f float32) uint16 {
	b := math.Float32bits(f)
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// genericPair holds the pure-Go pair kernels for 1..14 rows.
var genericPair = func() []pairFn {
	fns := make([]pairFn, 14)
	for r := range fns {
		rows := r + 1
		fns[r] = func(kp int, a *uint32, b *uint16, c *float32, ldc int) { pairGo(rows, kp, a, b, c, ldc) }
	}
	return fns
}()

func pairGo(rows, kp int, a *uint32, b *uint16, c *float32, ldc int) {
	pairGoCols(rows, panelW, kp, a, b, c, ldc)
}

// pairGoCols is pairGo on the first cols columns of the panel (B still panelW words per depth
// pair): the tall pair kernels' sums (cols 16).
func pairGoCols(rows, cols, kp int, a *uint32, b *uint16, c *float32, ldc int) {
	if kp == 0 {
		return
	}
	as := unsafe.Slice(a, kp*rows)
	bs := unsafe.Slice((*uint32)(unsafe.Pointer(b)), (kp-1)*panelW+cols)
	cs := unsafe.Slice(c, (rows-1)*ldc+cols)
	var acc [panelW]float32
	for i := 0; i < rows; i++ {
		row := cs[i*ldc : i*ldc+cols]
		copy(acc[:], row) // one chain per element from C, as the assembly kernels
		for q := 0; q < kp; q++ {
			aw := as[q*rows+i]
			alo, ahi := math.Float32frombits(aw<<16), math.Float32frombits(aw&0xffff0000)
			for j, w := range bs[q*panelW : q*panelW+cols] {
				s := acc[j] + ahi*math.Float32frombits(w&0xffff0000)
				acc[j] = s + alo*math.Float32frombits(w<<16)
			}
		}
		copy(row, acc[:cols])
	}
}

// amxConfig is the AMX tile configuration of amxBlock: palette 1, tiles 0..7 of 16 rows of
// 64 bytes (C: 16×16 f32; A: 16 rows × 16 pairs; B: 16 pairs × 16 columns).
var amxConfig = func() (cfg [64]byte) {
	cfg[0] = 1
	for t := 0; t < 8; t++ {
		cfg[16+2*t] = 64
		cfg[48+t] = 16
	}
	return
}()

// amxRows is the row block of amxBlock; amxDepth the depth pairs of one A block.
const (
	amxRows  = 32
	amxDepth = 128
)

// runAMX is GemmPacked for a pair-packed B on AMX: tasks split rows (blocks of 32) and column
// panels; per depth block of 128 pairs each task packs 32 rows of A (rows past m zero) and
// calls amxBlock once over its full panels, and per edge panel (or edge rows) into a tile of
// its own.
func runAMX(im *impl, p *problem, nt int) {
	pb := p.packed
	m, n, k := p.m, p.n, p.k
	kpS := pairStride(k)
	panels := (n + panelW - 1) / panelW
	tm, tn := grid(m, panels, amxRows, 4*amxRows, nt)
	words := unsafe.Pointer(&pb.u16[0])
	bAt := func(q, pq int) *uint16 { return (*uint16)(unsafe.Add(words, uintptr((q*kpS+pq)*panelW)*4)) }
	parallel(tm*tn, nt, func(t int) {
		i0, i1 := split(m, tm, t/tn, amxRows)
		q0, q1 := split(panels, tn, t%tn, 1)
		if i0 >= i1 || q0 >= q1 {
			return
		}
		// beta 0: the first depth block writes C without reading it (TILEZERO), so C is
		// never cleared first.
		zeroC := p.beta == 0
		if !zeroC {
			scaleC(p, i0, i1, q0*panelW, min(q1*panelW, n))
		}
		buf := bufPool.Get().(*floatBuf)
		defer bufPool.Put(buf)
		fs := buf.aligned(amxRows*amxDepth + amxRows*panelW)
		ap := unsafe.Slice((*uint32)(unsafe.Pointer(&fs[0])), amxRows*amxDepth)
		ct := fs[amxRows*amxDepth:]
		qFull := min(q1, n/panelW) // panels [q0, qFull) have all their columns
		for pq := 0; pq < kpS; pq += amxDepth {
			kp := min(amxDepth, kpS-pq)
			load := 1
			if zeroC && pq == 0 {
				load = 0
			}
			for ir := i0; ir < i1; ir += amxRows {
				rows := min(amxRows, i1-ir)
				packAAMX(im, ap, p, ir, rows, 2*pq, kp)
				qe := q0
				if rows == amxRows && qFull > q0 {
					amxBlock(kp/16, &ap[0], kp*4, bAt(q0, pq), kpS*panelW*4, qFull-q0, &p.c[ir*p.ldc+q0*panelW], p.ldc, &amxConfig[0], load)
					qe = qFull
				}
				for q := qe; q < q1; q++ {
					cols := min(panelW, n-q*panelW)
					c := p.c[ir*p.ldc+q*panelW:]
					if load == 1 { // the tile starts from C, as the full ones (row invariance)
						loadEdge(ct[:amxRows*panelW], panelW, c, p.ldc, rows, cols)
					}
					amxBlock(kp/16, &ap[0], kp*4, bAt(q, pq), 0, 1, &ct[0], panelW, &amxConfig[0], load)
					storeEdge(c, p.ldc, ct, panelW, rows, cols)
				}
			}
		}
	})
}

// packAAMX packs rows [i0,i0+rows) of op(A), depth pairs [p0/2, p0/2+kp), scaled by alpha and
// rounded to bf16, into dst as 32 rows of kp words (row r at dst[r*kp:]); rows past rows and
// depths past k are zero.
func packAAMX(im *impl, dst []uint32, p *problem, i0, rows, p0, kp int) {
	for r := 0; r < amxRows; r++ {
		row := dst[r*kp : r*kp+kp]
		if r >= rows {
			clear(row)
			continue
		}
		pairRow(im, row, p, i0+r, p0)
	}
}

// FastBF16 reports whether products of many rows (64 and more: prefill, training) with a
// pair-packed B run faster than in f32 arithmetic in the implementation in use: on AMX tiles,
// or with VDPBF16PS where it was measured faster (BF16PairRows).
func FastBF16() bool {
	r := BF16PairRows()
	return r > 0 && r <= amxPairRows
}

package gemm

import "unsafe"

// The pure-Go implementation: used on CPUs without the assembly kernels, with the build tag
// purego, and as the reference the assembly is tested against.

const (
	genericMR = 4
	genericNR = 16
)

var genericImpl = &impl{
	name:   "generic",
	mr:     genericMR,
	nr:     genericNR,
	micro:  [3]microFn{microGeneric[float32], microGeneric[uint16], microGenericF16},
	chainT: true,
}

// widen converts one stored B element to f32: f32 as is, uint16 as bf16.
func widen[E float32 | uint16](v E) float32 {
	switch x := any(v).(type) {
	case float32:
		return x
	case uint16:
		return BF16ToFloat32(x)
	}
	return 0
}

// microGeneric is the micro-kernel for f32 (E = float32) or bf16 (E = uint16) B. As the
// assembly ones, it sums each element of C in one chain in depth order from C's value.
func microGeneric[E float32 | uint16](kc int, a *float32, b unsafe.Pointer, ldb int, c *float32, ldc int) {
	const mr, nr = genericMR, genericNR
	A := unsafe.Slice(a, kc*mr)
	var acc [mr][nr]float32
	loadTile(&acc, c, ldc)
	for p := 0; p < kc; p++ {
		brow := unsafe.Slice((*E)(unsafe.Add(b, uintptr(p*ldb)*unsafe.Sizeof(E(0)))), nr)
		var bv [nr]float32
		for j, v := range brow {
			bv[j] = widen(v)
		}
		ap := A[p*mr : p*mr+mr]
		for i := range acc {
			ai := ap[i]
			row := &acc[i]
			for j := range row {
				row[j] += ai * bv[j]
			}
		}
	}
	storeTile(&acc, c, ldc)
}

// microGenericF16 is the micro-kernel for f16 B.
func microGenericF16(kc int, a *float32, b unsafe.Pointer, ldb int, c *float32, ldc int) {
	const mr, nr = genericMR, genericNR
	A := unsafe.Slice(a, kc*mr)
	var acc [mr][nr]float32
	loadTile(&acc, c, ldc)
	for p := 0; p < kc; p++ {
		brow := unsafe.Slice((*uint16)(unsafe.Add(b, uintptr(p*ldb)*2)), nr)
		var bv [nr]float32
		for j, v := range brow {
			bv[j] = F16ToFloat32(v)
		}
		ap := A[p*mr : p*mr+mr]
		for i := range acc {
			ai := ap[i]
			row := &acc[i]
			for j := range row {
				row[j] += ai * bv[j]
			}
		}
	}
	storeTile(&acc, c, ldc)
}

func loadTile(acc *[genericMR][genericNR]float32, c *float32, ldc int) {
	for i := range acc {
		copy(acc[i][:], unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(c), uintptr(i*ldc)*4)), genericNR))
	}
}

func storeTile(acc *[genericMR][genericNR]float32, c *float32, ldc int) {
	for i := range acc {
		copy(unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(c), uintptr(i*ldc)*4)), genericNR), acc[i][:])
	}
}

// runChainT is y = x·Wᵀ for the pure-Go implementation (chainT), with few rows: each element
// the micro-kernels' sum (one chain in depth order of alpha·x times w, from beta·C), with W
// read in place, a group of dotNW rows against two rows of x at a time (eight chains).
func runChainT(p *problem, nt int) {
	m, k := p.m, p.k
	xbuf := bufPool.Get().(*floatBuf)
	defer bufPool.Put(xbuf)
	xs := xbuf.aligned(m * k) // op(A) scaled by alpha, as packA scales it
	for i := 0; i < m; i++ {
		row := xs[i*k : (i+1)*k]
		for q := range row {
			if p.transA {
				row[q] = p.alpha * p.a[q*p.lda+i]
			} else {
				row[q] = p.alpha * p.a[i*p.lda+q]
			}
		}
	}
	groups := (p.n + dotNW - 1) / dotNW
	if nt == 1 {
		chainGroups(p, xs, 0, groups)
		return
	}
	tasks := min(groups, tasksPerThread*nt)
	q := p.shared()
	parallel(tasks, nt, func(t int) {
		g0, g1 := split(groups, tasks, t, 1)
		chainGroups(q, xs, g0, g1)
	})
}

// chainGroups is runChainT's work on the groups [g0,g1) of dotNW rows of W.
func chainGroups(p *problem, xs []float32, g0, g1 int) {
	m, n, k := p.m, p.n, p.k
	for g := g0; g < g1; g++ {
		j0 := g * dotNW
		rows := min(dotNW, n-j0)
		var w [dotNW]int // the group's W rows (the last one again past n)
		for r := range w {
			w[r] = (j0 + min(r, rows-1)) * p.ldb
		}
		for i0 := 0; i0 < m; i0 += 2 {
			var acc [2][dotNW]float32
			for i := i0; i < min(i0+2, m); i++ {
				crow := p.c[i*p.ldc+j0:][:rows]
				for r, v := range crow { // from beta·C, as scaleC leaves C
					switch p.beta {
					case 0:
					case 1:
						acc[i-i0][r] = v
					default:
						acc[i-i0][r] = v * p.beta
					}
				}
			}
			x0 := xs[i0*k : (i0+1)*k]
			x1 := x0 // a lone last row computes its sums twice
			if i0+1 < m {
				x1 = xs[(i0+1)*k : (i0+2)*k]
			}
			switch p.bKind {
			case kindF32:
				chain4(&acc, x0, x1, p.b32, w, func(v float32) float32 { return v })
			case kindBF16:
				chain4(&acc, x0, x1, p.b16, w, BF16ToFloat32)
			default:
				chain4(&acc, x0, x1, p.b16, w, F16ToFloat32)
			}
			for i := i0; i < min(i0+2, m); i++ {
				copy(p.c[i*p.ldc+j0:][:rows], acc[i-i0][:rows])
			}
		}
	}
}

// chain4 adds Σ_q x0[q]·w_r[q] to acc[0][r] and Σ_q x1[q]·w_r[q] to acc[1][r] for the four
// rows of W at b[w[r]:], one chain per element in q's order (the micro-kernels' row[j] +=
// ai * bv[j], the same expression, so the same rounding and the same fusing where the
// compiler fuses).
func chain4[E float32 | uint16](acc *[2][dotNW]float32, x0, x1 []float32, b []E, w [dotNW]int, widen func(E) float32) {
	k := len(x0)
	w0, w1, w2, w3 := b[w[0]:w[0]+k], b[w[1]:w[1]+k], b[w[2]:w[2]+k], b[w[3]:w[3]+k]
	x1 = x1[:k]
	a00, a01, a02, a03 := acc[0][0], acc[0][1], acc[0][2], acc[0][3]
	a10, a11, a12, a13 := acc[1][0], acc[1][1], acc[1][2], acc[1][3]
	for q, xa := range x0 {
		xb := x1[q]
		v0, v1, v2, v3 := widen(w0[q]), widen(w1[q]), widen(w2[q]), widen(w3[q])
		a00 += xa * v0
		a01 += xa * v1
		a02 += xa * v2
		a03 += xa * v3
		a10 += xb * v0
		a11 += xb * v1
		a12 += xb * v2
		a13 += xb * v3
	}
	acc[0] = [dotNW]float32{a00, a01, a02, a03}
	acc[1] = [dotNW]float32{a10, a11, a12, a13}
}

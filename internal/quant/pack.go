package quant

import (
	"math"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
)

// The packed layout (Matrix.Pack): the rows in groups of 16, and per group its nb blocks of
// 32 columns one after the other, each block holding the 16 rows' scales and then their
// values interleaved by 4 columns: value j of row r (0 ≤ j < 32) at byte 64·(j/4) + 4·r + j%4
// of the values, as unsigned bytes u. One VPDPBUSD of those 64 bytes against 4 activation
// bytes broadcast then adds 4 columns to each of the 16 rows' sums, with no unpacking across
// lanes. A weight is a·u + c, a and c per row and block:
//
//	Q8_0: 16 float16 d, then 512 bytes u = q + 128 (a = d, c = −128·d); 544 bytes, as 16
//	      rows of 34.
//	Q5_0: 16 float16 d, then 256 bytes of nibbles: byte p of 64-byte part t holds value
//	      position p of column step t (low nibble) and step t+4 (high), then 8 × 8 bytes,
//	      the bits 4 of the 64 values of each step (bit p of qword k: position p of step
//	      k); u = q (0..31), a = d, c = −16·d; 352 bytes, as 16 rows of 22.
//	Q4_0: 16 float16 d, then the nibbles as Q5_0's; a = d, c = −8·d; 288 bytes (16 × 18).
//	Q4_1: 16 float16 d and 16 float16 m, then the nibbles; a = d, c = m; 320 bytes (16 × 20).
//	Q4_K: per sub-block of 32, 16 float32 a = d·scale and 16 float32 c = −dmin·min (exact:
//	      a float16 times a 6-bit integer), then the nibbles as Q5_0's; 384 bytes, a third
//	      more than Q4_K's 16 rows of 18 bytes per 32.
//
//	Q6_K: per sub-block of 32, 16 float32 a = d·scale of its first 16 columns and 16 of its
//	      last 16, then 512 bytes u = q (0..63), a weight a·(u − 32); 640 bytes, half again
//	      Q6_K's 16 rows of 26.25 bytes per 32. Its offset is per 16 columns, so its
//	      kernels take the activations' sums per 16 (dx·Σx, computed with the
//	      activations when a product has a packed Q6_K matrix) instead of per 32.
//
// A group's blocks are reduced against the activations of Acts32 (also for Q4_K, whose
// unpacked kernels take ActsK) by the packed kernels: per block Σ over rows r of
// a[r]·dx·Σu·x + c[r]·dx·Σx (dx·Σx is Acts32.S).
const packRows = 16

// packable reports whether t has a packed layout.
func packable(t gguf.TensorType) bool {
	switch t {
	case gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q4_K, gguf.Q6_K:
		return true
	}
	return false
}

// packedBlockBytes is the size of one block of 32 columns of a group of 16 rows.
func packedBlockBytes(t gguf.TensorType) int {
	switch t {
	case gguf.Q4_K:
		return 384
	case gguf.Q6_K:
		return 640
	}
	return packRows * t.BlockBytes()
}

// packedOffset is the o of the types whose c is −o·a.
func packedOffset(t gguf.TensorType) float32 {
	switch t {
	case gguf.Q8_0:
		return 128
	case gguf.Q4_0:
		return 8
	}
	return 16
}

// Pack makes the copy of the matrix in the packed layout that MatMulT and MatMulTMany then
// multiply with (AVX-512 VNNI CPUs, types Q8_0, Q4_0, Q4_1, Q5_0, Q4_K and Q6_K, Rows a
// multiple of 16; elsewhere it does nothing) and reports whether it did. The copy holds the
// rows in order (SetRowOrder's, if set). Data stays as it was, but the products and Row
// read the copy, so the caller may drop the pages of a mapped file behind it: they are no
// longer touched.
func (m *Matrix) Pack() bool { return m.PackDropping(nil) }

// PackDropping is Pack that, as it goes, hands drop the part of Data it has packed (every few
// MiB, when the rows are in order): a loader drops a mapped file's pages behind it, so that
// packing a large tensor (an embedding of 262,144 rows: 178 MB of Q8_0) does not hold the
// file's pages and the copy both.
func (m *Matrix) PackDropping(drop func(done []byte)) bool {
	if !packedKernelsInUse || !packable(m.Type) || m.Rows%packRows != 0 || m.packed != nil {
		return m.packed != nil
	}
	if m.order != nil {
		drop = nil // rows read out of order
	}
	m.packed = packMatrix(m, drop)
	return true
}

// dropEvery is how much of Data PackDropping packs between two calls of drop.
const dropEvery = 4 << 20

// Packed reports whether the matrix has a packed copy (Pack).
func (m *Matrix) Packed() bool { return m.packed != nil }

// packedMem is a packed copy; its memory may be mapped outside the Go heap (allocPacked),
// given back when the packedMem is collected, so Matrix values that share it may be copied.
// A view's (RowsView) b is part of its owner's, which it keeps alive.
type packedMem struct {
	b     []byte
	owner *packedMem
}

func packMatrix(m *Matrix, drop func([]byte)) *packedMem {
	nb, bb := m.Cols/32, packedBlockBytes(m.Type)
	p := new(packedMem)
	p.b = allocPacked(p, m.Rows/packRows*nb*bb)
	out := p.b
	dropped := 0
	for g := range m.Rows / packRows {
		if done := g * packRows * m.RowBytes(); drop != nil && done-dropped >= dropEvery {
			drop(m.Data[dropped:done])
			dropped = done
		}
		for b := range nb {
			dst := out[(g*nb+b)*bb : (g*nb+b+1)*bb]
			var u [packRows][32]byte
			for r := range packRows {
				row := m.RowData(g*packRows + r)
				switch m.Type {
				case gguf.Q8_0:
					blk := row[34*b : 34*b+34]
					copy(dst[2*r:2*r+2], blk[:2])
					for j := range 32 {
						u[r][j] = blk[2+j] ^ 0x80
					}
				case gguf.Q4_0, gguf.Q4_1:
					size, hd := 18, 2
					if m.Type == gguf.Q4_1 {
						size, hd = 20, 4
						copy(dst[32+2*r:32+2*r+2], row[size*b+2:size*b+4])
					}
					blk := row[size*b : size*b+size]
					copy(dst[2*r:2*r+2], blk[:2])
					for i, v := range blk[hd:] {
						u[r][i], u[r][i+16] = v&15, v>>4
					}
				case gguf.Q5_0:
					blk := row[22*b : 22*b+22]
					copy(dst[2*r:2*r+2], blk[:2])
					qh := le.Uint32(blk[2:])
					for i, v := range blk[6:22] {
						u[r][i] = v&15 | byte(qh>>i&1)<<4
						u[r][i+16] = v>>4 | byte(qh>>(i+16)&1)<<4
					}
				case gguf.Q6_K:
					blk, j := row[210*(b/8):210*(b/8)+210], b%8
					d := f16(blk[208:])
					le.PutUint32(dst[4*r:], math.Float32bits(d*float32(int8(blk[192+2*j]))))
					le.PutUint32(dst[64+4*r:], math.Float32bits(d*float32(int8(blk[192+2*j+1]))))
					for l := range 32 {
						u[r][l] = q6KValue(blk, 32*j+l)
					}
				case gguf.Q4_K:
					blk, j := row[144*(b/8):144*(b/8)+144], b%8
					sc, mn := gguf.ScaleMin(blk[4:16], j)
					le.PutUint32(dst[4*r:], math.Float32bits(f16(blk)*float32(sc)))
					le.PutUint32(dst[64+4*r:], math.Float32bits(-f16(blk[2:])*float32(mn)))
					chunk, shift := blk[16+32*(j/2):16+32*(j/2)+32], 4*(j%2)
					for l, v := range chunk {
						u[r][l] = v >> shift & 15
					}
				}
			}
			vals := dst[packedScaleBytes(m.Type):]
			for r := range packRows {
				for j := range 32 {
					step, pos := j/4, 4*r+j%4
					if m.Type == gguf.Q8_0 || m.Type == gguf.Q6_K {
						vals[64*step+pos] = u[r][j]
						continue
					}
					nib := u[r][j] & 15
					if step < 4 {
						vals[64*step+pos] |= nib
					} else {
						vals[64*(step-4)+pos] |= nib << 4
					}
					if u[r][j]&16 != 0 {
						vals[256+8*step+pos/8] |= 1 << (pos % 8)
					}
				}
			}
		}
	}
	return p
}

// packedRow is Row from the packed copy: row r's values, as DequantizeTo gives them from its
// blocks (the same operations on the same scales).
func (m *Matrix) packedRow(out []float32, r int) {
	t, nb, bb, sb := m.Type, m.Cols/32, packedBlockBytes(m.Type), packedScaleBytes(m.Type)
	g, rr := r/packRows, r%packRows
	for b := range nb {
		blk := m.packed.b[(g*nb+b)*bb : (g*nb+b+1)*bb]
		vals, x := blk[sb:], out[32*b:32*b+32]
		switch t {
		case gguf.Q4_1, gguf.Q4_K:
			a, c := packedScales(t, blk, rr)
			for j := range x {
				x[j] = float32(a*float32(packedValue(t, vals, rr, j))) + c
			}
		case gguf.Q6_K:
			a := [2]float32{math.Float32frombits(le.Uint32(blk[4*rr:])), math.Float32frombits(le.Uint32(blk[64+4*rr:]))}
			for j := range x {
				x[j] = a[j/16] * float32(packedValue(t, vals, rr, j)-32)
			}
		default: // Q8_0, Q4_0, Q5_0: d·(u − o)
			d, o := f16(blk[2*rr:]), int32(packedOffset(t))
			for j := range x {
				x[j] = d * float32(packedValue(t, vals, rr, j)-o)
			}
		}
	}
}

// packedScaleBytes is the size of a packed block's scales (before its values).
func packedScaleBytes(t gguf.TensorType) int {
	switch t {
	case gguf.Q4_K, gguf.Q6_K:
		return 128
	case gguf.Q4_1:
		return 64
	}
	return 32
}

// packedScales is row r's a and c of a packed block.
func packedScales(t gguf.TensorType, blk []byte, r int) (a, c float32) {
	if t == gguf.Q4_K {
		return math.Float32frombits(le.Uint32(blk[4*r:])), math.Float32frombits(le.Uint32(blk[64+4*r:]))
	}
	a = f16(blk[2*r:])
	if t == gguf.Q4_1 {
		return a, f16(blk[32+2*r:])
	}
	return a, -packedOffset(t) * a
}

// packedValue is the unsigned value u of row r, column j of a packed block's values.
func packedValue(t gguf.TensorType, vals []byte, r, j int) int32 {
	step, pos := j/4, 4*r+j%4
	if t == gguf.Q8_0 || t == gguf.Q6_K {
		return int32(vals[64*step+pos])
	}
	nib := vals[64*(step%4)+pos]
	if step >= 4 {
		nib >>= 4
	}
	u := int32(nib & 15)
	if t == gguf.Q5_0 && vals[256+8*step+pos/8]>>(pos%8)&1 != 0 {
		u |= 16
	}
	return u
}

// packed16 is the packed kernels' reference: the products of one packed group of 16 rows
// (w, nb blocks) with n activation rows stored one after the other (q n rows of 32·nb, d and
// s n rows of nb), out[16·i+r] for activation row i and weight row r. The assembly ones
// replace it at init (packed16x4 for n = 4, packed16x1 for n = 1).
//
// For Q6_K, s holds the activations' sums per 16 columns (2·nb per row).
func packed16Go(t gguf.TensorType, w []byte, q []int8, d, s []float32, n int, out []float32) {
	nb, bb, sb := len(d)/n, packedBlockBytes(t), packedScaleBytes(t)
	for i := range n {
		for r := range packRows {
			sum := float32(0)
			for b := range nb {
				blk := w[b*bb : (b+1)*bb]
				x := q[32*(nb*i+b) : 32*(nb*i+b+1)]
				var si [2]int32
				for j := range 32 {
					si[j/16] += packedValue(t, blk[sb:], r, j) * int32(x[j])
				}
				dx := d[nb*i+b]
				if t == gguf.Q6_K {
					alo := math.Float32frombits(le.Uint32(blk[4*r:]))
					ahi := math.Float32frombits(le.Uint32(blk[64+4*r:]))
					sum += alo*dx*float32(si[0]) + ahi*dx*float32(si[1]) - 32*alo*s[2*(nb*i+b)] - 32*ahi*s[2*(nb*i+b)+1]
					continue
				}
				a, c := packedScales(t, blk, r)
				sum += a*dx*float32(si[0]+si[1]) + c*s[nb*i+b]
			}
			out[packRows*i+r] = sum
		}
	}
}

// q6KValue is the unsigned 6-bit value e (0 ≤ e < 256) of a Q6_K block.
func q6KValue(blk []byte, e int) byte {
	h, k, l := e/128, e%128/32, e%32
	ql, qh := blk[64*h:64*h+64], blk[128+32*h:128+32*h+32]
	switch k {
	case 0:
		return ql[l]&15 | (qh[l]&3)<<4
	case 1:
		return ql[l+32]&15 | (qh[l]>>2&3)<<4
	case 2:
		return ql[l]>>4 | (qh[l]>>4&3)<<4
	}
	return ql[l+32]>>4 | (qh[l]>>6)<<4
}

// packedKernel is the kernel MatMulT runs on a packed group against n (4 or 1) activation
// rows; packedKernelPF, where not nil, the same whose one-row kernels prefetch the weights in
// software (decode), which x1Tuners choose per type by measurement (gemm.PrefetchTuner);
// packedKernelsInUse reports whether Pack packs (an assembly kernel is in use).
var (
	packedKernel       = packed16Go
	packedKernelPF     func(t gguf.TensorType, w []byte, q []int8, d, s []float32, n int, out []float32)
	packedKernelsInUse = false
	x1Tuners           = map[gguf.TensorType]*gemm.PrefetchTuner{} // written by init only
)

// runPacked is work.run over a packed matrix: each group of 16 weight rows against 4
// activation rows at a time, then the rest one at a time.
func (w *work) runPacked(ti int) {
	t := w.tasks[ti]
	m := w.ms[t.m]
	typ, nb := m.Type, w.cols/32
	gb := nb * packedBlockBytes(typ)
	a, o := &w.a32, w.o64[ti][:]
	s, ns := a.S, nb // the offsets' activation sums and their count per row
	kernel := packedKernel
	if w.pf && packedKernelPF != nil {
		kernel = packedKernelPF
	}
	if typ == gguf.Q6_K {
		s, ns = w.s16, 2*nb
	}
	for i0 := t.x0; i0 < t.x1; i0 += xTile {
		i1 := min(i0+xTile, t.x1)
		for g := t.r0 / packRows; g < t.r1/packRows; g++ {
			wg := m.packed.b[g*gb : (g+1)*gb]
			col := t.off + packRows*g
			i := i0
			for ; i+4 <= i1; i += 4 {
				kernel(typ, wg, a.Q[32*nb*i:32*nb*(i+4)], a.D[nb*i:nb*(i+4)], s[ns*i:ns*(i+4)], 4, o)
				for j := range 4 {
					w.store(w.out[(i+j)*w.ldo+col:][:packRows], o[packRows*j:][:packRows])
				}
			}
			for ; i < i1; i++ {
				kernel(typ, wg, a.Q[32*nb*i:32*nb*(i+1)], a.D[nb*i:nb*(i+1)], s[ns*i:ns*(i+1)], 1, o)
				w.store(w.out[i*w.ldo+col:][:packRows], o[:packRows])
			}
		}
	}
}

// store writes (or adds, accumulating) v to out.
func (w *work) store(out, v []float32) {
	if w.acc {
		for j, x := range v {
			out[j] += x
		}
	} else {
		copy(out, v)
	}
}

// sums16 writes the activations' sums per 16 columns, dx·Σq, of row i (packed Q6_K's
// offsets) into w.s16.
func (w *work) sums16(i int) {
	n, a := w.cols, &w.a32
	q, s := a.Q[i*n:(i+1)*n], w.s16[i*n/16:(i+1)*n/16]
	for g := range s {
		t := int32(0)
		for _, v := range q[16*g : 16*g+16] {
			t += int32(v)
		}
		s[g] = a.D[i*n/32+g/2] * float32(t)
	}
}

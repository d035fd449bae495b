package quant

import (
	"encoding/binary"
	"math"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
)

// Acts32 is a row of activations quantized for the 32-element block types: Q holds the
// int8 values, D[b] the scale of block b (x ≈ D[b]·Q[i]) and S[b] = D[b]·ΣQ over block b
// (what the offset m of Q4_1 and Q5_1 multiplies).
type Acts32 struct {
	Q    []int8
	D, S []float32
}

// ActsK is a row of activations quantized for the K-quants (ggml's Q8_K): Q holds the int8
// values, D[b] the scale of super-block b of 256 and BSums[g] the sum of Q over group g of
// 16 elements (what the K-quants' mins and Q6_K's offset multiply).
type ActsK struct {
	Q     []int8
	D     []float32
	BSums []int16
}

// QuantizeActs32 quantizes x (a multiple of 32 long) into a (sized to fit): per block of 32,
// D = max|x|/127 and Q = x·(1/D) rounded to the nearest integer, ties to even.
func QuantizeActs32(a *Acts32, x []float32) {
	nb := len(x) / 32
	a.Q, a.D, a.S = resize(a.Q, len(x)), resize(a.D, nb), resize(a.S, nb)
	quantizeActs32(a.Q, a.D, a.S, x)
}

// quantizeActs32 is QuantizeActs32 into q, d, s of the sizes it needs (replaced at init by
// an assembly version where there is one).
var quantizeActs32 = quantizeActs32Go

func quantizeActs32Go(q []int8, d, s []float32, x []float32) {
	for b := range d {
		db, sum := quantizeBlock(q[32*b:32*b+32], x[32*b:32*b+32])
		d[b], s[b] = db, db*float32(sum)
	}
}

// QuantizeActsK quantizes x (a multiple of 256 long) into a (sized to fit): per super-block
// of 256, D = max|x|/127 and Q = x·(1/D) rounded (ties to even), with the sums of each 16.
func QuantizeActsK(a *ActsK, x []float32) {
	nb := len(x) / 256
	a.Q, a.D, a.BSums = resize(a.Q, len(x)), resize(a.D, nb), resize(a.BSums, len(x)/16)
	quantizeActsK(a.Q, a.D, a.BSums, x)
}

// quantizeActsK is QuantizeActsK into qs, d, bsums of the sizes it needs.
func quantizeActsK(qs []int8, d []float32, bsums []int16, x []float32) {
	for b := range d {
		q := qs[256*b : 256*b+256]
		d[b], _ = quantizeBlock(q, x[256*b:256*b+256])
		for g := range 16 {
			s := 0
			for _, v := range q[16*g : 16*g+16] {
				s += int(v)
			}
			bsums[16*b+g] = int16(s)
		}
	}
}

// quantizeBlock quantizes x into q with the scale max|x|/127 and returns it with ΣQ.
func quantizeBlock(q []int8, x []float32) (float32, int) {
	amax := float32(0)
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	if amax == 0 {
		clear(q)
		return 0, 0
	}
	d := amax / 127
	id := 1 / d
	sum := 0
	for i, v := range x {
		r := int(math.RoundToEven(float64(v * id))) // ROUNDSD; VCVTPS2DQ's rounding
		r = min(max(r, -127), 127)
		q[i] = int8(r)
		sum += r
	}
	return d, sum
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

func resize[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

// The row kernels: the dot product of one weight row (len(d) blocks of its type) with a row
// of quantized activations. The assembly versions replace these at init where the CPU has
// the features they need (kernels_amd64.go); the Go versions stay the reference.
var (
	dotQ8_0 func(w []byte, q []int8, d []float32) float32    = dotQ8_0Go
	dotQ4_0 func(w []byte, q []int8, d []float32) float32    = dotQ4_0Go
	dotQ4_1 func(w []byte, q []int8, d, s []float32) float32 = dotQ4_1Go
	dotQ5_0 func(w []byte, q []int8, d []float32) float32    = dotQ5_0Go
	dotQ5_1 func(w []byte, q []int8, d, s []float32) float32 = dotQ5_1Go

	dotQ4_K func(w []byte, q []int8, d []float32, bsums []int16) float32 = dotQ4_KGo
	dotQ5_K func(w []byte, q []int8, d []float32, bsums []int16) float32 = dotQ5_KGo
	dotQ6_K func(w []byte, q []int8, d []float32, bsums []int16) float32 = dotQ6_KGo
)

// asmKernelsInUse reports whether the assembly row kernels replaced the Go ones above (all
// types' at once, by setAsmKernels at init).
var asmKernelsInUse bool

// The multi-row kernels: one weight row's products with 4 rows of activations quantized for
// the 32-element types, stored one after the other (q holds 4 rows of 32·nb values, d and s
// 4 rows of nb, nb = len(d)/4), into out. Each weight block is unpacked once for the 4 rows.
// The assembly versions (those of Q8_0, Q4_0 and Q5_0 use s for their offsets: Σ(q−o)·x =
// Σq·x − o·Σx) replace these at init; the Go versions, the reference, run the row kernels.
var (
	dot4Q8_0 kern4 = dot4Q8_0Go
	dot4Q4_0 kern4 = dot4Q4_0Go
	dot4Q4_1 kern4 = dot4Q4_1Go
	dot4Q5_0 kern4 = dot4Q5_0Go
	dot4Q5_1 kern4 = dot4Q5_1Go
)

type kern4 = func(w []byte, q []int8, d, s []float32, out *[4]float32)

// The K-quants' multi-row kernels, as the 32-element types' with the activations of ActsK
// (q 4 rows of 256·nb values, d 4 rows of nb, bsums 4 rows of 16·nb): nil where there is no
// assembly one (MatMulT then reduces a row at a time); dot4Q4_KGo and dot4Q6_KGo are the
// references the assembly is tested against.
var (
	dot4Q4_K kern4K
	dot4Q6_K kern4K
)

type kern4K = func(w []byte, q []int8, d []float32, bsums []int16, out *[4]float32)

// The single-row versions of the multi-row kernels: one weight row's product with one row of
// activations (len(d) blocks), by the multi-row kernel's operations for one of its rows in
// the same order, so that MatMulT gives a row the same bits whether it meets the weights
// among four rows or alone (the rows left over from the groups of four, decode): row
// invariance. The Go versions are the row kernels, which the Go multi-row kernels run per
// row; dot1Q4_K and dot1Q6_K are nil where dot4Q4_K and dot4Q6_K are. These check the
// slices' lengths; MatMulT calls the row1 ones, which do not.
var (
	dot1Q8_0 kern1 = go1(dotQ8_0Go)
	dot1Q4_0 kern1 = go1(dotQ4_0Go)
	dot1Q4_1 kern1 = dotQ4_1Go
	dot1Q5_0 kern1 = go1(dotQ5_0Go)
	dot1Q5_1 kern1 = dotQ5_1Go
	dot1Q4_K kern1K
	dot1Q6_K kern1K

	row1Q8_0, row1Q4_0, row1Q4_1, row1Q5_0, row1Q5_1 = dot1Q8_0, dot1Q4_0, dot1Q4_1, dot1Q5_0, dot1Q5_1
	row1Q4_K, row1Q6_K                               kern1K
)

type (
	kern1  = kern32s
	kern1K = kernK
)

// go1 is a kernel of the types without offsets as a kern1 (s unused).
func go1(f kern32) kern1 {
	return func(w []byte, q []int8, d, s []float32) float32 { return f(w, q, d) }
}

func dot4Q4_KGo(w []byte, q []int8, d []float32, bsums []int16, out *[4]float32) {
	nb := len(d) / 4
	for r := range out {
		out[r] = dotQ4_KGo(w, q[256*nb*r:256*nb*(r+1)], d[nb*r:nb*(r+1)], bsums[16*nb*r:16*nb*(r+1)])
	}
}

func dot4Q6_KGo(w []byte, q []int8, d []float32, bsums []int16, out *[4]float32) {
	nb := len(d) / 4
	for r := range out {
		out[r] = dotQ6_KGo(w, q[256*nb*r:256*nb*(r+1)], d[nb*r:nb*(r+1)], bsums[16*nb*r:16*nb*(r+1)])
	}
}

func dot4Q8_0Go(w []byte, q []int8, d, s []float32, out *[4]float32) {
	nb := len(d) / 4
	for r := range out {
		out[r] = dotQ8_0Go(w, q[32*nb*r:32*nb*(r+1)], d[nb*r:nb*(r+1)])
	}
}

func dot4Q4_0Go(w []byte, q []int8, d, s []float32, out *[4]float32) {
	nb := len(d) / 4
	for r := range out {
		out[r] = dotQ4_0Go(w, q[32*nb*r:32*nb*(r+1)], d[nb*r:nb*(r+1)])
	}
}

func dot4Q4_1Go(w []byte, q []int8, d, s []float32, out *[4]float32) {
	nb := len(d) / 4
	for r := range out {
		out[r] = dotQ4_1Go(w, q[32*nb*r:32*nb*(r+1)], d[nb*r:nb*(r+1)], s[nb*r:nb*(r+1)])
	}
}

func dot4Q5_0Go(w []byte, q []int8, d, s []float32, out *[4]float32) {
	nb := len(d) / 4
	for r := range out {
		out[r] = dotQ5_0Go(w, q[32*nb*r:32*nb*(r+1)], d[nb*r:nb*(r+1)])
	}
}

func dot4Q5_1Go(w []byte, q []int8, d, s []float32, out *[4]float32) {
	nb := len(d) / 4
	for r := range out {
		out[r] = dotQ5_1Go(w, q[32*nb*r:32*nb*(r+1)], d[nb*r:nb*(r+1)], s[nb*r:nb*(r+1)])
	}
}

// The row kernels as MatMulT calls them, without the assembly ones' checks of the slices'
// lengths (a closure call per row): its slices have the right lengths by construction.
var (
	rowQ8_0 kern32  = dotQ8_0Go
	rowQ4_0 kern32  = dotQ4_0Go
	rowQ4_1 kern32s = dotQ4_1Go
	rowQ5_0 kern32  = dotQ5_0Go
	rowQ5_1 kern32s = dotQ5_1Go
	rowQ4_K kernK   = dotQ4_KGo
	rowQ5_K kernK   = dotQ5_KGo
	rowQ6_K kernK   = dotQ6_KGo
)

type (
	kern32  = func(w []byte, q []int8, d []float32) float32
	kern32s = func(w []byte, q []int8, d, s []float32) float32
	kernK   = func(w []byte, q []int8, d []float32, bsums []int16) float32
)

var le = binary.LittleEndian

func f16(b []byte) float32 { return gemm.F16ToFloat32(le.Uint16(b)) }

func dotQ8_0Go(w []byte, q []int8, d []float32) float32 {
	sum := float32(0)
	for b, dx := range d {
		blk, x := w[34*b:34*b+34], q[32*b:32*b+32]
		s := int32(0)
		for i, v := range blk[2:34] {
			s += int32(int8(v)) * int32(x[i])
		}
		sum += f16(blk) * dx * float32(s)
	}
	return sum
}

func dotQ4_0Go(w []byte, q []int8, d []float32) float32 {
	sum := float32(0)
	for b, dx := range d {
		blk, x := w[18*b:18*b+18], q[32*b:32*b+32]
		s := int32(0)
		for i, v := range blk[2:18] {
			s += (int32(v&15)-8)*int32(x[i]) + (int32(v>>4)-8)*int32(x[i+16])
		}
		sum += f16(blk) * dx * float32(s)
	}
	return sum
}

func dotQ4_1Go(w []byte, q []int8, d, ss []float32) float32 {
	sum := float32(0)
	for b, dx := range d {
		blk, x := w[20*b:20*b+20], q[32*b:32*b+32]
		s := int32(0)
		for i, v := range blk[4:20] {
			s += int32(v&15)*int32(x[i]) + int32(v>>4)*int32(x[i+16])
		}
		sum += f16(blk)*dx*float32(s) + f16(blk[2:])*ss[b]
	}
	return sum
}

func dotQ5_0Go(w []byte, q []int8, d []float32) float32 {
	sum := float32(0)
	for b, dx := range d {
		blk, x := w[22*b:22*b+22], q[32*b:32*b+32]
		qh := le.Uint32(blk[2:])
		s := int32(0)
		for i, v := range blk[6:22] {
			lo := int32(v&15|byte(qh>>i&1)<<4) - 16
			hi := int32(v>>4|byte(qh>>(i+16)&1)<<4) - 16
			s += lo*int32(x[i]) + hi*int32(x[i+16])
		}
		sum += f16(blk) * dx * float32(s)
	}
	return sum
}

func dotQ5_1Go(w []byte, q []int8, d, ss []float32) float32 {
	sum := float32(0)
	for b, dx := range d {
		blk, x := w[24*b:24*b+24], q[32*b:32*b+32]
		qh := le.Uint32(blk[4:])
		s := int32(0)
		for i, v := range blk[8:24] {
			lo := int32(v&15 | byte(qh>>i&1)<<4)
			hi := int32(v>>4 | byte(qh>>(i+16)&1)<<4)
			s += lo*int32(x[i]) + hi*int32(x[i+16])
		}
		sum += f16(blk)*dx*float32(s) + f16(blk[2:])*ss[b]
	}
	return sum
}

// dotQ4_KGo and dotQ5_KGo: per super-block, d·dx·Σⱼ sc[j]·Σ q·x − dmin·dx·Σⱼ m[j]·Σ x, the
// last sum from the activations' group sums.
func dotQ4_KGo(w []byte, q []int8, d []float32, bsums []int16) float32 {
	return dotK45(w, q, d, bsums, false)
}

func dotQ5_KGo(w []byte, q []int8, d []float32, bsums []int16) float32 {
	return dotK45(w, q, d, bsums, true)
}

func dotK45(w []byte, q []int8, d []float32, bsums []int16, five bool) float32 {
	size := 144
	if five {
		size = 176
	}
	sum := float32(0)
	for b, dx := range d {
		blk, x, bs := w[size*b:size*b+size], q[256*b:256*b+256], bsums[16*b:16*b+16]
		scales := blk[4:16]
		var qh, qs []byte
		if five {
			qh, qs = blk[16:48], blk[48:176]
		} else {
			qs = blk[16:144]
		}
		sumi, summ := int32(0), int32(0)
		for j := range 8 {
			sc, m := gguf.ScaleMin(scales, j)
			chunk, shift := qs[32*(j/2):32*(j/2)+32], uint(4*(j%2))
			s := int32(0)
			for l, v := range chunk {
				u := v >> shift & 15
				if five {
					u |= (qh[l] >> j & 1) << 4
				}
				s += int32(u) * int32(x[32*j+l])
			}
			sumi += int32(sc) * s
			summ += int32(m) * (int32(bs[2*j]) + int32(bs[2*j+1]))
		}
		sum += f16(blk)*dx*float32(sumi) - f16(blk[2:])*dx*float32(summ)
	}
	return sum
}

// dotQ6_KGo: per super-block, d·dx·Σ_g scales[g]·(Σ q·x − 32·Σ x) over the 16 groups of 16.
func dotQ6_KGo(w []byte, q []int8, d []float32, bsums []int16) float32 {
	sum := float32(0)
	for b, dx := range d {
		blk, x, bs := w[210*b:210*b+210], q[256*b:256*b+256], bsums[16*b:16*b+16]
		var g [16]int32
		for h := range 2 {
			ql, qh, y := blk[64*h:64*h+64], blk[128+32*h:128+32*h+32], x[128*h:128*h+128]
			for l := range 32 {
				v := [4]int32{
					int32(ql[l]&15 | (qh[l]&3)<<4),
					int32(ql[l+32]&15 | (qh[l]>>2&3)<<4),
					int32(ql[l]>>4 | (qh[l]>>4&3)<<4),
					int32(ql[l+32]>>4 | (qh[l]>>6)<<4),
				}
				for k, u := range v {
					e := 32*k + l
					g[8*h+e/16] += u * int32(y[e])
				}
			}
		}
		sumi := int32(0)
		for i, s := range g {
			sumi += int32(int8(blk[192+i])) * (s - 32*int32(bs[i]))
		}
		sum += f16(blk[208:]) * dx * float32(sumi)
	}
	return sum
}

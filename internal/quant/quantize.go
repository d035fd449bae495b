package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
)

// Quantize encodes src, rows of cols elements, as tensor type t: Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K, Q6_K (and the plain F32, F16, BF16). cols must be a multiple of the
// type's block size (32, or 256 for the K-quants) and every value finite.
//
// The block quantizers follow ggml's reference ones (quantize_row_*_ref, what llama.cpp's
// llama-quantize runs without an importance matrix and what gguf-py implements), operation
// for operation in float32 with every product rounded on its own, so that they produce the
// same bytes:
//
//	Q8_0: d = amax/127, q = round(x/d) (half away from zero).
//	Q4_0, Q5_0: d = m/-8 (m/-16) where m is the value of largest magnitude, q = x/d + 8 (16),
//	  truncated, at most 15 (31).
//	Q4_1, Q5_1: d = (max-min)/15 (31), m = min, q = (x-min)/d + 0.5 truncated.
//	Q4_K, Q5_K: per sub-block of 32, a weighted least-squares fit of scale and min over a
//	  small grid of candidate inverse scales (ggml's make_qkx2_quants, weights |x| + rms),
//	  then the 8 scales and mins quantized to 6 bits against the super-block's d and dmin,
//	  and the values requantized against the rounded scales.
//	Q6_K: per sub-block of 16, a symmetric fit weighted by x² over 19 candidate scales
//	  (make_qx_quants), the 16 scales quantized to int8 against d = max scale/-128, and the
//	  values requantized.
//
// Rounding to nearest (ties to even) is ggml's nearest_int; float16 conversions round to
// nearest even.
func Quantize(t gguf.TensorType, src []float32, cols int) ([]byte, error) {
	row, ok := quantizers[t]
	if !ok {
		return nil, fmt.Errorf("quant: cannot quantize to %s (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)", t)
	}
	block := t.BlockSize()
	if cols <= 0 || cols%block != 0 {
		return nil, fmt.Errorf("quant: %s needs rows whose length is a multiple of %d, got %d columns", t, block, cols)
	}
	if len(src)%cols != 0 {
		return nil, fmt.Errorf("quant: %d values are not whole rows of %d columns", len(src), cols)
	}
	for i, v := range src {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("quant: value %d (row %d, column %d) is %v: only finite values can be quantized to %s", i, i/cols, i%cols, v, t)
		}
	}
	rows := len(src) / cols
	rowBytes := cols / block * t.BlockBytes()
	out := make([]byte, rows*rowBytes)
	workers := min(runtime.GOMAXPROCS(0), max(1, len(src)/(1<<16)))
	per := (rows + workers - 1) / max(workers, 1)
	var wg sync.WaitGroup
	for start := 0; start < rows; start += per {
		end := min(rows, start+per)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := start; r < end; r++ {
				x, y := src[r*cols:(r+1)*cols], out[r*rowBytes:(r+1)*rowBytes]
				for b := range cols / block {
					row(x[b*block:(b+1)*block], y[b*t.BlockBytes():(b+1)*t.BlockBytes()])
				}
			}
		}()
	}
	wg.Wait()
	return out, nil
}

// quantizers encode one block: x (BlockSize values) into y (BlockBytes bytes, zeroed).
var quantizers = map[gguf.TensorType]func(x []float32, y []byte){
	gguf.F32: func(x []float32, y []byte) {
		binary.LittleEndian.PutUint32(y, math.Float32bits(x[0]))
	},
	gguf.F16: func(x []float32, y []byte) {
		binary.LittleEndian.PutUint16(y, gemm.Float32ToF16(x[0]))
	},
	gguf.BF16: func(x []float32, y []byte) {
		binary.LittleEndian.PutUint16(y, gemm.Float32ToBF16(x[0]))
	},
	gguf.Q8_0: quantizeQ8_0,
	gguf.Q4_0: func(x []float32, y []byte) { quantizeSymmetric(x, y, 4) },
	gguf.Q5_0: func(x []float32, y []byte) { quantizeSymmetric(x, y, 5) },
	gguf.Q4_1: func(x []float32, y []byte) { quantizeMinMax(x, y, 4) },
	gguf.Q5_1: func(x []float32, y []byte) { quantizeMinMax(x, y, 5) },
	gguf.Q4_K: func(x []float32, y []byte) { quantizeK45(x, y, false) },
	gguf.Q5_K: func(x []float32, y []byte) { quantizeK45(x, y, true) },
	gguf.Q6_K: quantizeQ6_K,
}

// putHalf stores v rounded to float16 at y[0:2] and returns the stored value.
func putHalf(y []byte, v float32) float32 {
	h := gemm.Float32ToF16(v)
	binary.LittleEndian.PutUint16(y, h)
	return gemm.F16ToFloat32(h)
}

// roundInt is ggml's nearest_int: f rounded to the nearest integer, ties to even, by adding
// 1.5·2²³ in float32 and reading the low mantissa bits (|f| < 2²²).
func roundInt(f float32) int {
	v := f + 12582912
	return int(math.Float32bits(v)&0x007fffff) - 0x00400000
}

func absf(v float32) float32 { return float32(math.Abs(float64(v))) }

// quantizeQ8_0: d (f16), 32 int8.
func quantizeQ8_0(x []float32, y []byte) {
	var amax float32
	for _, v := range x {
		amax = max(amax, absf(v))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putHalf(y, d)
	for j, v := range x {
		y[2+j] = byte(int8(math.Round(float64(float32(v * id)))))
	}
}

// quantizeSymmetric is Q4_0 (bits 4: d, qs[16]) and Q5_0 (bits 5: d, qh uint32, qs[16]).
func quantizeSymmetric(x []float32, y []byte, bits int) {
	var amax, m float32
	for _, v := range x {
		if amax < absf(v) {
			amax, m = absf(v), v
		}
	}
	half := float32(int(1) << (bits - 1)) // 8 or 16
	top := int8(2*half - 1)
	d := m / -half
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putHalf(y, d)
	qs := y[2:]
	var qh uint32
	if bits == 5 {
		qs = y[6:]
	}
	for j := range 16 {
		q0 := min(top, int8(float32(x[j]*id)+(half+0.5)))
		q1 := min(top, int8(float32(x[j+16]*id)+(half+0.5)))
		qs[j] = byte(q0)&15 | byte(q1)&15<<4
		qh |= uint32(q0>>4&1)<<j | uint32(q1>>4&1)<<(j+16)
	}
	if bits == 5 {
		binary.LittleEndian.PutUint32(y[2:], qh)
	}
}

// quantizeMinMax is Q4_1 (bits 4: d, m, qs[16]) and Q5_1 (bits 5: d, m, qh uint32, qs[16]).
func quantizeMinMax(x []float32, y []byte, bits int) {
	lo, hi := float32(math.MaxFloat32), float32(-math.MaxFloat32)
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	top := uint8(1<<bits - 1)
	d := (hi - lo) / float32(top)
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putHalf(y, d)
	putHalf(y[2:], lo)
	qs := y[4:]
	var qh uint32
	if bits == 5 {
		qs = y[8:]
	}
	for j := range 16 {
		q0 := uint8(float32(float32(x[j]-lo)*id) + 0.5)
		q1 := uint8(float32(float32(x[j+16]-lo)*id) + 0.5)
		if bits == 4 {
			q0, q1 = min(top, q0), min(top, q1)
		}
		qs[j] = q0&15 | q1&15<<4
		qh |= uint32(q0>>4&1)<<j | uint32(q1>>4&1)<<(j+16)
	}
	if bits == 5 {
		binary.LittleEndian.PutUint32(y[4:], qh)
	}
}

// fitScaleMin is ggml's make_qkx2_quants: it quantizes x to levels 0..nmax as
// L·scale - mn (mn >= 0 returned) minimizing the weighted squared error over the inverse
// scales (nmax + rmin + rdelta·k)/(max-min), k = 0..nstep.
func fitScaleMin(x, w []float32, nmax int, rmin, rdelta float32, nstep int, L, aux []uint8) (scale, mn float32) {
	lo, hi := x[0], x[0]
	sumW := w[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < len(x); i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		sumW += w[i]
		sumX += float32(w[i] * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L[:len(x)])
		return 0, -lo
	}
	fmax := float32(nmax)
	iscale := fmax / (hi - lo)
	scale = 1 / iscale
	var best float32
	for i, v := range x {
		l := max(0, min(nmax, roundInt(float32(iscale*float32(v-lo)))))
		L[i] = uint8(l)
		diff := float32(float32(scale*float32(l))+lo) - v
		best += float32(w[i] * float32(diff*diff))
	}
	for k := 0; k <= nstep; k++ {
		iscale = (float32(rmin+float32(rdelta*float32(k))) + fmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := max(0, min(nmax, roundInt(float32(iscale*float32(v-lo)))))
			aux[i] = uint8(l)
			fl := float32(l)
			wl := float32(w[i] * fl)
			sumL += wl
			sumL2 += float32(wl * fl)
			sumXL += float32(wl * v)
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if !(D > 0) {
			continue
		}
		thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
		thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
		if thisMin > 0 {
			thisMin = 0
			thisScale = sumXL / sumL2
		}
		var cur float32
		for i, v := range x {
			diff := float32(float32(thisScale*float32(aux[i]))+thisMin) - v
			cur += float32(w[i] * float32(diff*diff))
		}
		if cur < best {
			copy(L[:len(x)], aux[:len(x)])
			best, scale, lo = cur, thisScale, thisMin
		}
	}
	return scale, -lo
}

// quantizeK45 is Q4_K (d, dmin, scales[12], qs[128]) and, with five, Q5_K (d, dmin,
// scales[12], qh[32], qs[128]).
func quantizeK45(x []float32, y []byte, five bool) {
	nmax, rmin, nstep := 15, float32(-1), 20
	if five {
		nmax, rmin, nstep = 31, -0.5, 15
	}
	var L [256]uint8
	var aux [32]uint8
	var w [32]float32
	var scales, mins [8]float32
	var maxScale, maxMin float32
	for j := range 8 {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		av := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			w[l] = av + absf(v)
		}
		scales[j], mins[j] = fitScaleMin(xs, w[:], nmax, rmin, 0.1, nstep, L[32*j:], aux[:])
		maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sc := y[4:16]
	for j := range 8 {
		ls := min(63, uint8(roundInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(roundInt(float32(invMin*mins[j]))))
		if j < 4 {
			sc[j], sc[j+4] = ls, lm
		} else {
			sc[j+4] = ls&15 | lm&15<<4
			sc[j-4] |= ls >> 4 << 6
			sc[j] |= lm >> 4 << 6
		}
	}
	d := putHalf(y, maxScale/63)
	dmin := putHalf(y[2:], maxMin/63)
	for j := range 8 {
		s, m := gguf.ScaleMin(sc, j)
		ds := float32(d * float32(s))
		if ds == 0 {
			continue
		}
		dm := float32(dmin * float32(m))
		for i := range 32 {
			L[32*j+i] = uint8(max(0, min(nmax, roundInt((x[32*j+i]+dm)/ds))))
		}
	}
	qs := y[16:144]
	if five {
		qh := y[16:48]
		qs = y[48:176]
		for c := range 4 {
			for l := range 32 {
				lo, hi := L[64*c+l], L[64*c+l+32]
				qh[l] |= (lo>>4&1)<<(2*c) | (hi>>4&1)<<(2*c+1)
				qs[32*c+l] = lo&15 | (hi&15)<<4
			}
		}
		return
	}
	for c := range 4 {
		for l := range 32 {
			qs[32*c+l] = L[64*c+l] | L[64*c+l+32]<<4
		}
	}
}

// fitSymmetric is ggml's make_qx_quants with weights x² (rmse_type 1): x quantized to
// levels -nmax..nmax-1 (stored +nmax in L) as scale·l, the scale chosen among the inverse
// scales -(nmax + 0.1k)/m, k = -9..9, by weighted least squares.
func fitSymmetric(x []float32, nmax int, L []int8) float32 {
	var amax, m float32
	for _, v := range x {
		if absf(v) > amax {
			amax, m = absf(v), v
		}
	}
	if amax < 1e-15 {
		clear(L[:len(x)])
		return 0
	}
	sums := func(iscale float32, store bool) (sumLX, sumL2 float32) {
		for i, v := range x {
			l := max(-nmax, min(nmax-1, roundInt(float32(iscale*v))))
			if store {
				L[i] = int8(l + nmax)
			}
			w := float32(v * v)
			fl := float32(l)
			sumLX += float32(float32(w*v) * fl)
			sumL2 += float32(float32(w*fl) * fl)
		}
		return
	}
	sumLX, sumL2 := sums(float32(-nmax)/m, true)
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := float32(scale * sumLX)
	for k := -9; k <= 9; k++ {
		if k == 0 {
			continue
		}
		iscale := -(float32(nmax) + float32(float32(0.1)*float32(k))) / m
		lx, l2 := sums(iscale, false)
		if l2 > 0 && float32(lx*lx) > float32(best*l2) {
			sums(iscale, true)
			scale = lx / l2
			best = float32(scale * lx)
		}
	}
	return scale
}

// quantizeQ6_K: ql[128], qh[64], scales[16] int8, d (f16).
func quantizeQ6_K(x []float32, y []byte) {
	var L [256]int8
	var scales [16]float32
	var maxScale, maxAbs float32
	for b := range 16 {
		scales[b] = fitSymmetric(x[16*b:16*b+16], 32, L[16*b:])
		if a := absf(scales[b]); a > maxAbs {
			maxAbs, maxScale = a, scales[b]
		}
	}
	if maxAbs < 1e-15 {
		return // y is zeroed: d = 0
	}
	iscale := -128 / maxScale
	d := putHalf(y[208:], 1/iscale)
	sc := y[192:208]
	for b := range 16 {
		sc[b] = byte(int8(min(127, roundInt(float32(iscale*scales[b])))))
	}
	for b := range 16 {
		ds := float32(d * float32(int8(sc[b])))
		if ds == 0 {
			continue
		}
		for i := range 16 {
			L[16*b+i] = int8(max(-32, min(31, roundInt(x[16*b+i]/ds))) + 32)
		}
	}
	ql, qh := y[0:128], y[128:192]
	for h := range 2 {
		ql, qh, l6 := ql[64*h:], qh[32*h:], L[128*h:]
		for l := range 32 {
			q := [4]uint8{uint8(l6[l]), uint8(l6[l+32]), uint8(l6[l+64]), uint8(l6[l+96])}
			ql[l] = q[0]&15 | q[2]&15<<4
			ql[l+32] = q[1]&15 | q[3]&15<<4
			qh[l] = q[0]>>4 | q[1]>>4<<2 | q[2]>>4<<4 | q[3]>>4<<6
		}
	}
}

package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/honeai/hone/internal/gemm"
)

// Dequantize decodes n elements of type t from raw (exactly their size: n/BlockSize blocks)
// into float32s. It supports F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and
// Q6_K; any other type is an error naming it.
//
// Block layouts (ggml), 32 elements per block, d and m little-endian float16:
//
//	Q8_0: d, qs[32] int8                 x[i] = d*qs[i]
//	Q4_0: d, qs[16] uint8                x[i] = d*((qs[i]&15)-8), x[i+16] = d*((qs[i]>>4)-8)
//	Q4_1: d, m, qs[16] uint8             x[i] = d*(qs[i]&15)+m,   x[i+16] = d*(qs[i]>>4)+m
//	Q5_0: d, qh uint32, qs[16] uint8     q[i] = qs[i]&15 | (qh>>i&1)<<4, q[i+16] = qs[i]>>4 | (qh>>(i+16)&1)<<4
//	                                     x[i] = d*(q[i]-16)
//	Q5_1: d, m, qh uint32, qs[16] uint8  q as Q5_0, x[i] = d*q[i]+m
//
// The K-quants have super-blocks of 256 elements (see dequantK for their layouts).
func Dequantize(t TensorType, raw []byte, n int) ([]float32, error) {
	if !t.Dequantizable() {
		if !t.Known() {
			return nil, fmt.Errorf("unknown tensor type %d", uint32(t))
		}
		return nil, fmt.Errorf("tensor type %s is not supported yet (supported: %s)", t, supportedList)
	}
	block, bsize := t.BlockSize(), t.BlockBytes()
	if n < 0 || n%block != 0 {
		return nil, fmt.Errorf("%d elements are not a whole number of %s blocks of %d", n, t, block)
	}
	if want := uint64(n/block) * uint64(bsize); uint64(len(raw)) != want {
		return nil, fmt.Errorf("%d elements of %s take %d bytes, got %d", n, t, want, len(raw))
	}
	out := make([]float32, n)
	decode(t, raw, out)
	return out, nil
}

// DequantizeTo decodes len(out) elements of type t from raw into out, without allocating: the
// same types and checks as Dequantize.
func DequantizeTo(out []float32, t TensorType, raw []byte) error {
	if !t.Dequantizable() {
		_, err := Dequantize(t, nil, 0)
		return err
	}
	n := len(out)
	block, bsize := t.BlockSize(), t.BlockBytes()
	if n%block != 0 {
		return fmt.Errorf("%d elements are not a whole number of %s blocks of %d", n, t, block)
	}
	if want := uint64(n/block) * uint64(bsize); uint64(len(raw)) != want {
		return fmt.Errorf("%d elements of %s take %d bytes, got %d", n, t, want, len(raw))
	}
	decode(t, raw, out)
	return nil
}

// decode is Dequantize's work, into out (sizes checked by the caller).
func decode(t TensorType, raw []byte, out []float32) {
	n := len(out)
	le := binary.LittleEndian
	switch t {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
	case F16:
		for i := range out {
			out[i] = gemm.F16ToFloat32(le.Uint16(raw[2*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = gemm.BF16ToFloat32(le.Uint16(raw[2*i:]))
		}
	case Q8_0:
		for b := range n / 32 {
			blk, x := raw[b*34:(b+1)*34], out[b*32:(b+1)*32]
			d := gemm.F16ToFloat32(le.Uint16(blk))
			for i, q := range blk[2:34] {
				x[i] = d * float32(int8(q))
			}
		}
	case Q4_0:
		for b := range n / 32 {
			blk, x := raw[b*18:(b+1)*18], out[b*32:(b+1)*32]
			d := gemm.F16ToFloat32(le.Uint16(blk))
			for i, q := range blk[2:18] {
				x[i] = d * float32(int(q&15)-8)
				x[i+16] = d * float32(int(q>>4)-8)
			}
		}
	case Q4_1:
		for b := range n / 32 {
			blk, x := raw[b*20:(b+1)*20], out[b*32:(b+1)*32]
			d := gemm.F16ToFloat32(le.Uint16(blk))
			m := gemm.F16ToFloat32(le.Uint16(blk[2:]))
			for i, q := range blk[4:20] {
				// The explicit conversions keep the product rounded on its own (no fused
				// multiply-add), as ggml and numpy compute it.
				x[i] = float32(d*float32(q&15)) + m
				x[i+16] = float32(d*float32(q>>4)) + m
			}
		}
	case Q5_0:
		for b := range n / 32 {
			blk, x := raw[b*22:(b+1)*22], out[b*32:(b+1)*32]
			d := gemm.F16ToFloat32(le.Uint16(blk))
			qh := le.Uint32(blk[2:])
			for i, q := range blk[6:22] {
				lo := int(q&15) | int(qh>>i&1)<<4
				hi := int(q>>4) | int(qh>>(i+16)&1)<<4
				x[i] = d * float32(lo-16)
				x[i+16] = d * float32(hi-16)
			}
		}
	case Q5_1:
		for b := range n / 32 {
			blk, x := raw[b*24:(b+1)*24], out[b*32:(b+1)*32]
			d := gemm.F16ToFloat32(le.Uint16(blk))
			m := gemm.F16ToFloat32(le.Uint16(blk[2:]))
			qh := le.Uint32(blk[4:])
			for i, q := range blk[8:24] {
				lo := q&15 | byte(qh>>i&1)<<4
				hi := q>>4 | byte(qh>>(i+16)&1)<<4
				x[i] = float32(d*float32(lo)) + m
				x[i+16] = float32(d*float32(hi)) + m
			}
		}
	case Q4_K, Q5_K, Q6_K:
		dequantK(t, raw, out)
	}
}

// supportedList names the types Dequantize supports, for its error.
const supportedList = "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K"

// dequantK decodes whole super-blocks of 256 elements of a K-quant type into out (the caller
// has checked the sizes). Layouts (ggml), d and dmin little-endian float16:
//
//	Q4_K (144 bytes): d, dmin, scales[12], qs[128]
//	Q5_K (176 bytes): d, dmin, scales[12], qh[32], qs[128]
//	Q6_K (210 bytes): ql[128], qh[64], scales[16] int8, d
//
// Q4_K and Q5_K have 8 sub-blocks of 32, each with a 6-bit scale sc[j] and a 6-bit min m[j]
// packed into scales (see ScaleMin); x = (d*sc[j])*q - dmin*m[j]. The low 4 bits of q for
// sub-blocks 2c and 2c+1 are the low and high nibbles of qs[32c:32c+32]; Q5_K's fifth bit for
// element l of sub-block j is bit j of qh[l].
//
// Q6_K has 16 sub-blocks of 16, each with an int8 scale: x[e] = (d*scales[e/16])*(q[e]-32).
// Each half h of 128 elements uses ql[64h:64h+64] and qh[32h:32h+32]; for l < 32 its elements
// l, l+32, l+64, l+96 take the low nibble of ql[l], the low nibble of ql[l+32], the high nibble
// of ql[l], the high nibble of ql[l+32], and bits 0-1, 2-3, 4-5, 6-7 of qh[l] as bits 4-5.
func dequantK(t TensorType, raw []byte, out []float32) {
	le := binary.LittleEndian
	bsize := t.BlockBytes()
	for b := range len(out) / 256 {
		blk, x := raw[b*bsize:(b+1)*bsize], out[b*256:(b+1)*256]
		switch t {
		case Q4_K, Q5_K:
			d := gemm.F16ToFloat32(le.Uint16(blk))
			dmin := gemm.F16ToFloat32(le.Uint16(blk[2:]))
			scales := blk[4:16]
			var qh, qs []byte
			if t == Q4_K {
				qs = blk[16:144]
			} else {
				qh, qs = blk[16:48], blk[48:176]
			}
			for j := range 8 {
				sc, m := ScaleMin(scales, j)
				// Explicit conversions round each product on its own (no fused
				// multiply-add), as ggml and numpy compute them.
				ds := float32(d * float32(sc))
				dm := float32(dmin * float32(m))
				chunk, shift := qs[32*(j/2):32*(j/2)+32], uint(4*(j%2))
				for l, q := range chunk {
					v := q >> shift & 15
					if qh != nil {
						v |= (qh[l] >> j & 1) << 4
					}
					x[32*j+l] = float32(ds*float32(v)) - dm
				}
			}
		case Q6_K:
			ql, qh, scales := blk[0:128], blk[128:192], blk[192:208]
			d := gemm.F16ToFloat32(le.Uint16(blk[208:]))
			for h := range 2 {
				ql, qh, y := ql[64*h:64*h+64], qh[32*h:32*h+32], x[128*h:128*h+128]
				for l := range 32 {
					q := [4]int{
						int(ql[l]&15 | (qh[l]&3)<<4),
						int(ql[l+32]&15 | (qh[l]>>2&3)<<4),
						int(ql[l]>>4 | (qh[l]>>4&3)<<4),
						int(ql[l+32]>>4 | (qh[l]>>6)<<4),
					}
					for k, v := range q {
						e := 32*k + l
						ds := float32(d * float32(int8(scales[8*h+e/16])))
						y[e] = ds * float32(v-32)
					}
				}
			}
		}
	}
}

// ScaleMin unpacks sub-block j's 6-bit scale and min from the 12 packed bytes of a Q4_K or
// Q5_K super-block: for j < 4 they are the low 6 bits of s[j] and s[j+4]; for j >= 4 their low
// 4 bits are the low and high nibbles of s[j+4] and their top 2 bits are the top 2 bits of
// s[j-4] and s[j].
func ScaleMin(s []byte, j int) (sc, m byte) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&15 | s[j-4]>>6<<4, s[j+4]>>4 | s[j]>>6<<4
}

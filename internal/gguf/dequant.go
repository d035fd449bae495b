package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/honeai/hone/internal/gemm"
)

// Dequantize decodes n elements of type t from raw (exactly their size: n/BlockSize blocks)
// into float32s. It supports F32, F16, BF16, Q8_0, Q4_0 and Q4_1; any other type is an error
// naming it.
//
// Block layouts (ggml), 32 elements per block, d and m little-endian float16:
//
//	Q8_0: d, qs[32] int8                 x[i] = d*qs[i]
//	Q4_0: d, qs[16] uint8                x[i] = d*((qs[i]&15)-8), x[i+16] = d*((qs[i]>>4)-8)
//	Q4_1: d, m, qs[16] uint8             x[i] = d*(qs[i]&15)+m,   x[i+16] = d*(qs[i]>>4)+m
func Dequantize(t TensorType, raw []byte, n int) ([]float32, error) {
	if !t.Dequantizable() {
		if !t.Known() {
			return nil, fmt.Errorf("unknown tensor type %d", uint32(t))
		}
		return nil, fmt.Errorf("tensor type %s is not supported yet (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1)", t)
	}
	block, bsize := t.BlockSize(), t.BlockBytes()
	if n < 0 || n%block != 0 {
		return nil, fmt.Errorf("%d elements are not a whole number of %s blocks of %d", n, t, block)
	}
	if want := uint64(n/block) * uint64(bsize); uint64(len(raw)) != want {
		return nil, fmt.Errorf("%d elements of %s take %d bytes, got %d", n, t, want, len(raw))
	}
	out := make([]float32, n)
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
	}
	return out, nil
}

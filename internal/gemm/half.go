package gemm

import (
	"fmt"
	"math"
)

// BF16ToFloat32 widens a bfloat16 bit pattern to float32 (exact).
func BF16ToFloat32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// Float32ToBF16 rounds f to the nearest bfloat16, ties to even. NaN stays NaN (quieted);
// values beyond the bf16 range become ±Inf.
func Float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep sign and top payload bits, force quiet
		return uint16(b>>16) | 0x0040
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// F16ToFloat32 widens an IEEE-754 binary16 bit pattern to float32 (exact, subnormals included).
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch exp {
	case 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0: // zero or subnormal: mant·2⁻²⁴, exact in float32
		v := float32(mant) * (1.0 / (1 << 24))
		return math.Float32frombits(sign | math.Float32bits(v))
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// Float32ToF16 rounds f to the nearest IEEE-754 binary16, ties to even, with gradual
// underflow to subnormals and overflow to ±Inf. NaN stays NaN (quieted).
func Float32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // biased binary16 exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // subnormal binary16 (or zero): units of 2⁻²⁴
		if e < -10 {
			return sign // below half the smallest subnormal (or a float32 subnormal)
		}
		m := mant | 0x800000
		return sign | uint16(roundShift(m, uint(14-e)))
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // may carry into the exponent, up to Inf: both are correct
	}
	return sign | uint16(h)
}

// roundShift returns m >> s rounded to nearest, ties to even (1 <= s < 32).
func roundShift(m uint32, s uint) uint32 {
	q := m >> s
	rem := m & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}

// ToFloat32 widens one value of format h to float32.
func (h Half) ToFloat32(v uint16) float32 {
	if h == F16 {
		return F16ToFloat32(v)
	}
	return BF16ToFloat32(v)
}

// FromFloat32 rounds f to format h (nearest, ties to even).
func (h Half) FromFloat32(f float32) uint16 {
	if h == F16 {
		return Float32ToF16(f)
	}
	return Float32ToBF16(f)
}

// Decode widens src (format h) into dst; len(dst) must be at least len(src).
func (h Half) Decode(dst []float32, src []uint16) {
	kind := halfKind(h, "Half.Decode")
	if len(dst) < len(src) {
		panic(fmt.Sprintf("gemm.Half.Decode: len(dst) = %d < len(src) = %d", len(dst), len(src)))
	}
	dst = dst[:len(src)]
	if decodeNative(kind, dst, src) {
		return
	}
	if kind == kindBF16 {
		for i, v := range src {
			dst[i] = BF16ToFloat32(v)
		}
		return
	}
	for i, v := range src {
		dst[i] = F16ToFloat32(v)
	}
}

// Encode rounds src into dst in format h (nearest, ties to even); len(dst) must be at least
// len(src).
func (h Half) Encode(dst []uint16, src []float32) {
	kind := halfKind(h, "Half.Encode")
	if len(dst) < len(src) {
		panic(fmt.Sprintf("gemm.Half.Encode: len(dst) = %d < len(src) = %d", len(dst), len(src)))
	}
	dst = dst[:len(src)]
	if encodeNative(kind, dst, src) {
		return
	}
	if kind == kindBF16 {
		for i, v := range src {
			dst[i] = Float32ToBF16(v)
		}
		return
	}
	for i, v := range src {
		dst[i] = Float32ToF16(v)
	}
}

package gemm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// f16Value decodes a binary16 pattern with float64 arithmetic (independent of F16ToFloat32).
func f16Value(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	mant := float64(h & 0x3ff)
	switch exp {
	case 0x1f:
		if mant != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	case 0:
		return sign * mant * math.Pow(2, -24)
	}
	return sign * (1 + mant/1024) * math.Pow(2, float64(exp-15))
}

func TestF16DecodeExhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		want := f16Value(h)
		got := float64(F16ToFloat32(h))
		if math.IsNaN(want) {
			if !math.IsNaN(got) {
				t.Fatalf("F16ToFloat32(%#04x) = %v, want NaN", h, got)
			}
			continue
		}
		if got != want || math.Signbit(got) != math.Signbit(want) {
			t.Fatalf("F16ToFloat32(%#04x) = %v, want %v", h, got, want)
		}
		if back := Float32ToF16(float32(got)); back != h {
			t.Fatalf("Float32ToF16(F16ToFloat32(%#04x)) = %#04x", h, back)
		}
	}
}

// nearestCheck verifies that r is a correctly rounded (ties-to-even) encoding of f, by
// comparing with its neighbours in the encoding's value order.
func nearestCheck(t *testing.T, name string, f float32, r uint16, value func(uint16) float64) {
	t.Helper()
	x := float64(f)
	got := value(r)
	if math.IsNaN(x) {
		if !math.IsNaN(got) {
			t.Fatalf("%s(NaN) = %#04x, not NaN", name, r)
		}
		return
	}
	if math.Signbit(got) != math.Signbit(x) && got != 0 {
		t.Fatalf("%s(%v) = %#04x (%v): wrong sign", name, f, r, got)
	}
	mag := r & 0x7fff
	for _, nb := range []uint16{mag - 1, mag + 1} {
		if mag == 0 && nb == 0xffff {
			continue
		}
		nv := value(nb | r&0x8000)
		if math.IsNaN(nv) {
			continue
		}
		dg, dn := math.Abs(got-x), math.Abs(nv-x)
		if math.IsInf(got, 0) && !math.IsInf(x, 0) {
			// overflow: correct only if x is at least halfway past the largest finite value
			if dn < math.Inf(1) && math.Abs(x) < math.Abs(nv)+(math.Abs(nv)-math.Abs(value(nb-1|r&0x8000)))/2 {
				t.Fatalf("%s(%v) overflowed to Inf", name, f)
			}
			continue
		}
		if dn < dg || (dn == dg && r&1 == 1) {
			t.Fatalf("%s(%v) = %#04x (%v); neighbour %#04x (%v) is nearer or even", name, f, r, got, nb|r&0x8000, nv)
		}
	}
}

func TestFloat32ToHalfRounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	bf := func(h uint16) float64 { return float64(BF16ToFloat32(h)) }
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65519.99, 65520, -65520, 1e-8, 2.98e-8, 5.96e-8,
		6.1e-5, 3e38, -3.4e38, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1.00390625, 1.01171875}
	for i := 0; i < 200000; i++ {
		var f float32
		if i < len(special) {
			f = special[i]
		} else if i%2 == 0 {
			f = math.Float32frombits(rng.Uint32())
		} else {
			f = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-30)))
		}
		nearestCheck(t, "Float32ToF16", f, Float32ToF16(f), f16Value)
		nearestCheck(t, "Float32ToBF16", f, Float32ToBF16(f), bf)
	}
	// Exact ties: halfway between two bf16 values goes to the even one.
	if got := Float32ToBF16(math.Float32frombits(0x3f808000)); got != 0x3f80 {
		t.Errorf("tie down to even: %#04x", got)
	}
	if got := Float32ToBF16(math.Float32frombits(0x3f818000)); got != 0x3f82 {
		t.Errorf("tie up to even: %#04x", got)
	}
	if got := Float32ToF16(65520); got != 0x7c00 {
		t.Errorf("65520 must overflow to Inf: %#04x", got)
	}
	if got := Float32ToF16(65519.99); got != 0x7bff {
		t.Errorf("65519.99 must round to 65504: %#04x", got)
	}
	if got := Float32ToBF16(float32(math.NaN())); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("NaN -> %#04x", got)
	}
}

// TestHalfSlices checks the slice conversions (vectorised in the assembly implementations)
// against the scalar ones, on every implementation.
func TestHalfSlices(t *testing.T) {
	forEachImpl(t, testHalfSlices)
}

func testHalfSlices(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, h := range []Half{BF16, F16} {
		for _, n := range []int{0, 1, 7, 15, 16, 17, 31, 64, 100, 1000} {
			src := make([]float32, n)
			// Extreme values first (where n holds them): overflow to ±Inf, the largest
			// finite half, f16 subnormals and underflow to zero, f32 subnormals, NaN.
			special := []float32{65520, -65520, 65519.99, 65504, 3e38, float32(math.Inf(-1)), 5.96e-8, -2.98e-8,
				2.99e-8, 1e-8, 6.1e-5, -3.5e-6, math.Float32frombits(1), float32(math.Copysign(0, -1)), float32(math.NaN())}
			for i := range src {
				if n >= len(special) && i < len(special) {
					src[i] = special[i]
					continue
				}
				switch i % 7 {
				case 0:
					src[i] = math.Float32frombits(rng.Uint32())
				case 1:
					src[i] = float32(rng.NormFloat64() * 1e-6)
				default:
					src[i] = float32(rng.NormFloat64() * 100)
				}
			}
			enc := make([]uint16, n+1)
			enc[n] = 0xbeef
			h.Encode(enc, src)
			if enc[n] != 0xbeef {
				t.Fatalf("%v Encode wrote past len(src)", h)
			}
			dec := make([]float32, n)
			h.Decode(dec, enc[:n])
			for i := range src {
				if enc[i] != h.FromFloat32(src[i]) {
					t.Fatalf("%v Encode[%d] of %v = %#04x, want %#04x", h, i, src[i], enc[i], h.FromFloat32(src[i]))
				}
				want := h.ToFloat32(enc[i])
				if math.Float32bits(dec[i]) != math.Float32bits(want) && !(math.IsNaN(float64(want)) && math.IsNaN(float64(dec[i]))) {
					t.Fatalf("%v Decode[%d] of %#04x = %v, want %v", h, i, enc[i], dec[i], want)
				}
			}
		}
	}
}

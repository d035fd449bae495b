package gguf

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestQuantGoldens checks Dequantize against gguf-py's dequantization (gguf==0.19.0) of a few
// pseudo-random blocks of every quantized type it supports, bit for bit. The goldens come from
// scripts/gguf-goldens/quants.py.
func TestQuantGoldens(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "quant_goldens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Types []struct {
			Type string
			N    int
			Hex  string
			Bits []uint32
		}
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	byName := map[string]TensorType{}
	for typ := range typeInfos {
		byName[typ.String()] = typ
	}
	seen := map[TensorType]bool{}
	for _, c := range g.Types {
		typ, ok := byName[c.Type]
		if !ok {
			t.Fatalf("unknown type %q in goldens", c.Type)
		}
		seen[typ] = true
		raw, err := hex.DecodeString(c.Hex)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Dequantize(typ, raw, c.N)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if len(c.Bits) != c.N {
			t.Fatalf("%s: %d golden values for n = %d", typ, len(c.Bits), c.N)
		}
		bad := 0
		for i, w := range c.Bits {
			if math.Float32bits(got[i]) != w {
				if bad++; bad <= 5 {
					t.Errorf("%s[%d] = %v, gguf-py %v", typ, i, got[i], math.Float32frombits(w))
				}
			}
		}
		if bad > 5 {
			t.Errorf("%s: %d of %d values differ", typ, bad, c.N)
		}
	}
	for _, typ := range []TensorType{Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K} {
		if !seen[typ] {
			t.Errorf("no goldens for %s", typ)
		}
	}
}

// Hand-built blocks whose values are written down from the format description.
func TestDequantizeQ5(t *testing.T) {
	// Q5_0: d = 0.5; every element from 16 on has its fifth bit set; byte j holds j and 15-j,
	// so element j is 0.5*(j-16) and element j+16 is 0.5*(15-j+16-16).
	q50 := binary.LittleEndian.AppendUint32(u16s(0x3800), 0xffff0000)
	want := make([]float32, 32)
	for j := range 16 {
		q50 = append(q50, byte(j|(15-j)<<4))
		want[j] = 0.5 * float32(j-16)
		want[j+16] = 0.5 * float32(15-j)
	}
	expect(t, Q5_0, q50, want)

	// Q5_1: d = 0.25, m = -1; the first 16 elements have the fifth bit set; byte j holds j
	// twice, so element j is 0.25*(j+16)-1 and element j+16 is 0.25*j-1.
	q51 := binary.LittleEndian.AppendUint32(u16s(0x3400, 0xbc00), 0x0000ffff)
	for j := range 16 {
		q51 = append(q51, byte(j|j<<4))
		want[j] = 0.25*float32(j+16) - 1
		want[j+16] = 0.25*float32(j) - 1
	}
	expect(t, Q5_1, q51, want)
}

// packScales packs 8 6-bit scales and mins the Q4_K/Q5_K way: bytes 0-3 hold sc[0..3] in their
// low 6 bits and the top 2 bits of sc[4..7] in their top 2; bytes 4-7 the same for the mins;
// bytes 8-11 hold the low 4 bits of sc[4..7] (low nibble) and of m[4..7] (high nibble).
func packScales(sc, m [8]byte) []byte {
	s := make([]byte, 12)
	for j := range 4 {
		s[j] = sc[j] | sc[j+4]>>4<<6
		s[j+4] = m[j] | m[j+4]>>4<<6
		s[j+8] = sc[j+4]&15 | m[j+4]&15<<4
	}
	return s
}

func TestDequantizeK(t *testing.T) {
	var sc, m [8]byte
	for j := range 8 {
		sc[j], m[j] = byte(10+7*j), byte(60-5*j) // 10..59 and 60..25: all need 6 bits
	}
	// Nibble n of element l in sub-block j: sub-blocks 2c and 2c+1 share qs[32c:32c+32], as
	// its low and high nibbles; here the low nibble is l%16 and the high one 15-l%16.
	nib := func(j, l int) int {
		if j%2 == 0 {
			return l % 16
		}
		return 15 - l%16
	}
	qs := make([]byte, 128)
	for i := range qs {
		qs[i] = byte(i%16 | (15-i%16)<<4)
	}

	// Q4_K: d = 1, dmin = 0.5: x = sc[j]*q - 0.5*m[j].
	q4k := append(append(u16s(0x3c00, 0x3800), packScales(sc, m)...), qs...)
	want := make([]float32, 256)
	for j := range 8 {
		for l := range 32 {
			want[32*j+l] = float32(int(sc[j])*nib(j, l)) - 0.5*float32(m[j])
		}
	}
	expect(t, Q4_K, q4k, want)

	// Q5_K: d = 0.25, dmin = 2; the fifth bit of element l of sub-block j is bit j of qh[l],
	// here qh[l] = l*37 mod 256.
	qh := make([]byte, 32)
	for l := range qh {
		qh[l] = byte(l * 37)
	}
	q5k := append(append(append(u16s(0x3400, 0x4000), packScales(sc, m)...), qh...), qs...)
	for j := range 8 {
		for l := range 32 {
			q := nib(j, l) + 16*(l*37%256>>j&1)
			want[32*j+l] = 0.25*float32(int(sc[j])*q) - 2*float32(m[j])
		}
	}
	expect(t, Q5_K, q5k, want)

	// Q6_K: d = 0.5, scales[i] = i-8, element e's 6-bit q is e%64: x[e] = 0.5*(e/16-8)*(e%64-32).
	// Each 128-element half h stores element 128h+32k+l (k < 4, l < 32) with its low 4 bits in
	// ql[64h+l] (k = 0, 2) or ql[64h+32+l] (k = 1, 3), low nibble for k < 2, high for k >= 2,
	// and its top 2 bits in bits 2k, 2k+1 of qh[32h+l].
	ql, qh6 := make([]byte, 128), make([]byte, 64)
	for e := range 256 {
		q := byte(e % 64)
		h, k, l := e/128, e%128/32, e%32
		i := 64*h + l + 32*(k%2)
		ql[i] |= q & 15 << (4 * (k / 2))
		qh6[32*h+l] |= q >> 4 << (2 * k)
		// As float products, so a zero takes the sign of its other factor (-0 where a
		// negative scale meets q = 32, or a zero scale a negative q).
		want[e] = 0.5 * float32(e/16-8) * float32(e%64-32)
	}
	q6k := append(ql, qh6...)
	for i := range 16 {
		q6k = append(q6k, byte(int8(i-8)))
	}
	q6k = append(q6k, u16s(0x3800)...)
	expect(t, Q6_K, q6k, want)
}

package quant

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/gguf"
)

var quantizeTypes = []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}

func quantizeTypeByName(t *testing.T, name string) gguf.TensorType {
	for _, typ := range quantizeTypes {
		if typ.String() == name {
			return typ
		}
	}
	t.Fatalf("unknown type %q", name)
	return 0
}

// TestQuantizeGoldens checks Quantize byte for byte against the reference encodings in
// testdata/quantize-goldens.json (scripts/quant-goldens/gen.py: gguf-py for the 32-element
// types, llama.cpp's llama-quantize for the K-quants).
func TestQuantizeGoldens(t *testing.T) {
	raw, err := os.ReadFile("testdata/quantize-goldens.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rows, Cols int
		InputF32LE string `json:"input_f32le"`
		Cases      []struct{ Type, Source, Encoded string }
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	in, _ := base64.StdEncoding.DecodeString(doc.InputF32LE)
	x := make([]float32, len(in)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(in[4*i:]))
	}
	seen := map[string]bool{}
	for _, c := range doc.Cases {
		seen[c.Type] = true
		t.Run(c.Type, func(t *testing.T) {
			typ := quantizeTypeByName(t, c.Type)
			want, _ := base64.StdEncoding.DecodeString(c.Encoded)
			got, err := Quantize(typ, x, doc.Cols)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d bytes, want %d", len(got), len(want))
			}
			bb := typ.BlockBytes()
			bad := 0
			for b := 0; b < len(want)/bb; b++ {
				if string(got[b*bb:(b+1)*bb]) != string(want[b*bb:(b+1)*bb]) {
					if bad < 3 {
						t.Errorf("block %d differs from %s:\n got  %x\n want %x", b, c.Source, got[b*bb:(b+1)*bb], want[b*bb:(b+1)*bb])
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d blocks differ", bad, len(want)/bb)
			}
		})
	}
	for _, typ := range quantizeTypes {
		if !seen[typ.String()] {
			t.Errorf("no golden for %s", typ)
		}
	}
}

// quantizeBound is the largest error dequantize(quantize(x)) may have on a block, as a
// fraction of the block's range (max - min) for the types with a min, else of its largest
// magnitude; plus a margin for the float16 rounding of the scales.
var quantizeBound = map[gguf.TensorType]float64{
	gguf.Q8_0: 0.5/127 + 0.002, gguf.Q4_0: 1.0/8 + 0.002, gguf.Q5_0: 1.0/16 + 0.002,
	gguf.Q4_1: 0.5/15 + 0.002, gguf.Q5_1: 0.5/31 + 0.002,
	// The K-quants fit each sub-block's scale by least squares (it may clip the extremes)
	// and round the sub-block scales to 6 (8) bits: generous bounds on the super-block.
	gguf.Q4_K: 0.12, gguf.Q5_K: 0.06, gguf.Q6_K: 0.03,
}

// TestQuantizeRoundTrip quantizes random rows (an odd number of them, several scales and
// shapes of distribution) and checks the dequantized values against each type's error bound,
// and the root-mean-square error against a tighter one.
func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	rmsBound := map[gguf.TensorType]float64{gguf.Q8_0: 0.003, gguf.Q4_0: 0.05, gguf.Q5_0: 0.025,
		gguf.Q4_1: 0.04, gguf.Q5_1: 0.02, gguf.Q4_K: 0.04, gguf.Q5_K: 0.02, gguf.Q6_K: 0.01}
	for _, typ := range quantizeTypes {
		t.Run(typ.String(), func(t *testing.T) {
			block := typ.BlockSize()
			rows, cols := 7, 3*max(block, 256)
			x := make([]float32, rows*cols)
			for r := range rows {
				scale := math.Pow(10, float64(r%4)-2) // 0.01 .. 10
				for c := range cols {
					v := rng.NormFloat64() * scale
					if r == 3 {
						v = rng.Float64() * scale // all positive
					}
					if r == 5 && c%97 == 0 {
						v *= 30 // outliers
					}
					x[r*cols+c] = float32(v)
				}
			}
			enc, err := Quantize(typ, x, cols)
			if err != nil {
				t.Fatal(err)
			}
			if want := rows * cols / block * typ.BlockBytes(); len(enc) != want {
				t.Fatalf("%d bytes, want %d", len(enc), want)
			}
			y, err := gguf.Dequantize(typ, enc, len(x))
			if err != nil {
				t.Fatal(err)
			}
			span := block
			if span < 256 {
				span = 32
			}
			var sumSq, sumRef float64
			for b := 0; b < len(x)/span; b++ {
				xs, ys := x[b*span:(b+1)*span], y[b*span:(b+1)*span]
				lo, hi, amax := math.Inf(1), math.Inf(-1), 0.0
				for _, v := range xs {
					lo, hi, amax = math.Min(lo, float64(v)), math.Max(hi, float64(v)), math.Max(amax, math.Abs(float64(v)))
				}
				ref := amax
				if typ == gguf.Q4_1 || typ == gguf.Q5_1 || typ == gguf.Q4_K || typ == gguf.Q5_K {
					ref = hi - math.Min(lo, 0)
					if typ == gguf.Q4_1 || typ == gguf.Q5_1 {
						ref = hi - lo
					}
				}
				for i := range xs {
					e := math.Abs(float64(xs[i] - ys[i]))
					if e > quantizeBound[typ]*ref+1e-7 {
						t.Fatalf("block %d element %d: %v became %v (error %.3g > %.3g of %.3g)", b, i, xs[i], ys[i], e, quantizeBound[typ], ref)
					}
					sumSq += e * e / (ref * ref)
					sumRef++
				}
			}
			if rms := math.Sqrt(sumSq / sumRef); rms > rmsBound[typ] {
				t.Errorf("relative RMS error %.4g > %.4g", rms, rmsBound[typ])
			}
		})
	}
}

// TestQuantizeExactOnGrid: values that are already on a type's grid (scale a power of two
// times the level count, levels spanning the whole range) come back exactly.
func TestQuantizeExactOnGrid(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for _, typ := range quantizeTypes {
		t.Run(typ.String(), func(t *testing.T) {
			n := 3 * 256
			x := make([]float32, n)
			// level(i) returns the integer level of element i, lo..hi inclusive, with lo and
			// hi both present in every group of g elements.
			fill := func(g, lo, hi int, unit float32, offset float32) {
				for i := range x {
					l := lo + rng.IntN(hi-lo+1)
					switch i % g {
					case 0:
						l = lo
					case 1:
						l = hi
					}
					x[i] = float32(l)*unit + offset
				}
			}
			switch typ {
			case gguf.Q8_0:
				fill(32, -127, 127, 0.5, 0)
			case gguf.Q4_0:
				fill(32, -8, 7, 0.25, 0)
			case gguf.Q5_0:
				fill(32, -16, 15, 0.125, 0)
			case gguf.Q4_1:
				fill(32, 0, 15, 0.25, -1)
			case gguf.Q5_1:
				fill(32, 0, 31, 0.0625, -0.5)
			case gguf.Q4_K:
				fill(32, 0, 15, 63.0/1024, 0)
			case gguf.Q5_K:
				fill(32, 0, 31, 63.0/2048, 0)
			case gguf.Q6_K:
				fill(16, -32, 31, 1.0/32, 0)
			}
			enc, err := Quantize(typ, x, 256)
			if err != nil {
				t.Fatal(err)
			}
			y, err := gguf.Dequantize(typ, enc, n)
			if err != nil {
				t.Fatal(err)
			}
			for i := range x {
				if x[i] != y[i] {
					t.Fatalf("element %d: %v came back as %v", i, x[i], y[i])
				}
			}
		})
	}
}

func TestQuantizeErrors(t *testing.T) {
	for _, c := range []struct {
		typ  gguf.TensorType
		src  []float32
		cols int
		want []string
	}{
		{gguf.Q4_K, make([]float32, 576), 576, []string{"Q4_K", "multiple of 256", "576 columns"}},
		{gguf.Q8_0, make([]float32, 40), 40, []string{"Q8_0", "multiple of 32", "40 columns"}},
		{gguf.Q8_0, make([]float32, 48), 32, []string{"48 values", "32 columns"}},
		{gguf.Q2_K, make([]float32, 256), 256, []string{"Q2_K"}},
		{gguf.Q8_0, append(append(make([]float32, 33), float32(math.NaN())), make([]float32, 30)...), 32, []string{"row 1", "column 1", "NaN"}},
	} {
		_, err := Quantize(c.typ, c.src, c.cols)
		if err == nil {
			t.Errorf("%s cols %d: no error", c.typ, c.cols)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s cols %d: error %q does not name %q", c.typ, c.cols, err, w)
			}
		}
	}
}

// FuzzQuantize: any finite input quantizes without panicking to the right size, and
// dequantizes to finite values.
func FuzzQuantize(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 0}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		typ := quantizeTypes[int(which)%len(quantizeTypes)]
		bs := typ.BlockSize()
		x := make([]float32, bs)
		for i := range x {
			if 4*i+4 <= len(data) {
				v := math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
				if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) && math.Abs(float64(v)) < 1e4 {
					x[i] = v
				}
			}
		}
		enc, err := Quantize(typ, x, bs)
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) != typ.BlockBytes() {
			t.Fatalf("%d bytes", len(enc))
		}
		y, err := gguf.Dequantize(typ, enc, bs)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range y {
			if math.IsNaN(float64(v)) {
				t.Fatalf("element %d dequantized to NaN", i)
			}
		}
	})
}

package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// allValues is metadata of every value type, arrays of each, and nested arrays.
func allValues() []KV {
	return []KV{
		{"general.architecture", "llama"},
		{"u8", uint8(200)}, {"i8", int8(-100)}, {"u16", uint16(60000)}, {"i16", int16(-30000)},
		{"u32", uint32(4000000000)}, {"i32", int32(-2000000000)}, {"f32", float32(1.5)},
		{"bool.true", true}, {"bool.false", false}, {"str", "héllo\x00world"}, {"empty.str", ""},
		{"u64", uint64(math.MaxUint64)}, {"i64", int64(math.MinInt64)}, {"f64", math.Pi},
		{"a.u8", []uint8{1, 2, 255}}, {"a.i8", []int8{-1, 2}}, {"a.u16", []uint16{1, 65535}},
		{"a.i16", []int16{-2, 3}}, {"a.u32", []uint32{7, 8}}, {"a.i32", []int32{-7, 8, 9}},
		{"a.f32", []float32{0.25, -2}}, {"a.bool", []bool{true, false, true}},
		{"a.str", []string{"a", "", "ccc"}}, {"a.u64", []uint64{1 << 40}}, {"a.i64", []int64{-1 << 40}},
		{"a.f64", []float64{1e300, -0.5}}, {"a.empty", []string{}},
		{"a.nested", []any{[]int32{1, 2}, []string{"x"}, []any{[]bool{true}, []float64{}}, []uint8{}}},
	}
}

// supportedTensors holds a tensor of every type Dequantize supports, with hand-built data,
// plus one K-quant tensor (Q2_K) that opens but does not dequantize.
func supportedTensors() []TensorData {
	f32 := make([]byte, 4*6)
	for i := range 6 {
		binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(float32(i)-2.5))
	}
	q := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7) + seed
		}
		return b
	}
	return []TensorData{
		{Name: "f32", Dims: []uint64{3, 2}, Type: F32, Data: f32},
		{Name: "f16", Dims: []uint64{5}, Type: F16, Data: u16s(0x3c00, 0xc000, 0x7bff, 0x0001, 0x3555)},
		{Name: "bf16", Dims: []uint64{2, 1, 1}, Type: BF16, Data: u16s(0x3f80, 0xc040)},
		{Name: "q8_0", Dims: []uint64{64, 2}, Type: Q8_0, Data: withScales(q(4*34, 1), 34, 0x3800)},
		{Name: "q4_0", Dims: []uint64{32}, Type: Q4_0, Data: withScales(q(18, 2), 18, 0x2e66)},
		{Name: "q4_1", Dims: []uint64{32, 3}, Type: Q4_1, Data: withScales(q(3*20, 3), 20, 0x2400)},
		{Name: "q5_0", Dims: []uint64{32, 2}, Type: Q5_0, Data: withScales(q(2*22, 5), 22, 0x2e66)},
		{Name: "q5_1", Dims: []uint64{64}, Type: Q5_1, Data: withScales(q(2*24, 6), 24, 0x2400)},
		{Name: "q4_k", Dims: []uint64{256}, Type: Q4_K, Data: withScales(q(144, 4), 144, 0x2400)},
		{Name: "q5_k", Dims: []uint64{256, 2}, Type: Q5_K, Data: withScales(q(2*176, 7), 176, 0x2400)},
		{Name: "q6_k", Dims: []uint64{256}, Type: Q6_K, Data: withF16(q(210, 8), 210, 208, 0x2400)},
		{Name: "q2_k", Dims: []uint64{256}, Type: Q2_K, Data: q(84, 9)},
		{Name: "scalar", Dims: []uint64{}, Type: F32, Data: f32[:4]},
	}
}

func u16s(v ...uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return b
}

// withScales sets the first f16 of each block to scale (so the values stay finite).
func withScales(b []byte, block int, scale uint16) []byte { return withF16(b, block, 0, scale) }

// withF16 sets the f16 at byte offset off of each block to v.
func withF16(b []byte, block, off int, v uint16) []byte {
	for i := 0; i < len(b); i += block {
		binary.LittleEndian.PutUint16(b[i+off:], v)
	}
	return b
}

func writeTemp(t *testing.T, meta []KV, tensors []TensorData) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.gguf")
	if err := WriteFile(path, meta, tensors); err != nil {
		t.Fatal(err)
	}
	return path
}

func encode(t testing.TB, meta []KV, tensors []TensorData) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, meta, tensors); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	for _, align := range []uint32{0, 64, 1} {
		meta := allValues()
		want := uint64(DefaultAlignment)
		if align != 0 {
			meta = append(meta, KV{AlignmentKey, align})
			want = uint64(align)
		}
		tensors := supportedTensors()
		path := writeTemp(t, meta, tensors)
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if f.Version != 3 || f.Alignment != want || f.Metadata.Len() != len(meta) {
			t.Fatalf("version %d alignment %d keys %d", f.Version, f.Alignment, f.Metadata.Len())
		}
		for i, kv := range meta {
			if got, _ := f.Metadata.Get(kv.Key); !reflect.DeepEqual(got, kv.Value) {
				t.Errorf("%s: got %#v, want %#v", kv.Key, got, kv.Value)
			}
			if f.Metadata.Keys()[i] != kv.Key {
				t.Errorf("key %d is %s, want %s", i, f.Metadata.Keys()[i], kv.Key)
			}
		}
		if !reflect.DeepEqual(f.Names(), names(tensors)) {
			t.Errorf("tensor order %v", f.Names())
		}
		for _, td := range tensors {
			info := f.Tensors[td.Name]
			if info.Type != td.Type || !reflect.DeepEqual(info.Dims, td.Dims) || info.Size != uint64(len(td.Data)) || info.Offset%want != 0 {
				t.Errorf("%s: info %+v", td.Name, info)
			}
			raw, err := f.Tensor(td.Name)
			if err != nil || !bytes.Equal(raw, td.Data) {
				t.Errorf("%s: raw data differs (%v)", td.Name, err)
			}
			vals, err := f.Float32(td.Name)
			if td.Type == Q2_K {
				if err == nil || !strings.Contains(err.Error(), "Q2_K is not supported yet") || !strings.Contains(err.Error(), `"q2_k"`) {
					t.Errorf("q2_k: %v", err)
				}
				continue
			}
			direct, _ := Dequantize(td.Type, td.Data, int(info.Elems()))
			if err != nil || uint64(len(vals)) != info.Elems() || !reflect.DeepEqual(vals, direct) {
				t.Errorf("%s: %d values, %v", td.Name, len(vals), err)
			}
		}
		if got, _ := f.Float32("f32"); !reflect.DeepEqual(got, []float32{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5}) {
			t.Errorf("f32 values %v", got)
		}
		if s := f.Tensors["bf16"].Shape(); !reflect.DeepEqual(s, []int{1, 1, 2}) {
			t.Errorf("shape %v", s)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Tensor("f32"); err == nil {
			t.Error("Tensor after Close succeeded")
		}
	}
}

func names(ts []TensorData) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

// Version 2 has the same layout as 3 (3 only added big-endian files, which Hone refuses).
func TestVersion2(t *testing.T) {
	b := encode(t, allValues(), supportedTensors())
	binary.LittleEndian.PutUint32(b[4:], 2)
	f, err := Parse(b, "v2.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || len(f.Tensors) != len(supportedTensors()) {
		t.Fatalf("version %d, %d tensors", f.Version, len(f.Tensors))
	}
}

func TestAccessors(t *testing.T) {
	f, err := Parse(encode(t, allValues(), nil), "m.gguf")
	if err != nil {
		t.Fatal(err)
	}
	m := f.Metadata
	check := func(got, want any, err error) {
		t.Helper()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("got %#v (%v), want %#v", got, err, want)
		}
	}
	s, err := m.String("general.architecture")
	check(s, "llama", err)
	u, err := m.Uint("u32")
	check(u, uint64(4000000000), err)
	u, err = m.Uint("u8")
	check(u, uint64(200), err)
	i, err := m.Int("i64")
	check(i, int64(math.MinInt64), err)
	i, err = m.Int("i16")
	check(i, int64(-30000), err)
	fl, err := m.Float("f32")
	check(fl, 1.5, err)
	fl, err = m.Float("f64")
	check(fl, math.Pi, err)
	bo, err := m.Bool("bool.true")
	check(bo, true, err)
	ss, err := m.Strings("a.str")
	check(ss, []string{"a", "", "ccc"}, err)
	is, err := m.Ints("a.i32")
	check(is, []int64{-7, 8, 9}, err)
	is, err = m.Ints("a.u64")
	check(is, []int64{1 << 40}, err)
	fs, err := m.Floats("a.f32")
	check(fs, []float64{0.25, -2}, err)

	for _, c := range []struct {
		err  error
		want string
	}{
		{second(m.String("u32")), `m.gguf: metadata key "u32" is uint32, not a string`},
		{second(m.Uint("i8")), `metadata key "i8" is negative (-100)`},
		{second(m.Int("u64")), `metadata key "u64": 18446744073709551615 overflows int64`},
		{second(m.Float("u32")), `"u32" is uint32, not a float`},
		{second(m.Strings("a.i32")), `"a.i32" is array of int32, not an array of string`},
		{second(m.Ints("a.str")), `is array of string, not an array of integers`},
		{second(m.Bool("missing")), `m.gguf: metadata key "missing": absent`},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("error %v, want it to contain %q", c.err, c.want)
		}
	}
	if _, err := m.String("missing"); !errors.Is(err, ErrNoKey) {
		t.Errorf("missing key: %v is not ErrNoKey", err)
	}
}

func second[T any](_ T, err error) error { return err }

// f16 bits of a few values: 0.5 = 0x3800, 0.1 ≈ 0x2e66, 0.25 = 0x3400, -1 = 0xbc00, 2 = 0x4000.
func TestDequantizeBlocks(t *testing.T) {
	// Q8_0: d = 0.5, qs = -16..15.
	q8 := u16s(0x3800)
	want := make([]float32, 32)
	for i := range 32 {
		q8 = append(q8, byte(int8(i-16)))
		want[i] = float32(i-16) / 2
	}
	expect(t, Q8_0, q8, want)

	// Q8_0 with extremes: d = 2, qs = -128 and 127.
	q8 = append(u16s(0x4000), make([]byte, 32)...)
	q8[2], q8[3] = 0x80, 0x7f
	want = make([]float32, 32)
	want[0], want[1] = -256, 254
	expect(t, Q8_0, q8, want)

	// Q4_0: d = 2; byte j holds j in its low nibble and 15-j in its high one, so element j is
	// 2*(j-8) and element j+16 is 2*(15-j-8).
	q40 := u16s(0x4000)
	want = make([]float32, 32)
	for j := range 16 {
		q40 = append(q40, byte(j|(15-j)<<4))
		want[j] = float32(2 * (j - 8))
		want[j+16] = float32(2 * (7 - j))
	}
	expect(t, Q4_0, q40, want)

	// Q4_1: d = 0.25, m = -1: element j is 0.25*j-1, element j+16 is 0.25*(15-j)-1; then a
	// second block with d = 0.5, m = 2 and all nibbles 15: 9.5 everywhere.
	q41 := u16s(0x3400, 0xbc00)
	want = make([]float32, 64)
	for j := range 16 {
		q41 = append(q41, byte(j|(15-j)<<4))
		want[j] = 0.25*float32(j) - 1
		want[j+16] = 0.25*float32(15-j) - 1
	}
	q41 = append(q41, u16s(0x3800, 0x4000)...)
	for j := range 16 {
		q41 = append(q41, 0xff)
		want[32+j], want[48+j] = 9.5, 9.5
	}
	expect(t, Q4_1, q41, want)

	expect(t, F16, u16s(0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00, 0x8000),
		[]float32{1, -2, 65504, float32(math.Ldexp(1, -24)), float32(math.Inf(1)), float32(math.Copysign(0, -1))})
	expect(t, BF16, u16s(0x3f80, 0xc040, 0x4049), []float32{1, -3, 3.140625})
	expect(t, F32, binary.LittleEndian.AppendUint32(nil, math.Float32bits(-7.25)), []float32{-7.25})

	for _, c := range []struct {
		t    TensorType
		raw  []byte
		n    int
		want string
	}{
		{Q2_K, make([]byte, 84), 256, "tensor type Q2_K is not supported yet"},
		{Q3_K, make([]byte, 110), 256, "tensor type Q3_K is not supported yet (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)"},
		{Q8_K, make([]byte, 292), 256, "tensor type Q8_K is not supported yet"},
		{Q4_K, make([]byte, 144), 255, "255 elements are not a whole number of Q4_K blocks of 256"},
		{Q6_K, make([]byte, 209), 256, "256 elements of Q6_K take 210 bytes, got 209"},
		{IQ2_XS, make([]byte, 74), 256, "tensor type IQ2_XS is not supported yet"},
		{TensorType(99), nil, 0, "unknown tensor type 99"},
		{Q8_0, make([]byte, 33), 32, "32 elements of Q8_0 take 34 bytes, got 33"},
		{Q4_0, make([]byte, 18), 31, "31 elements are not a whole number of Q4_0 blocks of 32"},
		{F32, make([]byte, 8), -1, "-1 elements"},
		{F16, make([]byte, 8), 3, "3 elements of F16 take 6 bytes, got 8"},
	} {
		if _, err := Dequantize(c.t, c.raw, c.n); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Dequantize(%s, %d bytes, %d): %v, want %q", c.t, len(c.raw), c.n, err, c.want)
		}
	}
}

func expect(t *testing.T, typ TensorType, raw []byte, want []float32) {
	t.Helper()
	got, err := Dequantize(typ, raw, len(want))
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Errorf("%s[%d] = %v, want %v", typ, i, got[i], want[i])
		}
	}
}

func TestWriteErrors(t *testing.T) {
	for _, c := range []struct {
		meta    []KV
		tensors []TensorData
		want    string
	}{
		{[]KV{{"x", 7}}, nil, `metadata key "x": Go type int has no GGUF type`},
		{[]KV{{"x", []any{"s"}}}, nil, `element 0 of an array of arrays is string`},
		{[]KV{{"x", uint8(1)}, {"x", uint8(2)}}, nil, `"x" appears twice`},
		{[]KV{{AlignmentKey, uint32(3)}}, nil, "must be a power of two"},
		{nil, []TensorData{{Name: "w", Dims: []uint64{32}, Type: Q8_0, Data: make([]byte, 33)}}, `tensor "w": Q8_0 [32] takes 34 bytes, data has 33`},
		{nil, []TensorData{{Name: "w", Dims: []uint64{16}, Type: Q4_0, Data: make([]byte, 9)}}, `dims [16] are not whole Q4_0 blocks`},
		{nil, []TensorData{{Name: "w", Type: TensorType(77)}}, "unknown tensor type 77"},
	} {
		if err := Write(&bytes.Buffer{}, c.meta, c.tensors); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Write: %v, want %q", err, c.want)
		}
	}
}

// TestOpenMetadataOnly: a GGUF without tensors that ends right after its metadata, before the
// aligned start of its (empty) data section, opens: gguf-py writes vocabulary-only files so
// (llama.cpp's convert_hf_to_gguf.py --vocab-only).
func TestOpenMetadataOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	if err := WriteFile(path, []KV{{Key: "general.architecture", Value: "llama"}, {Key: "tokenizer.ggml.model", Value: "llama"}}, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	if end%32 == 0 {
		t.Fatalf("the metadata ends at %d, aligned: the test needs an unaligned end", end)
	}
	if err := os.WriteFile(path, b[:end], 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if s, err := f.Metadata.String("tokenizer.ggml.model"); err != nil || s != "llama" {
		t.Fatalf("tokenizer.ggml.model = %q, %v", s, err)
	}
}

// TestWriteFileMode: a written GGUF file is readable by all, as llama.cpp or Ollama running as
// another user need (the temporary file it starts as is 0600).
func TestWriteFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := WriteFile(path, []KV{{Key: "general.architecture", Value: "llama"}}, nil); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", st.Mode().Perm())
	}
}

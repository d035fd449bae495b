package gguf

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// raw builds a file by hand, field by field.
type raw []byte

func (r raw) u32(v uint32) raw { return binary.LittleEndian.AppendUint32(r, v) }
func (r raw) u64(v uint64) raw { return binary.LittleEndian.AppendUint64(r, v) }
func (r raw) str(s string) raw { return append(r.u64(uint64(len(s))), s...) }
func (r raw) pad(n int) raw    { return append(r, make([]byte, n)...) }

// header is the magic, version 3 and the two counts.
func header(tensors, kvs uint64) raw { return raw(Magic).u32(3).u64(tensors).u64(kvs) }

// tensor is a tensor info.
func (r raw) tensor(name string, typ TensorType, offset uint64, dims ...uint64) raw {
	r = r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r = r.u64(d)
	}
	return r.u32(uint32(typ)).u64(offset)
}

// withData pads r to 32 and appends n bytes of data.
func (r raw) withData(n int) raw { return r.pad((32 - len(r)%32) % 32).pad(n) }

func TestBadInput(t *testing.T) {
	nested := header(0, 1).str("deep").u32(uint32(TypeArray))
	for range MaxArrayDepth + 1 {
		nested = nested.u32(uint32(TypeArray)).u64(1)
	}
	nested = nested.pad(64)
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "magic: truncated at byte 0 (need 4 bytes, 0 left)"},
		{"magic", raw("GGML").u32(3).u64(0).u64(0), `magic: "GGML" is not "GGUF"`},
		{"version 1", raw(Magic).u32(1).u64(0).u64(0), "GGUF version 1 is not supported"},
		{"version 4", raw(Magic).u32(4).u64(0).u64(0), "unsupported GGUF version 4"},
		{"big-endian", raw(Magic).u32(3 << 24).u64(0).u64(0), "big-endian GGUF file"},
		{"truncated header", raw(Magic).u32(3).u64(0), "metadata count: truncated at byte 16"},
		{"tensor count", header(1<<60, 0), "tensor count: 1152921504606846976 tensors cannot fit"},
		{"metadata count", header(0, 1<<62), "metadata count: 4611686018427387904 entries cannot fit"},
		{"key length", header(0, 1).u64(1 << 40).pad(16), "metadata entry 0: key: length 1099511627776 exceeds the limit"},
		{"key truncated", header(0, 1).u64(100).pad(10), "metadata entry 0: key: truncated at byte 32 (need 100 bytes, 10 left)"},
		{"value type", header(0, 1).str("k").u32(13).pad(8), `metadata key "k": unknown value type 13`},
		{"string length", header(0, 1).str("k").u32(uint32(TypeString)).u64(1 << 62), `metadata key "k": truncated at byte 45 (need 4611686018427387904 bytes`},
		{"array length", header(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeUint64)).u64(1 << 61).pad(16), `metadata key "k": array of 2305843009213693952 uint64 cannot fit in the 16 bytes left`},
		{"array of strings", header(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(3).str("a").u64(99).pad(8), `metadata key "k"[1]: truncated`},
		{"array element type", header(0, 1).str("k").u32(uint32(TypeArray)).u32(42).u64(0), `metadata key "k": unknown array element type 42`},
		{"nested too deep", nested, `arrays nested deeper than 8`},
		{"bool", header(0, 1).str("k").u32(uint32(TypeBool)).pad(0), `metadata key "k": truncated`},
		{"bool value", append(header(0, 1).str("k").u32(uint32(TypeBool)), 2), `metadata key "k": bool byte 2 is neither 0 nor 1`},
		{"duplicate key", header(0, 2).str("k").u32(uint32(TypeUint8)).pad(1).str("k").u32(uint32(TypeUint8)).pad(1), `metadata key "k": appears twice`},
		{"alignment type", header(0, 1).str(AlignmentKey).u32(uint32(TypeString)).str("32"), `metadata key "general.alignment": is string, not an integer`},
		{"alignment value", header(0, 1).str(AlignmentKey).u32(uint32(TypeUint32)).u32(48), `"general.alignment": 48 is not a power of two`},
		{"alignment zero", header(0, 1).str(AlignmentKey).u32(uint32(TypeUint32)).u32(0), `"general.alignment": 0 is not a power of two`},
		{"dimension count", header(1, 0).str("w").u32(5).pad(60), `tensor "w": dimension count 5 exceeds 4`},
		{"dims overflow", header(1, 0).str("w").u32(3).u64(1 << 32).u64(1 << 32).u64(4).pad(12), `tensor "w": dimensions [4294967296 4294967296] overflow`},
		{"unknown type", header(1, 0).tensor("w", TensorType(4), 0, 8).withData(32), `tensor "w": unknown tensor type 4`},
		{"block size", header(1, 0).tensor("w", Q4_0, 0, 16, 2).withData(32), `tensor "w": row length 16 (dimension 0) is not a multiple of the Q4_0 block size 32`},
		{"misaligned", header(1, 0).tensor("w", F32, 4, 2).withData(32), `tensor "w": offset 4 is not a multiple of the alignment 32`},
		{"past the end", header(1, 0).tensor("w", Q8_0, 0, 32, 2).withData(67), `tensor "w": offset 0 + size 68 bytes (Q8_0 [32 2]) runs past the end of the data section (67 bytes)`},
		{"offset outside", header(1, 0).tensor("w", F32, 1<<40, 1).withData(32), `tensor "w": offset 1099511627776 + size 4 bytes`},
		{"no data section", header(1, 0).tensor("w", F32, 0, 1), `tensor data: file ends at byte 57, before the data section at byte 64`},
		{"overlap", header(2, 0).tensor("a", F32, 0, 16).tensor("b", F32, 32, 1).withData(64), `tensor "a": offset 0 + size 64 bytes (F32 [16]) overlaps tensor "b" at offset 32`},
		{"duplicate tensor", header(2, 0).tensor("a", F32, 0, 1).tensor("a", F32, 32, 1).withData(64), `tensor "a": appears twice`},
		{"tensor truncated", header(1, 0).tensor("w", F32, 0, 1)[:50], `tensor "w": offset: truncated`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.b, "/models/bad.gguf")
			if err == nil {
				t.Fatal("parsed")
			}
			if !strings.HasPrefix(err.Error(), "gguf: bad.gguf: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to name the file and contain %q", err, c.want)
			}
		})
	}
}

// Every truncation of a valid file is an error (until only the final padding is cut), never
// a panic.
func TestTruncated(t *testing.T) {
	b := encode(t, allValues(), supportedTensors())
	f, err := Parse(b, "full.gguf")
	if err != nil {
		t.Fatal(err)
	}
	var end uint64
	for _, ti := range f.Tensors {
		end = max(end, f.dataStart+ti.Offset+ti.Size)
	}
	for n := range int(end) {
		if _, err := Parse(b[:n], "cut.gguf"); err == nil {
			t.Fatalf("%d of %d bytes parsed", n, len(b))
		} else if !strings.HasPrefix(err.Error(), "gguf: cut.gguf: ") {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	if _, err := Parse(b[:end], "cut.gguf"); err != nil {
		t.Fatalf("without the final padding: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.gguf")
	os.WriteFile(short, []byte("GGUF"), 0o644)
	bad := filepath.Join(dir, "bad.gguf")
	os.WriteFile(bad, header(1<<40, 0), 0o644)
	for path, want := range map[string]string{
		filepath.Join(dir, "missing.gguf"): "no such file",
		short:                              "short.gguf: 4 bytes is too short for a GGUF header",
		bad:                                "bad.gguf: tensor count: 1099511627776 tensors cannot fit",
	} {
		if _, err := Open(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s): %v, want %q", path, err, want)
		}
	}
}

// FuzzParse: no input panics or allocates without bound, and whatever parses can be read:
// every tensor's bytes are in the file and every supported tensor dequantizes.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Parse(b, "fuzz.gguf")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "gguf: fuzz.gguf: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, k := range g.Metadata.Keys() {
			g.Metadata.String(k)
			g.Metadata.Uint(k)
			g.Metadata.Ints(k)
			g.Metadata.Floats(k)
		}
		for _, name := range g.Names() {
			info := g.Tensors[name]
			raw, err := g.Tensor(name)
			if err != nil || uint64(len(raw)) != info.Size {
				t.Fatalf("%s: %d bytes, %v", name, len(raw), err)
			}
			if info.Type.Dequantizable() {
				if v, err := g.Float32(name); err != nil || uint64(len(v)) != info.Elems() {
					t.Fatalf("%s: %d values, %v", name, len(v), err)
				}
			}
		}
	})
}

func fuzzSeeds(t testing.TB) [][]byte {
	return [][]byte{
		encode(t, allValues(), supportedTensors()),
		encode(t, []KV{{AlignmentKey, uint32(8)}, {"a", []any{[]any{[]string{"x"}}}}}, supportedTensors()[:3]),
		encode(t, nil, nil),
		header(2, 0).tensor("a", F32, 0, 16).tensor("b", Q4_1, 64, 32).withData(84),
		raw(Magic).u32(2).u64(0).u64(1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(2).str("x").str("yz"),
	}
}

// TestWriteFuzzSeeds writes the seeds above as the committed corpus under testdata/fuzz when
// HONE_GGUF_WRITE_SEEDS=1 (go test then runs them as part of FuzzParse).
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("HONE_GGUF_WRITE_SEEDS") != "1" {
		t.Skip("set HONE_GGUF_WRITE_SEEDS=1 to rewrite testdata/fuzz/FuzzParse")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range fuzzSeeds(t) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

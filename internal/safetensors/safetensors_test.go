package safetensors

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTripAndShards(t *testing.T) {
	dir := t.TempDir()
	a := FromF32("a.weight", []int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	b := FromU16("b.weight", BF16, []int{4}, []uint16{0x3f80, 0x4000, 0x4040, 0x4080})
	c := Tensor{Name: "c.empty", DType: F32, Shape: []int{0, 5}, Data: []byte{}}
	if err := Write(filepath.Join(dir, "model.safetensors"), []Tensor{b, a, c}, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	n := binary.LittleEndian.Uint64(raw)
	if n%8 != 0 || !strings.HasPrefix(string(raw[8:]), `{"__metadata__":{"format":"pt"},"a.weight"`) {
		t.Fatalf("header %q (len %d)", raw[8:8+n], n)
	}
	f, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ta, _ := f.Tensor("a.weight")
	v, err := ta.F32()
	if err != nil || len(v) != 6 || v[5] != 6 || ta.Shape[1] != 3 {
		t.Fatalf("a = %v %v", v, err)
	}
	tb, _ := f.Tensor("b.weight")
	u, _ := tb.U16()
	if u[2] != 0x4040 {
		t.Fatalf("b = %v", u)
	}
	if _, err := tb.F32(); err == nil {
		t.Fatal("BF16 read as F32")
	}
	if f.Metadata()["format"] != "pt" || strings.Join(f.Names(), ",") != "a.weight,b.weight,c.empty" {
		t.Fatalf("meta %v names %v", f.Metadata(), f.Names())
	}

	// Sharded: two files and an index.
	sd := t.TempDir()
	if err := Write(filepath.Join(sd, "model-00001-of-00002.safetensors"), []Tensor{a}, nil); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(sd, "model-00002-of-00002.safetensors"), []Tensor{b}, nil); err != nil {
		t.Fatal(err)
	}
	idx := `{"metadata":{"total_size":32},"weight_map":{"a.weight":"model-00001-of-00002.safetensors","b.weight":"model-00002-of-00002.safetensors"}}`
	os.WriteFile(filepath.Join(sd, IndexName), []byte(idx), 0o644)
	g, err := OpenDir(sd)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Names()) != 2 {
		t.Fatal(g.Names())
	}
	g.Close()
	os.WriteFile(filepath.Join(sd, IndexName), []byte(`{"weight_map":{"a.weight":"../x.safetensors"}}`), 0o644)
	if _, err := OpenDir(sd); err == nil {
		t.Fatal("shard outside the directory accepted")
	}
}

func header(h string, data int) []byte {
	b := make([]byte, 8, 8+len(h)+data)
	binary.LittleEndian.PutUint64(b, uint64(len(h)))
	b = append(b, h...)
	return append(b, make([]byte, data)...)
}

func TestBadFiles(t *testing.T) {
	cases := map[string][]byte{
		"short":          []byte{1, 2},
		"huge header":    append(binary.LittleEndian.AppendUint64(nil, 1<<40), '{', '}'),
		"not json":       header("{nope", 0),
		"bad dtype":      header(`{"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}}`, 1),
		"size mismatch":  header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 8),
		"out of range":   header(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 4),
		"overlap":        header(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}`, 8),
		"negative shape": header(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, 0),
		"bad metadata":   header(`{"__metadata__":{"a":1}}`, 0),
	}
	for name, b := range cases {
		p := filepath.Join(t.TempDir(), "x.safetensors")
		os.WriteFile(p, b, 0o644)
		if f, err := Open(p); err == nil {
			f.Close()
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Encode([]Tensor{{Name: "a", DType: F32, Shape: []int{2}, Data: []byte{1}}}, nil); err == nil {
		t.Error("wrong data length encoded")
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add([]byte(`{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"__metadata__":{"k":"v"}}`), int64(16))
	f.Add([]byte(`{}`), int64(0))
	f.Fuzz(func(t *testing.T, hdr []byte, dataLen int64) {
		if dataLen < 0 {
			return
		}
		entries, _, err := parseHeader(hdr, dataLen)
		if err != nil {
			return
		}
		for name, e := range entries {
			if e.DataOffsets[1] > dataLen || e.DataOffsets[0] > e.DataOffsets[1] {
				t.Fatalf("%s: offsets %v accepted for %d bytes", name, e.DataOffsets, dataLen)
			}
		}
	})
}

// Package safetensors reads and writes the safetensors format: an 8-byte little-endian header
// length, a JSON header naming each tensor's dtype, shape and byte range, then the raw
// little-endian data. Files are memory-mapped for reading, so tensors are views of the file
// (no copy) where alignment allows; sharded checkpoints (`model.safetensors.index.json`) open
// as one set. Files are written atomically (temporary file, fsync, rename).
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"
)

// DType is a tensor element type.
type DType string

// Element types.
const (
	F64  DType = "F64"
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I64  DType = "I64"
	I32  DType = "I32"
	I16  DType = "I16"
	I8   DType = "I8"
	U8   DType = "U8"
	Bool DType = "BOOL"
)

// Size is the size of one element in bytes (0 for unknown types).
func (d DType) Size() int {
	switch d {
	case F64, I64:
		return 8
	case F32, I32:
		return 4
	case F16, BF16, I16:
		return 2
	case I8, U8, Bool:
		return 1
	}
	return 0
}

// Tensor is one tensor of a file.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	// Data is the raw little-endian bytes (a view of the mapped file).
	Data []byte

	mapped bool // Data is a view of a mapped file (see Release)
}

// Mapped reports whether t's Data is a view of a mapped file, whose pages Release and
// ReleaseRange can give back (false for tensors built in memory, and where files are read).
func (t *Tensor) Mapped() bool { return t.mapped }

// Elems is the number of elements.
func (t *Tensor) Elems() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// F32 returns the data of an F32 tensor as float32s (a view when aligned, else a copy).
func (t *Tensor) F32() ([]float32, error) {
	if t.DType != F32 {
		return nil, fmt.Errorf("safetensors: %s is %s, not F32", t.Name, t.DType)
	}
	n := len(t.Data) / 4
	if n == 0 {
		return []float32{}, nil
	}
	if uintptr(unsafe.Pointer(&t.Data[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&t.Data[0])), n), nil
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out, nil
}

// U16 returns the data of a 16-bit tensor (F16, BF16, I16) as bit patterns.
func (t *Tensor) U16() ([]uint16, error) {
	if t.DType.Size() != 2 {
		return nil, fmt.Errorf("safetensors: %s is %s, not a 16-bit type", t.Name, t.DType)
	}
	n := len(t.Data) / 2
	if n == 0 {
		return []uint16{}, nil
	}
	if uintptr(unsafe.Pointer(&t.Data[0]))%2 == 0 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&t.Data[0])), n), nil
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(t.Data[2*i:])
	}
	return out, nil
}

type headerEntry struct {
	DType       DType    `json:"dtype"`
	Shape       []int    `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// MaxHeaderBytes bounds the JSON header.
const MaxHeaderBytes = 100 << 20

// parseHeader validates a header against a data section of dataLen bytes.
func parseHeader(hdr []byte, dataLen int64) (map[string]headerEntry, map[string]string, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, nil, fmt.Errorf("safetensors: header: %w", err)
	}
	entries := map[string]headerEntry{}
	var meta map[string]string
	type span struct {
		name       string
		start, end int64
	}
	var spans []span
	for name, r := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(r, &meta); err != nil {
				return nil, nil, fmt.Errorf("safetensors: __metadata__ must map strings to strings: %w", err)
			}
			continue
		}
		var e headerEntry
		if err := json.Unmarshal(r, &e); err != nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		size := int64(e.DType.Size())
		if size == 0 {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: unknown dtype %q", name, e.DType)
		}
		n := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && n > math.MaxInt64/int64(d)/size) {
				return nil, nil, fmt.Errorf("safetensors: tensor %q: bad shape %v", name, e.Shape)
			}
			n *= int64(d)
		}
		start, end := e.DataOffsets[0], e.DataOffsets[1]
		if start < 0 || end < start || end > dataLen {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: data offsets %v outside the %d data bytes", name, e.DataOffsets, dataLen)
		}
		if end-start != n*size {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: %d bytes for shape %v of %s", name, end-start, e.Shape, e.DType)
		}
		entries[name] = e
		spans = append(spans, span{name, start, end})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			return nil, nil, fmt.Errorf("safetensors: tensors %q and %q overlap", spans[i-1].name, spans[i].name)
		}
	}
	return entries, meta, nil
}

// File is an open safetensors file (or a sharded set).
type File struct {
	tensors  map[string]*Tensor
	metadata map[string]string
	maps     [][]byte
}

// Open memory-maps one safetensors file.
func Open(path string) (*File, error) {
	f := &File{tensors: map[string]*Tensor{}}
	if err := f.add(path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// IndexName is the name of a sharded checkpoint's index.
const IndexName = "model.safetensors.index.json"

// OpenDir opens a model directory's weights: model.safetensors, or the shards listed by
// model.safetensors.index.json.
func OpenDir(dir string) (*File, error) {
	idx, err := os.ReadFile(filepath.Join(dir, IndexName))
	if errors.Is(err, os.ErrNotExist) {
		return Open(filepath.Join(dir, "model.safetensors"))
	}
	if err != nil {
		return nil, err
	}
	var index struct {
		Metadata  map[string]any    `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(idx, &index); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", IndexName, err)
	}
	shards := map[string]bool{}
	for _, s := range index.WeightMap {
		if strings.Contains(s, "/") || strings.Contains(s, `\`) || s == ".." {
			return nil, fmt.Errorf("safetensors: %s names a shard outside the directory: %q", IndexName, s)
		}
		shards[s] = true
	}
	names := make([]string, 0, len(shards))
	for s := range shards {
		names = append(names, s)
	}
	sort.Strings(names)
	f := &File{tensors: map[string]*Tensor{}}
	for _, s := range names {
		if err := f.add(filepath.Join(dir, s)); err != nil {
			f.Close()
			return nil, err
		}
	}
	for name, shard := range index.WeightMap {
		if _, ok := f.tensors[name]; !ok {
			f.Close()
			return nil, fmt.Errorf("safetensors: %s lists %q in %s, which does not hold it", IndexName, name, shard)
		}
	}
	return f, nil
}

func (f *File) add(path string) error {
	fd, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if size < 8 {
		return fmt.Errorf("safetensors: %s: %d bytes is too short", path, size)
	}
	data, err := mapFile(fd, size)
	if err != nil {
		return fmt.Errorf("safetensors: mmap %s: %w", path, err)
	}
	f.maps = append(f.maps, data)
	n := binary.LittleEndian.Uint64(data[:8])
	if n > MaxHeaderBytes || int64(n) > size-8 {
		return fmt.Errorf("safetensors: %s: header length %d does not fit the %d-byte file", path, n, size)
	}
	entries, meta, err := parseHeader(data[8:8+n], size-8-int64(n))
	if err != nil {
		return fmt.Errorf("%w (in %s)", err, path)
	}
	body := data[8+n:]
	for name, e := range entries {
		if _, dup := f.tensors[name]; dup {
			return fmt.Errorf("safetensors: tensor %q appears in more than one shard", name)
		}
		f.tensors[name] = &Tensor{Name: name, DType: e.DType, Shape: e.Shape, Data: body[e.DataOffsets[0]:e.DataOffsets[1]], mapped: true}
	}
	if f.metadata == nil {
		f.metadata = meta
	}
	return nil
}

// Tensor returns a tensor by name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	t, ok := f.tensors[name]
	return t, ok
}

// Names lists the tensors, sorted.
func (f *File) Names() []string {
	out := make([]string, 0, len(f.tensors))
	for n := range f.tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Metadata is the __metadata__ of the (first) file.
func (f *File) Metadata() map[string]string { return f.metadata }

// Close unmaps the files; tensors must not be used afterwards.
func (f *File) Close() error {
	var errs []error
	for _, m := range f.maps {
		errs = append(errs, unmapFile(m))
	}
	f.maps = nil
	f.tensors = nil
	return errors.Join(errs...)
}

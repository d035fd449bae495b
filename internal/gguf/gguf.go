// Package gguf reads GGUF files, the single-file model format of llama.cpp and Ollama: a header,
// typed key/value metadata (architecture, hyperparameters, tokenizer, chat template), tensor
// infos (name, dimensions, ggml type, offset), then the aligned tensor data. Versions 2 and 3
// are read (little-endian only); files are memory-mapped like internal/safetensors, so
// File.Tensor is a view of the file, not a copy. Dequantize turns F32, F16, BF16, Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K data into float32; other ggml types (Q2_K, Q3_K, Q8_K,
// Q8_1, the IQ and TQ types, MXFP4, the integer types) open and describe fine but Dequantize
// refuses them by name. Write produces files in the same format.
//
// Every count, length and offset is checked against the file's size before anything is
// allocated, so a truncated or corrupt file is an error naming the file, the key or tensor,
// and the field, never a panic or a huge allocation.
//
// Usage:
//
//	f, err := gguf.Open("SmolLM2-135M-Instruct.Q4_1.gguf")
//	if err != nil {
//		return err
//	}
//	defer f.Close()
//	arch, err := f.Metadata.String("general.architecture") // "llama"
//	tokens, err := f.Metadata.Strings("tokenizer.ggml.tokens")
//	layers, err := f.Metadata.Uint(arch + ".block_count")
//	info := f.Tensors["token_embd.weight"] // Dims [576 49152] (ggml order), Type Q8_0
//	w, err := f.Float32("token_embd.weight") // 49152 rows of 576, dequantized
//
// Dimensions are in ggml order: Dims[0] is the contiguous one (a row's length), so a
// PyTorch-style [rows, cols] shape is Dims reversed (TensorInfo.Shape).
package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"unsafe"
)

// Magic is the first four bytes of a GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the alignment of the tensor data when general.alignment is absent.
const DefaultAlignment = 32

// AlignmentKey is the metadata key that overrides DefaultAlignment.
const AlignmentKey = "general.alignment"

// Limits on what a file may declare; beyond them the file is refused before allocating.
const (
	MaxDims       = 4       // ggml tensors have at most 4 dimensions
	MaxKeyBytes   = 1 << 16 // a metadata key or tensor name
	MaxArrayDepth = 8       // arrays of arrays of ...
	MaxAlignment  = 1 << 30
)

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name string
	// Dims are in ggml order: Dims[0] is the contiguous dimension (the row length).
	Dims []uint64
	Type TensorType
	// Offset is the position of the data from the start of the data section (aligned).
	Offset uint64
	// Size is the data's size in bytes, from Dims and Type.
	Size uint64
}

// Elems is the number of elements.
func (t *TensorInfo) Elems() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Shape is Dims reversed: outermost first, as safetensors and PyTorch write shapes.
func (t *TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(s)-1-i] = int(d)
	}
	return s
}

// File is a parsed GGUF file. Its tensor data is a view of the mapped file: Close unmaps it.
type File struct {
	// Name is the path the file was opened from (or the name given to Parse).
	Name    string
	Version uint32
	// Alignment of the tensor data (general.alignment, default 32).
	Alignment uint64
	Metadata  *Metadata
	// Tensors by name.
	Tensors map[string]*TensorInfo

	order     []string
	data      []byte // the whole file
	dataStart uint64
	mapped    bool
}

// Open maps and parses a GGUF file.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	if size < headerBytes {
		return nil, fmt.Errorf("gguf: %s: %d bytes is too short for a GGUF header (%d bytes)", path, size, headerBytes)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("gguf: %s: %d bytes does not fit in memory", path, size)
	}
	data, err := mapFile(fd, size)
	if err != nil {
		return nil, fmt.Errorf("gguf: mmap %s: %w", path, err)
	}
	f, err := Parse(data, path)
	if err != nil {
		unmapFile(data)
		return nil, err
	}
	f.mapped = true
	// The header was parsed into copies (Metadata, Tensors): its pages are not read again. A
	// file without tensors (a vocabulary-only GGUF) may end before its aligned data start.
	dropPages(data[:min(f.dataStart, uint64(len(data)))])
	return f, nil
}

// Close unmaps the file; tensor data must not be used afterwards.
func (f *File) Close() error {
	var err error
	if f.mapped && f.data != nil {
		err = unmapFile(f.data)
	}
	f.data, f.mapped = nil, false
	return err
}

// Names lists the tensors in file order.
func (f *File) Names() []string { return append([]string(nil), f.order...) }

// Tensor returns a tensor's raw bytes: a view of the file, valid until Close.
func (f *File) Tensor(name string) ([]byte, error) {
	t, ok := f.Tensors[name]
	if !ok {
		return nil, fmt.Errorf("gguf: %s: no tensor %q", f.Name, name)
	}
	if f.data == nil {
		return nil, fmt.Errorf("gguf: %s: tensor %q: file is closed", f.Name, name)
	}
	start := f.dataStart + t.Offset
	return f.data[start : start+t.Size : start+t.Size], nil
}

// Float32 returns a tensor's values dequantized to float32, in file order (Dims[0] fastest).
func (f *File) Float32(name string) ([]float32, error) {
	raw, err := f.Tensor(name)
	if err != nil {
		return nil, err
	}
	t := f.Tensors[name]
	out, err := Dequantize(t.Type, raw, int(t.Elems()))
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", f.Name, name, err)
	}
	return out, nil
}

// headerBytes is magic, version, tensor count and metadata count.
const headerBytes = 4 + 4 + 8 + 8

// Parse parses a GGUF file held in memory; name is used in error messages. The File's tensor
// data are views of data.
func Parse(data []byte, name string) (*File, error) {
	p := &parser{b: data, file: filepath.Base(name)}
	f, err := p.parse()
	if err != nil {
		return nil, err
	}
	f.Name = name
	f.data = data
	return f, nil
}

type parser struct {
	b    []byte
	off  uint64
	file string
}

// errf is an error naming the file; what names the key or tensor and the field.
func (p *parser) errf(what, format string, args ...any) error {
	return fmt.Errorf("gguf: %s: %s: %s", p.file, what, fmt.Sprintf(format, args...))
}

func (p *parser) left() uint64 { return uint64(len(p.b)) - p.off }

func (p *parser) take(n uint64, what string) ([]byte, error) {
	if n > p.left() {
		return nil, p.errf(what, "truncated at byte %d (need %d bytes, %d left)", p.off, n, p.left())
	}
	b := p.b[p.off : p.off+n]
	p.off += n
	return b, nil
}

func (p *parser) u32(what string) (uint32, error) {
	b, err := p.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (p *parser) u64(what string) (uint64, error) {
	b, err := p.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (p *parser) str(what string, max uint64) (string, error) {
	n, err := p.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > max {
		return "", p.errf(what, "length %d exceeds the limit of %d bytes", n, max)
	}
	b, err := p.take(n, what)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func (p *parser) parse() (*File, error) {
	magic, err := p.take(4, "magic")
	if err != nil {
		return nil, err
	}
	if string(magic) != Magic {
		return nil, p.errf("magic", "%q is not %q (not a GGUF file)", magic, Magic)
	}
	f := &File{Tensors: map[string]*TensorInfo{}}
	if f.Version, err = p.u32("version"); err != nil {
		return nil, err
	}
	switch {
	case f.Version == 2 || f.Version == 3:
	case f.Version == 1:
		return nil, p.errf("version", "GGUF version 1 is not supported (only 2 and 3)")
	case f.Version&0xffff == 0 && bits.ReverseBytes32(f.Version) <= 3:
		return nil, p.errf("version", "%#x: a big-endian GGUF file, which is not supported", f.Version)
	default:
		return nil, p.errf("version", "unsupported GGUF version %d (only 2 and 3)", f.Version)
	}
	nt, err := p.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nkv, err := p.u64("metadata count")
	if err != nil {
		return nil, err
	}
	// A metadata entry is at least 13 bytes (key length, type, a 1-byte value) and a tensor
	// info at least 24 (name length, dimension count, type, offset): cap the counts by what
	// the file can hold before allocating anything for them.
	if nkv > p.left()/13 {
		return nil, p.errf("metadata count", "%d entries cannot fit in the %d bytes left", nkv, p.left())
	}
	if nt > p.left()/24 {
		return nil, p.errf("tensor count", "%d tensors cannot fit in the %d bytes left", nt, p.left())
	}

	md := &Metadata{source: p.file, keys: make([]string, 0, nkv), values: make(map[string]any, nkv)}
	for i := range nkv {
		key, err := p.str(fmt.Sprintf("metadata entry %d: key", i), MaxKeyBytes)
		if err != nil {
			return nil, err
		}
		what := fmt.Sprintf("metadata key %q", key)
		if _, dup := md.values[key]; dup {
			return nil, p.errf(what, "appears twice")
		}
		t, err := p.u32(what + ": value type")
		if err != nil {
			return nil, err
		}
		v, err := p.value(ValueType(t), what, 0)
		if err != nil {
			return nil, err
		}
		md.keys = append(md.keys, key)
		md.values[key] = v
	}
	f.Metadata = md

	f.Alignment = DefaultAlignment
	if v, ok := md.values[AlignmentKey]; ok {
		a, neg, isInt := asInt(v)
		what := fmt.Sprintf("metadata key %q", AlignmentKey)
		switch {
		case !isInt:
			return nil, p.errf(what, "is %s, not an integer", typeName(v))
		case neg || a == 0 || a > MaxAlignment || a&(a-1) != 0:
			return nil, p.errf(what, "%d is not a power of two between 1 and %d", int64(a), MaxAlignment)
		}
		f.Alignment = a
	}

	f.order = make([]string, 0, nt)
	for i := range nt {
		t, err := p.tensorInfo(i, f.Alignment)
		if err != nil {
			return nil, err
		}
		if _, dup := f.Tensors[t.Name]; dup {
			return nil, p.errf(fmt.Sprintf("tensor %q", t.Name), "appears twice")
		}
		f.Tensors[t.Name] = t
		f.order = append(f.order, t.Name)
	}

	// The data section starts at the next multiple of the alignment.
	f.dataStart = (p.off + f.Alignment - 1) / f.Alignment * f.Alignment
	var dataLen uint64
	if f.dataStart <= uint64(len(p.b)) {
		dataLen = uint64(len(p.b)) - f.dataStart
	} else if nt > 0 {
		return nil, p.errf("tensor data", "file ends at byte %d, before the data section at byte %d", len(p.b), f.dataStart)
	}
	byOffset := make([]*TensorInfo, 0, nt)
	for _, name := range f.order {
		t := f.Tensors[name]
		if t.Offset > dataLen || t.Size > dataLen-t.Offset {
			return nil, p.errf(fmt.Sprintf("tensor %q", name), "offset %d + size %d bytes (%s %v) runs past the end of the data section (%d bytes)",
				t.Offset, t.Size, t.Type, t.Dims, dataLen)
		}
		byOffset = append(byOffset, t)
	}
	sort.Slice(byOffset, func(i, j int) bool { return byOffset[i].Offset < byOffset[j].Offset })
	for i := 1; i < len(byOffset); i++ {
		a, b := byOffset[i-1], byOffset[i]
		if a.Offset+a.Size > b.Offset {
			return nil, p.errf(fmt.Sprintf("tensor %q", a.Name), "offset %d + size %d bytes (%s %v) overlaps tensor %q at offset %d",
				a.Offset, a.Size, a.Type, a.Dims, b.Name, b.Offset)
		}
	}
	return f, nil
}

func (p *parser) tensorInfo(i uint64, align uint64) (*TensorInfo, error) {
	name, err := p.str(fmt.Sprintf("tensor info %d: name", i), MaxKeyBytes)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("tensor %q", name)
	nd, err := p.u32(what + ": dimension count")
	if err != nil {
		return nil, err
	}
	if nd > MaxDims {
		return nil, p.errf(what, "dimension count %d exceeds %d", nd, MaxDims)
	}
	t := &TensorInfo{Name: name, Dims: make([]uint64, nd)}
	elems := uint64(1)
	for d := range t.Dims {
		if t.Dims[d], err = p.u64(fmt.Sprintf("%s: dimension %d", what, d)); err != nil {
			return nil, err
		}
		hi, lo := bits.Mul64(elems, t.Dims[d])
		if hi != 0 || lo > math.MaxInt64 {
			return nil, p.errf(what, "dimensions %v overflow the element count", t.Dims[:d+1])
		}
		elems = lo
	}
	typ, err := p.u32(what + ": type")
	if err != nil {
		return nil, err
	}
	t.Type = TensorType(typ)
	if !t.Type.Known() {
		return nil, p.errf(what, "unknown tensor type %d", typ)
	}
	if t.Offset, err = p.u64(what + ": offset"); err != nil {
		return nil, err
	}
	if t.Offset%align != 0 {
		return nil, p.errf(what, "offset %d is not a multiple of the alignment %d", t.Offset, align)
	}
	block, bsize := uint64(t.Type.BlockSize()), uint64(t.Type.BlockBytes())
	if nd > 0 && t.Dims[0]%block != 0 {
		return nil, p.errf(what, "row length %d (dimension 0) is not a multiple of the %s block size %d", t.Dims[0], t.Type, block)
	}
	if elems%block != 0 {
		return nil, p.errf(what, "%d elements are not a multiple of the %s block size %d", elems, t.Type, block)
	}
	hi, size := bits.Mul64(elems/block, bsize)
	if hi != 0 || size > math.MaxInt64 {
		return nil, p.errf(what, "%s %v: byte size overflows", t.Type, t.Dims)
	}
	t.Size = size
	return t, nil
}

// minSize is the least number of bytes a value of type t takes (-1 for an unknown type).
func minSize(t ValueType) int {
	switch t {
	case TypeString:
		return 8
	case TypeArray:
		return 12
	}
	return t.fixedSize()
}

func (p *parser) value(t ValueType, what string, depth int) (any, error) {
	if t == TypeArray {
		return p.array(what, depth)
	}
	if t == TypeString {
		return p.str(what, math.MaxInt64)
	}
	n := t.fixedSize()
	if n < 0 {
		return nil, p.errf(what, "unknown value type %d", uint32(t))
	}
	b, err := p.take(uint64(n), what)
	if err != nil {
		return nil, err
	}
	return scalar(t, b, p, what)
}

func scalar(t ValueType, b []byte, p *parser, what string) (any, error) {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0], nil
	case TypeInt8:
		return int8(b[0]), nil
	case TypeUint16:
		return le.Uint16(b), nil
	case TypeInt16:
		return int16(le.Uint16(b)), nil
	case TypeUint32:
		return le.Uint32(b), nil
	case TypeInt32:
		return int32(le.Uint32(b)), nil
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b)), nil
	case TypeBool:
		if b[0] > 1 {
			return nil, p.errf(what, "bool byte %d is neither 0 nor 1", b[0])
		}
		return b[0] == 1, nil
	case TypeUint64:
		return le.Uint64(b), nil
	case TypeInt64:
		return int64(le.Uint64(b)), nil
	case TypeFloat64:
		return math.Float64frombits(le.Uint64(b)), nil
	}
	return nil, p.errf(what, "unknown value type %d", uint32(t))
}

func (p *parser) array(what string, depth int) (any, error) {
	if depth >= MaxArrayDepth {
		return nil, p.errf(what, "arrays nested deeper than %d", MaxArrayDepth)
	}
	et, err := p.u32(what + ": array element type")
	if err != nil {
		return nil, err
	}
	elem := ValueType(et)
	n, err := p.u64(what + ": array length")
	if err != nil {
		return nil, err
	}
	min := minSize(elem)
	if min < 0 {
		return nil, p.errf(what, "unknown array element type %d", et)
	}
	if n > p.left()/uint64(min) {
		return nil, p.errf(what, "array of %d %s cannot fit in the %d bytes left", n, elem, p.left())
	}
	item := func(i int) string { return fmt.Sprintf("%s[%d]", what, i) }
	switch elem {
	case TypeString:
		out := make([]string, n)
		for i := range out {
			if out[i], err = p.str(item(i), math.MaxInt64); err != nil {
				return nil, err
			}
		}
		return out, nil
	case TypeArray:
		out := make([]any, n)
		for i := range out {
			if out[i], err = p.array(item(i), depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	raw, _ := p.take(n*uint64(min), what)
	return fixedArray(elem, raw, min, p, what)
}

func fixedArray(t ValueType, raw []byte, size int, p *parser, what string) (any, error) {
	le := binary.LittleEndian
	n := len(raw) / size
	switch t {
	case TypeUint8:
		return append([]uint8{}, raw...), nil
	case TypeInt8:
		return fill(n, func(i int) int8 { return int8(raw[i]) }), nil
	case TypeUint16:
		return fill(n, func(i int) uint16 { return le.Uint16(raw[2*i:]) }), nil
	case TypeInt16:
		return fill(n, func(i int) int16 { return int16(le.Uint16(raw[2*i:])) }), nil
	case TypeUint32:
		return fill(n, func(i int) uint32 { return le.Uint32(raw[4*i:]) }), nil
	case TypeInt32:
		return fill(n, func(i int) int32 { return int32(le.Uint32(raw[4*i:])) }), nil
	case TypeFloat32:
		return fill(n, func(i int) float32 { return math.Float32frombits(le.Uint32(raw[4*i:])) }), nil
	case TypeUint64:
		return fill(n, func(i int) uint64 { return le.Uint64(raw[8*i:]) }), nil
	case TypeInt64:
		return fill(n, func(i int) int64 { return int64(le.Uint64(raw[8*i:])) }), nil
	case TypeFloat64:
		return fill(n, func(i int) float64 { return math.Float64frombits(le.Uint64(raw[8*i:])) }), nil
	case TypeBool:
		out := make([]bool, n)
		for i, c := range raw {
			if c > 1 {
				return nil, p.errf(fmt.Sprintf("%s[%d]", what, i), "bool byte %d is neither 0 nor 1", c)
			}
			out[i] = c == 1
		}
		return out, nil
	}
	return nil, p.errf(what, "unknown array element type %d", uint32(t))
}

func fill[T any](n int, at func(int) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = at(i)
	}
	return out
}

// DropPages releases the resident pages of b, a tensor's data from this mapped file (from
// Tensor), once the caller keeps a copy it uses instead (a repacked matrix): the pages are
// read back from the file if b is read again. It does nothing for a file that is not
// mapped (Parse) or for b outside the file's data.
func (f *File) DropPages(b []byte) {
	if !f.mapped || len(b) == 0 || len(f.data) == 0 {
		return
	}
	lo, hi := uintptr(unsafe.Pointer(&f.data[0])), uintptr(unsafe.Pointer(&f.data[0]))+uintptr(len(f.data))
	p := uintptr(unsafe.Pointer(&b[0]))
	if p < lo || p+uintptr(len(b)) > hi {
		return
	}
	dropPages(b)
}

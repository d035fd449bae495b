package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// KV is one metadata entry to write. Value is a Go value of a GGUF type (see Metadata):
// write uint32(7), not 7, since an untyped constant is an int, which GGUF has no type for.
type KV struct {
	Key   string
	Value any
}

// TensorData is one tensor to write: Data is the raw encoded bytes, of exactly the size that
// Dims (ggml order) and Type give.
type TensorData struct {
	Name string
	Dims []uint64
	Type TensorType
	Data []byte
}

// Write writes a GGUF version 3 file: the metadata in the given order, then the tensor infos
// and the data in the given order, each tensor aligned to general.alignment (from meta, if
// there, else 32).
func Write(w io.Writer, meta []KV, tensors []TensorData) error {
	align := uint64(DefaultAlignment)
	seen := map[string]bool{}
	for _, kv := range meta {
		if seen[kv.Key] {
			return fmt.Errorf("gguf: write: metadata key %q appears twice", kv.Key)
		}
		seen[kv.Key] = true
		if kv.Key == AlignmentKey {
			a, neg, ok := asInt(kv.Value)
			if !ok || neg || a == 0 || a > MaxAlignment || a&(a-1) != 0 {
				return fmt.Errorf("gguf: write: %s must be a power of two, got %v", AlignmentKey, kv.Value)
			}
			align = a
		}
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	e := &encoder{w: bw}
	e.raw([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(meta)))
	for _, kv := range meta {
		if err := e.kv(kv); err != nil {
			return err
		}
	}
	offsets := make([]uint64, len(tensors))
	var off uint64
	names := map[string]bool{}
	for i, t := range tensors {
		if names[t.Name] {
			return fmt.Errorf("gguf: write: tensor %q appears twice", t.Name)
		}
		names[t.Name] = true
		if err := checkTensor(t); err != nil {
			return err
		}
		offsets[i] = off
		off = alignUp(off+uint64(len(t.Data)), align)
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(offsets[i])
	}
	e.pad(align)
	for _, t := range tensors {
		e.raw(t.Data)
		e.pad(align)
	}
	if e.err != nil {
		return fmt.Errorf("gguf: write: %w", e.err)
	}
	return bw.Flush()
}

// WriteFile writes a GGUF file atomically (a temporary file in the same directory, fsync,
// rename), readable by all (0644, as the other model files Hone writes: a temporary file is
// made 0600).
func WriteFile(path string, meta []KV, tensors []TensorData) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = Write(tmp, meta, tensors); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

func checkTensor(t TensorData) error {
	if len(t.Dims) > MaxDims {
		return fmt.Errorf("gguf: write: tensor %q has %d dimensions (at most %d)", t.Name, len(t.Dims), MaxDims)
	}
	if !t.Type.Known() {
		return fmt.Errorf("gguf: write: tensor %q: unknown tensor type %d", t.Name, uint32(t.Type))
	}
	elems := uint64(1)
	for _, d := range t.Dims {
		elems *= d
	}
	block := uint64(t.Type.BlockSize())
	if (len(t.Dims) > 0 && t.Dims[0]%block != 0) || elems%block != 0 {
		return fmt.Errorf("gguf: write: tensor %q: dims %v are not whole %s blocks of %d", t.Name, t.Dims, t.Type, block)
	}
	if want := elems / block * uint64(t.Type.BlockBytes()); uint64(len(t.Data)) != want {
		return fmt.Errorf("gguf: write: tensor %q: %s %v takes %d bytes, data has %d", t.Name, t.Type, t.Dims, want, len(t.Data))
	}
	return nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

type encoder struct {
	w   *bufio.Writer
	n   uint64
	err error
	buf [8]byte
}

func (e *encoder) raw(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
		e.n += uint64(len(b))
	}
}

func (e *encoder) u8(v uint8) { e.raw([]byte{v}) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.raw(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.raw(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.raw(e.buf[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.raw([]byte(s))
}
func (e *encoder) pad(align uint64) {
	if n := alignUp(e.n, align) - e.n; n > 0 {
		e.raw(make([]byte, n))
	}
}

func (e *encoder) kv(kv KV) error {
	t, _, ok := valueType(kv.Value)
	if !ok {
		return fmt.Errorf("gguf: write: metadata key %q: Go type %T has no GGUF type", kv.Key, kv.Value)
	}
	e.str(kv.Key)
	e.u32(uint32(t))
	if err := e.value(kv.Value, 0); err != nil {
		return fmt.Errorf("gguf: write: metadata key %q: %w", kv.Key, err)
	}
	return nil
}

func (e *encoder) value(v any, depth int) error {
	switch x := v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	default:
		return e.array(v, depth)
	}
	return nil
}

func (e *encoder) array(v any, depth int) error {
	if depth >= MaxArrayDepth {
		return fmt.Errorf("arrays nested deeper than %d", MaxArrayDepth)
	}
	_, elem, ok := valueType(v)
	if !ok {
		return fmt.Errorf("Go type %T has no GGUF type", v)
	}
	e.u32(uint32(elem))
	var err error
	each := func(n int, at func(int) any) {
		e.u64(uint64(n))
		for i := 0; i < n && err == nil; i++ {
			err = e.value(at(i), depth+1)
		}
	}
	switch a := v.(type) {
	case []uint8:
		e.u64(uint64(len(a)))
		e.raw(a)
	case []int8:
		each(len(a), func(i int) any { return a[i] })
	case []uint16:
		each(len(a), func(i int) any { return a[i] })
	case []int16:
		each(len(a), func(i int) any { return a[i] })
	case []uint32:
		each(len(a), func(i int) any { return a[i] })
	case []int32:
		each(len(a), func(i int) any { return a[i] })
	case []float32:
		each(len(a), func(i int) any { return a[i] })
	case []bool:
		each(len(a), func(i int) any { return a[i] })
	case []string:
		each(len(a), func(i int) any { return a[i] })
	case []uint64:
		each(len(a), func(i int) any { return a[i] })
	case []int64:
		each(len(a), func(i int) any { return a[i] })
	case []float64:
		each(len(a), func(i int) any { return a[i] })
	case []any:
		e.u64(uint64(len(a)))
		for i := 0; i < len(a) && err == nil; i++ {
			if !isArray(a[i]) {
				return fmt.Errorf("element %d of an array of arrays is %T, not an array", i, a[i])
			}
			err = e.array(a[i], depth+1)
		}
	default:
		return errors.New("unreachable")
	}
	return err
}

func isArray(v any) bool { t, _, _ := valueType(v); return t == TypeArray }

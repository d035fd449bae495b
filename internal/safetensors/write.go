package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// FromF32 makes an F32 tensor of values (copied).
func FromF32(name string, shape []int, values []float32) Tensor {
	b := make([]byte, 4*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return Tensor{Name: name, DType: F32, Shape: shape, Data: b}
}

// FromU16 makes a 16-bit tensor (F16 or BF16 bit patterns) of values (copied).
func FromU16(name string, dtype DType, shape []int, values []uint16) Tensor {
	b := make([]byte, 2*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint16(b[2*i:], v)
	}
	return Tensor{Name: name, DType: dtype, Shape: shape, Data: b}
}

// Encode returns the bytes of a safetensors file holding tensors (written in name order, the
// header padded with spaces to a multiple of 8 bytes, as the Python writers do).
func Encode(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	sorted := append([]Tensor(nil), tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	header := map[string]any{}
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	var off int64
	for i, t := range sorted {
		if i > 0 && sorted[i-1].Name == t.Name {
			return nil, fmt.Errorf("safetensors: tensor %q given twice", t.Name)
		}
		if t.Name == "" || t.Name == "__metadata__" {
			return nil, fmt.Errorf("safetensors: invalid tensor name %q", t.Name)
		}
		size := t.DType.Size()
		if size == 0 {
			return nil, fmt.Errorf("safetensors: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		if want := int64(t.Elems()) * int64(size); int64(len(t.Data)) != want {
			return nil, fmt.Errorf("safetensors: tensor %q: %d bytes for shape %v of %s (want %d)", t.Name, len(t.Data), t.Shape, t.DType, want)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = headerEntry{DType: t.DType, Shape: shape, DataOffsets: [2]int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	hdr, err := json.Marshal(header)
	if err != nil {
		return nil, err
	}
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	out := make([]byte, 8, 8+len(hdr)+int(off))
	binary.LittleEndian.PutUint64(out, uint64(len(hdr)))
	out = append(out, hdr...)
	for _, t := range sorted {
		out = append(out, t.Data...)
	}
	return out, nil
}

// Write writes tensors to path atomically: a temporary file in the same directory, fsync,
// rename over path, fsync of the directory.
func Write(path string, tensors []Tensor, metadata map[string]string) error {
	b, err := Encode(tensors, metadata)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, b, 0o644)
}

// WriteFileAtomic writes data to path so that readers see either the old file or the whole
// new one, never a partial write, even across a crash.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name)
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(name, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

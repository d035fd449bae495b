package model

import (
	"fmt"
	"strings"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/quant"
)

// ParseQuantize reads a --quantize value (any case): "" (none: gguf.F32), or one of the types
// Hone quantizes to and multiplies quantized: q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k.
func ParseQuantize(s string) (gguf.TensorType, error) {
	if s == "" {
		return gguf.F32, nil
	}
	for _, t := range quantizeTypes {
		if strings.EqualFold(s, t.String()) {
			return t, nil
		}
	}
	return gguf.F32, fmt.Errorf("model: quantize %q: use q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k or q6_k", s)
}

// quantizeTypes are the types ParseQuantize accepts.
var quantizeTypes = []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}

// quantizeType is the type a matrix of cols columns is quantized to when t is asked: t when
// cols is a multiple of its block size; for a K-quant whose super-block of 256 does not
// divide cols, the 32-element type llama.cpp falls back to (Q4_K: Q5_0, Q5_K: Q5_1, Q6_K:
// Q8_0) when 32 divides cols; else none (ok false: the matrix stays as stored).
func quantizeType(t gguf.TensorType, cols int) (gguf.TensorType, bool) {
	if cols%t.BlockSize() == 0 {
		return t, true
	}
	fallback := map[gguf.TensorType]gguf.TensorType{gguf.Q4_K: gguf.Q5_0, gguf.Q5_K: gguf.Q5_1, gguf.Q6_K: gguf.Q8_0}[t]
	if fallback != gguf.F32 && cols%fallback.BlockSize() == 0 {
		return fallback, true
	}
	return gguf.F32, false
}

// quantizeWeight quantizes w (rows × cols, f32 or 16-bit) to t (or its fallback for cols), or
// returns it unchanged when no quantized type fits cols. It goes a chunk of rows (about 4 MB
// of f32) at a time, so the f32 values of a whole matrix (544 MB for Qwen2.5-0.5B's
// embedding) never exist at once: a quantized load's peak memory stays near the quantized
// model's.
func quantizeWeight(w Weight, t gguf.TensorType) (Weight, error) {
	typ, ok := quantizeType(t, w.Cols)
	if !ok || w.Q != nil {
		return w, nil
	}
	rowBytes := w.Cols / typ.BlockSize() * typ.BlockBytes()
	data := make([]byte, 0, w.Rows*rowBytes)
	chunk := max(1, (1<<20)/w.Cols)
	buf := make([]float32, min(chunk, w.Rows)*w.Cols)
	for r0 := 0; r0 < w.Rows; r0 += chunk {
		n := min(chunk, w.Rows-r0)
		for r := range n {
			w.Row(buf[r*w.Cols:], r0+r)
		}
		q, err := quant.Quantize(typ, buf[:n*w.Cols], w.Cols)
		if err != nil {
			return Weight{}, fmt.Errorf("cannot be quantized to %s: %w", typ, err)
		}
		data = append(data, q...)
	}
	q, err := quant.NewMatrix(typ, w.Rows, w.Cols, data)
	if err != nil {
		return Weight{}, err
	}
	return Weight{Rows: w.Rows, Cols: w.Cols, Q: q}, nil
}

package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
)

// randomBlocks is nb random blocks of t whose float16 fields are finite scales in ±[0.001,
// 0.05]: every bit pattern of the quantized values occurs.
func randomBlocks(r *rand.Rand, t gguf.TensorType, nb int) []byte {
	size := t.BlockBytes()
	w := make([]byte, nb*size)
	for i := range w {
		w[i] = byte(r.Uint32())
	}
	var halves []int
	switch t {
	case gguf.Q8_0, gguf.Q4_0, gguf.Q5_0:
		halves = []int{0}
	case gguf.Q4_1, gguf.Q5_1, gguf.Q4_K, gguf.Q5_K:
		halves = []int{0, 2}
	case gguf.Q6_K:
		halves = []int{208}
	}
	for b := range nb {
		for _, o := range halves {
			v := float32(0.001 + 0.049*r.Float64())
			if r.IntN(2) == 0 {
				v = -v
			}
			h := gemm.Float32ToF16(v)
			w[b*size+o], w[b*size+o+1] = byte(h), byte(h>>8)
		}
	}
	return w
}

// dotRef is the float64 dot product of the dequantized row w with the dequantized
// activations (q, d per block of the activations' block size).
func dotRef(t *testing.T, typ gguf.TensorType, w []byte, n int, q []int8, d []float32) float64 {
	t.Helper()
	x, err := gguf.Dequantize(typ, w, n)
	if err != nil {
		t.Fatal(err)
	}
	bs := n / len(d)
	s := 0.0
	for i := range n {
		s += float64(x[i]) * float64(d[i/bs]) * float64(q[i])
	}
	return s
}

// checkKernels compares the row kernels in use (assembly where the CPU has it) and the Go
// ones with the dequantized reference, on rows of several lengths.
func TestRowKernelsMatchDequantized(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type kernel struct {
		typ      gguf.TensorType
		run, go_ func(w []byte, a32 *Acts32, ak *ActsK) float32
	}
	k32 := func(typ gguf.TensorType, f, g func([]byte, []int8, []float32) float32) kernel {
		return kernel{typ, func(w []byte, a *Acts32, _ *ActsK) float32 { return f(w, a.Q, a.D) },
			func(w []byte, a *Acts32, _ *ActsK) float32 { return g(w, a.Q, a.D) }}
	}
	k32s := func(typ gguf.TensorType, f, g func([]byte, []int8, []float32, []float32) float32) kernel {
		return kernel{typ, func(w []byte, a *Acts32, _ *ActsK) float32 { return f(w, a.Q, a.D, a.S) },
			func(w []byte, a *Acts32, _ *ActsK) float32 { return g(w, a.Q, a.D, a.S) }}
	}
	kk := func(typ gguf.TensorType, f, g func([]byte, []int8, []float32, []int16) float32) kernel {
		return kernel{typ, func(w []byte, _ *Acts32, a *ActsK) float32 { return f(w, a.Q, a.D, a.BSums) },
			func(w []byte, _ *Acts32, a *ActsK) float32 { return g(w, a.Q, a.D, a.BSums) }}
	}
	kernels := []kernel{
		k32(gguf.Q8_0, dotQ8_0, dotQ8_0Go), k32(gguf.Q4_0, dotQ4_0, dotQ4_0Go), k32s(gguf.Q4_1, dotQ4_1, dotQ4_1Go),
		k32(gguf.Q5_0, dotQ5_0, dotQ5_0Go), k32s(gguf.Q5_1, dotQ5_1, dotQ5_1Go),
		kk(gguf.Q4_K, dotQ4_K, dotQ4_KGo), kk(gguf.Q5_K, dotQ5_K, dotQ5_KGo), kk(gguf.Q6_K, dotQ6_K, dotQ6_KGo),
	}
	for _, k := range kernels {
		bs := k.typ.BlockSize()
		for _, nb := range []int{1, 2, 3, 5, 9, 17} {
			n := nb * bs
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			var a32 Acts32
			var ak ActsK
			var q []int8
			var d []float32
			if bs == 32 {
				QuantizeActs32(&a32, x)
				q, d = a32.Q, a32.D
			} else {
				QuantizeActsK(&ak, x)
				q, d = ak.Q, ak.D
			}
			w := randomBlocks(r, k.typ, nb)
			want := dotRef(t, k.typ, w, n, q, d)
			norm := 0.0 // Σ|w·x|, the scale of rounding errors
			xw, _ := gguf.Dequantize(k.typ, w, n)
			for i := range n {
				norm += math.Abs(float64(xw[i]) * float64(d[i/bs]) * float64(q[i]))
			}
			for name, f := range map[string]func([]byte, *Acts32, *ActsK) float32{"in use": k.run, "Go": k.go_} {
				got := f(w, &a32, &ak)
				if diff := math.Abs(float64(got) - want); diff > 1e-5*norm+1e-6 {
					t.Errorf("%v, %d blocks, %s kernel: %g, want %g (Σ|wx| %g)", k.typ, nb, name, got, want, norm)
				}
			}
		}
	}
}

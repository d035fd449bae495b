// Package kernels holds the element-wise and row-wise kernels of a transformer besides matrix
// products (which live in internal/gemm): RMSNorm, rotary position embeddings, softmax,
// SiLU/SwiGLU, residual adds, embedding gathers from f32/bf16/f16 tables, and a parallel-for
// over the cores. They are plain Go loops written so the compiler keeps them tight (bounds
// checks hoisted, 4-way unrolled accumulators where a reduction is involved), except the
// exponential over a slice (ExpAffine), which has an AVX-512 kernel (exp_amd64.s, generated
// by internal/gemm/asmgen) once bf16 products on AMX made exponentials a fifth of a training
// step (see docs/performance.md).
package kernels

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/honeai/hone/internal/gemm"
)

// Dot returns the dot product of a and b[:len(a)].
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Axpy does y += alpha*x.
func Axpy(alpha float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += alpha * v
	}
}

// Add does dst[i] += src[i] (the residual connection).
func Add(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

// Scale does x *= s (AVX-512 for whole blocks of 16 where the CPU has it).
func Scale(x []float32, s float32) {
	n := 0
	if hasExpVector && len(x) >= 16 {
		n = len(x) &^ 15
		scaleVector(n, &x[0], s)
	}
	for i := n; i < len(x); i++ {
		x[i] *= s
	}
}

// Max returns the largest element of x, −Inf when x is empty (NaNs are skipped; AVX-512 for
// whole blocks of 16 where the CPU has it).
func Max(x []float32) float32 {
	mx := float32(math.Inf(-1))
	n := 0
	if hasExpVector && len(x) >= 16 {
		n = len(x) &^ 15
		mx = maxVector(n, &x[0])
	}
	for _, v := range x[n:] {
		if v > mx {
			mx = v
		}
	}
	return mx
}

// RMSNorm writes out = x / sqrt(mean(x²) + eps) * weight for one row (out may alias x).
func RMSNorm(out, x, weight []float32, eps float32) {
	n := len(x)
	out = out[:n]
	weight = weight[:n]
	ss := Dot(x, x)
	inv := float32(1 / math.Sqrt(float64(ss)/float64(n)+float64(eps)))
	for i := range out {
		out[i] = x[i] * inv * weight[i]
	}
}

// RMSNormRows applies RMSNorm to each of the rows of x (width cols), in parallel for many rows.
func RMSNormRows(out, x []float32, rows, cols int, weight []float32, eps float32) {
	ParallelFor(rows, 64, func(r int) {
		RMSNorm(out[r*cols:(r+1)*cols], x[r*cols:(r+1)*cols], weight, eps)
	})
}

// Softmax turns x into probabilities in place (max-subtracted for stability). Entries at
// -Inf become 0.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	mx := Max(x)
	if math.IsInf(float64(mx), -1) {
		for i := range x {
			x[i] = 1 / float32(len(x))
		}
		return
	}
	Scale(x, 1/ExpAffine(x, x, 1, -mx))
}

// SiLU is x*sigmoid(x).
func SiLU(x float32) float32 { return x / (1 + Exp(-x)) }

// SwiGLU writes out[i] = silu(gate[i]) * up[i] (out may alias gate).
func SwiGLU(out, gate, up []float32) {
	n := len(gate)
	out = out[:n]
	up = up[:n]
	var e [256]float32 // e^(−g) for a block
	for i0 := 0; i0 < n; i0 += len(e) {
		i1 := min(i0+len(e), n)
		ExpAffine(e[:i1-i0], gate[i0:i1], -1, 0)
		for i := i0; i < i1; i++ {
			out[i] = gate[i] / (1 + e[i-i0]) * up[i]
		}
	}
}

// Rope holds the inverse frequencies of rotary position embeddings for one head size.
type Rope struct {
	HeadDim int
	InvFreq []float64 // HeadDim/2 entries
}

// NewRope returns the default inverse frequencies 1/theta^(2i/d).
func NewRope(headDim int, theta float64) *Rope {
	half := headDim / 2
	r := &Rope{HeadDim: headDim, InvFreq: make([]float64, half)}
	for i := range r.InvFreq {
		r.InvFreq[i] = 1 / math.Pow(theta, float64(2*i)/float64(headDim))
	}
	return r
}

// ScaleLlama3 applies Llama 3.1's rope_scaling (type "llama3") to the frequencies.
func (r *Rope) ScaleLlama3(factor, lowFreqFactor, highFreqFactor float64, originalMax int) {
	old := float64(originalMax)
	lowWavelen := old / lowFreqFactor
	highWavelen := old / highFreqFactor
	for i, f := range r.InvFreq {
		wavelen := 2 * math.Pi / f
		switch {
		case wavelen < highWavelen:
		case wavelen > lowWavelen:
			r.InvFreq[i] = f / factor
		default:
			smooth := (old/wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor)
			r.InvFreq[i] = (1-smooth)*f/factor + smooth*f
		}
	}
}

// ScaleLinear applies linear rope_scaling (positions divided by factor).
func (r *Rope) ScaleLinear(factor float64) {
	for i := range r.InvFreq {
		r.InvFreq[i] /= factor
	}
}

// Apply rotates one head vector x (HeadDim values) for position pos, in the "rotate half"
// layout of Hugging Face Llama/Qwen: pairs (x[i], x[i+d/2]).
func (r *Rope) Apply(x []float32, pos int) {
	half := r.HeadDim / 2
	x = x[:r.HeadDim]
	for i := 0; i < half; i++ {
		sin, cos := math.Sincos(float64(pos) * r.InvFreq[i])
		a, b := float64(x[i]), float64(x[i+half])
		x[i] = float32(a*cos - b*sin)
		x[i+half] = float32(b*cos + a*sin)
	}
}

// Table is the sin/cos of every position up to a length, so that Apply needs no trig.
type Table struct {
	HeadDim int
	cos     []float32 // pos*half + i
	sin     []float32
}

// Table computes the rotation table for positions [0, n).
func (r *Rope) Table(n int) *Table {
	half := r.HeadDim / 2
	t := &Table{HeadDim: r.HeadDim, cos: make([]float32, n*half), sin: make([]float32, n*half)}
	for p := 0; p < n; p++ {
		for i := 0; i < half; i++ {
			s, c := math.Sincos(float64(p) * r.InvFreq[i])
			t.cos[p*half+i], t.sin[p*half+i] = float32(c), float32(s)
		}
	}
	return t
}

// Len is the number of positions the table covers.
func (t *Table) Len() int { return len(t.cos) / max(t.HeadDim/2, 1) }

// Apply rotates x (HeadDim values) for position pos < Len().
func (t *Table) Apply(x []float32, pos int) {
	half := t.HeadDim / 2
	c := t.cos[pos*half : pos*half+half]
	s := t.sin[pos*half : pos*half+half]
	lo, hi := x[:half], x[half:2*half]
	for i := range c {
		a, b := lo[i], hi[i]
		lo[i] = a*c[i] - b*s[i]
		hi[i] = b*c[i] + a*s[i]
	}
}

// ApplyInverse undoes Apply (the gradient of a rotation is the opposite rotation).
func (t *Table) ApplyInverse(x []float32, pos int) {
	half := t.HeadDim / 2
	c := t.cos[pos*half : pos*half+half]
	s := t.sin[pos*half : pos*half+half]
	lo, hi := x[:half], x[half:2*half]
	for i := range c {
		a, b := lo[i], hi[i]
		lo[i] = a*c[i] + b*s[i]
		hi[i] = b*c[i] - a*s[i]
	}
}

// GatherRow writes row id of an embedding table (rows × cols, f32 or 16-bit) to out.
func GatherRow(out []float32, f32 []float32, half []uint16, h gemm.Half, id, cols int) {
	if f32 != nil {
		copy(out[:cols], f32[id*cols:(id+1)*cols])
		return
	}
	h.Decode(out[:cols], half[id*cols:(id+1)*cols])
}

// ParallelFor runs fn(0..n-1) over the cores; grain is the smallest number of iterations
// worth a goroutine. It returns when all are done.
func ParallelFor(n, grain int, fn func(i int)) {
	workers := runtime.GOMAXPROCS(0)
	if n <= grain || workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	workers = min(workers, (n+grain-1)/grain)
	var next atomic.Int64
	var wg sync.WaitGroup
	body := func() {
		defer wg.Done()
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			fn(i)
		}
	}
	wg.Add(workers)
	for w := 1; w < workers; w++ {
		go body()
	}
	body()
	wg.Wait()
}

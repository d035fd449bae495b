//go:build amd64 && !purego

package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
)

var packedTypes = []gguf.TensorType{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q4_K, gguf.Q6_K}

// packedActs is n rows of random activations of nb blocks, one after the other, with the
// sums typ's packed kernels take.
func packedActs(r *rand.Rand, typ gguf.TensorType, n, nb int) (q []int8, d, s []float32, rows []testActs) {
	for range n {
		a := randomTestActs(r, gguf.Q8_0, 32*nb)
		q, d, s = append(q, a.q...), append(d, a.d...), append(s, packedSums(typ, a)...)
		rows = append(rows, a)
	}
	return q, d, s, rows
}

// packedSums is a's sums as typ's packed kernels take them: per 32 (Acts32.S), or per 16
// for Q6_K.
func packedSums(typ gguf.TensorType, a testActs) []float32 {
	if typ != gguf.Q6_K {
		return a.s
	}
	s := make([]float32, len(a.q)/16)
	for g := range s {
		t := 0
		for _, v := range a.q[16*g : 16*g+16] {
			t += int(v)
		}
		s[g] = a.d[g/2] * float32(t)
	}
	return s
}

// checkPacked runs kernel k (n activation rows) on the packed copy of the 16 rows ws and
// compares each output with the Go row kernel on the unpacked row.
func checkPacked(t *testing.T, name string, k func(gguf.TensorType, []byte, []int8, []float32, []float32, int, []float32), typ gguf.TensorType, ws []byte, n int, q []int8, d, s []float32, rows []testActs, what string) {
	t.Helper()
	nb := len(d) / n
	if nb%(typ.BlockSize()/32) != 0 {
		t.Fatalf("%v: %d blocks of 32 are not whole blocks", typ, nb)
	}
	m, err := NewMatrix(typ, packRows, 32*nb, ws)
	if err != nil {
		t.Fatal(err)
	}
	p := packMatrix(m, nil).b
	if len(p) != nb*packedBlockBytes(typ) {
		t.Fatalf("%v: packed %d bytes, want %d", typ, len(p), nb*packedBlockBytes(typ))
	}
	out := make([]float32, packRows*n)
	for i := range out {
		out[i] = 9
	}
	k(typ, p, q, d, s, n, out)
	o := float64(packedOffset(typ))
	for i, a := range rows {
		for r := range packRows {
			row := m.RowData(r)
			// The K-quants' row kernels take activations in blocks of 256: the reference is
			// the dequantized row against these activations.
			var want float64
			off := 0.0
			if typ.BlockSize() == 32 {
				want = float64(goRowKernels.call(typ, row, a))
				for b := range nb {
					off += o * math.Abs(float64(f16(row[typ.BlockBytes()*b:]))*float64(a.s[b]))
				}
			} else {
				want = dotRef(t, typ, row, 32*nb, a.q, a.d)
			}
			tol := 1e-5*absDotRef(t, typ, row, a) + 1e-6*off + 1e-6
			if got := out[packRows*i+r]; !(math.Abs(float64(got)-want) <= tol) {
				t.Errorf("%v %s, %s act row %d weight row %d: %g, Go row kernel %g (tolerance %g)", typ, what, name, i, r, got, want, tol)
			}
		}
	}
}

// TestPackedKernelGo: the Go packed kernel on the packed copy of random blocks equals the Go
// row kernels (which TestRowKernelsMatchDequantized checks against the dequantized rows).
func TestPackedKernelGo(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, typ := range packedTypes {
		for _, nb := range packedBlockCounts(typ) {
			for _, n := range []int{1, 4} {
				q, d, s, rows := packedActs(r, typ, n, nb)
				ws := randomBlocks(r, typ, packRows*nb*32/typ.BlockSize())
				checkPacked(t, "go", packed16Go, typ, ws, n, q, d, s, rows, fmt.Sprintf("%d blocks", nb))
			}
		}
	}
}

// TestMatMulTPacked: a packed matrix's products (4-row tiles, single rows, several
// threads, accumulating) equal the unpacked one's within the kernels' rounding.
func TestMatMulTPacked(t *testing.T) {
	if !packedKernelsInUse {
		t.Skip("no packed kernels on this CPU")
	}
	defer gemm.SetThreads(0)
	r := rand.New(rand.NewPCG(23, 24))
	for _, typ := range packedTypes {
		for _, shape := range [][2]int{{16, 256}, {48, 768}, {160, 1536}} {
			m, w := randomMatrix(t, r, typ, shape[0], shape[1])
			p := *m
			if !p.Pack() || !p.Packed() || m.Packed() {
				t.Fatalf("%v %v: Pack did not pack a copy", typ, shape)
			}
			for _, rows := range []int{1, 3, 4, 7, 21} {
				for _, threads := range []int{1, 2} {
					gemm.SetThreads(threads)
					x := randomActs(r, rows*shape[1])
					ldo := shape[0] + 3
					want, got := make([]float32, rows*ldo), make([]float32, rows*ldo)
					for i := range got {
						want[i], got[i] = 1, 1
					}
					acc := threads == 2
					m.MatMulT(x, rows, want, ldo, acc)
					p.MatMulT(x, rows, got, ldo, acc)
					for i := range rows {
						xi := x[i*shape[1] : (i+1)*shape[1]]
						for j := range ldo {
							g := float64(got[i*ldo+j])
							if j >= shape[0] {
								if g != 1 {
									t.Fatalf("%v %v: out[%d][%d] beyond the matrix's columns was written", typ, shape, i, j)
								}
								continue
							}
							// Within the activations' rounding of the exact product (blocks of
							// 32 for every packed type), and for the 32-element types within
							// float rounding of the unpacked kernels (the same activations).
							wj := w[j*shape[1] : (j+1)*shape[1]]
							ref := refDot(wj, xi)
							if acc {
								ref++
							}
							if bound := actsBound(wj, xi, 32); math.Abs(g-ref) > bound {
								t.Fatalf("%v %v rows %d threads %d: out[%d][%d] = %g, want %g ± %g", typ, shape, rows, threads, i, j, g, ref, bound)
							}
							if wt := float64(want[i*ldo+j]); typ.BlockSize() == 32 && math.Abs(g-wt) > 1e-5*actsBound(wj, xi, 32)/(1.0/254)+1e-4 {
								t.Fatalf("%v %v rows %d threads %d: out[%d][%d] = %g, unpacked %g", typ, shape, rows, threads, i, j, g, wt)
							}
						}
					}
				}
			}
		}
	}
}

// packedBlockCounts is the numbers of 32-column blocks the packed kernels are tested on.
func packedBlockCounts(typ gguf.TensorType) []int {
	if typ.BlockSize() == 256 {
		return []int{8, 16, 24, 48}
	}
	return []int{1, 2, 3, 18}
}

// TestPackDropping: packing while handing back the packed part of Data makes the copy Pack
// makes, hands back consecutive prefixes of Data in order (every dropEvery bytes and more),
// and hands back nothing for a matrix whose rows are read out of order (SetRowOrder).
func TestPackDropping(t *testing.T) {
	const rows, cols = 16 * 400, 1024 // Q8_0: 1088 bytes a row, 6.6 MiB
	data := make([]byte, rows*cols/32*34)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for i := 0; i < len(data); i += 34 { // finite f16 scales
		data[i], data[i+1] = byte(i), 0x30
	}
	want, err := NewMatrix(gguf.Q8_0, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	wantB := packMatrix(want, nil).b
	m, _ := NewMatrix(gguf.Q8_0, rows, cols, data)
	var next int
	if !m.PackDropping(func(b []byte) {
		if &b[0] != &data[next] || len(b) < dropEvery {
			t.Fatalf("handed back %d bytes at %d, want %d or more at %d", len(b), int(uintptr(unsafe.Pointer(&b[0]))-uintptr(unsafe.Pointer(&data[0]))), dropEvery, next)
		}
		next += len(b)
	}) && packedKernelsInUse {
		t.Fatal("not packed")
	}
	if !packedKernelsInUse {
		t.Skip("no packed kernels on this CPU")
	}
	if next == 0 || next > len(data) {
		t.Fatalf("handed back %d of %d bytes", next, len(data))
	}
	if !slices.Equal(m.packed.b, wantB) {
		t.Fatal("the packed copies differ")
	}
	o, _ := NewMatrix(gguf.Q8_0, rows, cols, data)
	order := make([]int32, rows)
	for i := range order {
		order[i] = int32(rows - 1 - i)
	}
	if err := o.SetRowOrder(order); err != nil {
		t.Fatal(err)
	}
	o.PackDropping(func([]byte) { t.Fatal("handed back rows read out of order") })
}

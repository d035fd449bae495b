package quant

import (
	"fmt"
	"sync"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
)

// Matrix is a Rows × Cols weight matrix in one of ggml's quantized block types, row-major:
// row r is Data[s·RowBytes() : (s+1)·RowBytes()], Cols/BlockSize blocks of the type, where
// s is r, or order[r] for a matrix whose rows are stored in another order (SetRowOrder);
// RowData, Row and the products honour that order, so a matrix is sliced into rows of Data
// only when it has none. Data may be a view of a mapped GGUF file; a Matrix never writes to
// it.
type Matrix struct {
	Type       gguf.TensorType
	Rows, Cols int
	Data       []byte

	order  []int32    // row r is stored as row order[r] of Data; nil: in order
	packed *packedMem // the rows in the packed layout (Pack), nil if not packed
}

// Supported reports whether t is one of the types a Matrix holds: Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K and Q6_K.
func Supported(t gguf.TensorType) bool {
	switch t {
	case gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K:
		return true
	}
	return false
}

// NewMatrix checks that data holds exactly rows × cols elements of type t (a supported type,
// cols a positive multiple of its block size) and returns the matrix over it (not a copy).
func NewMatrix(t gguf.TensorType, rows, cols int, data []byte) (*Matrix, error) {
	if !Supported(t) {
		return nil, fmt.Errorf("quant: tensor type %s is not supported (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)", t)
	}
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("quant: a %s matrix of %d × %d: the sizes must be positive", t, rows, cols)
	}
	bs := t.BlockSize()
	if cols%bs != 0 {
		return nil, fmt.Errorf("quant: a %s matrix of %d columns: not a multiple of its block size %d", t, cols, bs)
	}
	rowBytes := uint64(cols/bs) * uint64(t.BlockBytes())
	if uint64(rows) > uint64(len(data))/rowBytes || uint64(rows)*rowBytes != uint64(len(data)) {
		return nil, fmt.Errorf("quant: a %s matrix of %d × %d takes %d bytes per row, %d rows; got %d bytes", t, rows, cols, rowBytes, rows, len(data))
	}
	return &Matrix{Type: t, Rows: rows, Cols: cols, Data: data}, nil
}

// RowBytes is the size of one row.
func (m *Matrix) RowBytes() int { return m.Cols / m.Type.BlockSize() * m.Type.BlockBytes() }

// SetRowOrder makes row r of the matrix row order[r] of Data (order a permutation of the
// Rows rows), so that a matrix stored with its rows reordered needs no copy in order. It is
// set before Pack (the packed copy holds the rows in order).
func (m *Matrix) SetRowOrder(order []int32) error {
	if m.packed != nil {
		return fmt.Errorf("quant: SetRowOrder on a packed matrix")
	}
	if len(order) != m.Rows {
		return fmt.Errorf("quant: row order of %d rows for a %d-row matrix", len(order), m.Rows)
	}
	seen := make([]bool, m.Rows)
	for r, s := range order {
		if s < 0 || int(s) >= m.Rows || seen[s] {
			return fmt.Errorf("quant: row order of a %d-row matrix: row %d is %d (not a permutation)", m.Rows, r, s)
		}
		seen[s] = true
	}
	m.order = order
	return nil
}

// RowData is row r's blocks (a view of Data).
func (m *Matrix) RowData(r int) []byte { return m.row(r, m.RowBytes()) }

// row is RowData(r) for n = RowBytes().
func (m *Matrix) row(r, n int) []byte {
	if m.order != nil {
		r = int(m.order[r])
	}
	return m.Data[r*n : (r+1)*n : (r+1)*n]
}

// RowsView is the matrix of rows [r0, r1), a view of m's Data, and of its packed copy when m
// has one and r0 and r1 are whole groups of it (a multiple of 16 rows; otherwise the view has
// none, and Pack packs a copy of its own): the experts of a merged GGUF tensor, multiplied
// as separate matrices from the one packed copy.
func (m *Matrix) RowsView(r0, r1 int) *Matrix {
	if r0 < 0 || r1 > m.Rows || r0 >= r1 {
		panic(fmt.Sprintf("quant: rows [%d, %d) of a %d-row matrix", r0, r1, m.Rows))
	}
	if m.order != nil {
		panic("quant: RowsView of a matrix with a row order (SetRowOrder)")
	}
	n := m.RowBytes()
	v := &Matrix{Type: m.Type, Rows: r1 - r0, Cols: m.Cols, Data: m.Data[r0*n : r1*n : r1*n]}
	if p := m.packed; p != nil && r0%packRows == 0 && r1%packRows == 0 {
		gb := m.Cols / 32 * packedBlockBytes(m.Type)
		owner := p
		if p.owner != nil {
			owner = p.owner
		}
		v.packed = &packedMem{b: p.b[r0/packRows*gb : r1/packRows*gb : r1/packRows*gb], owner: owner}
	}
	return v
}

// Bytes is the memory the matrix holds.
func (m *Matrix) Bytes() int64 { return int64(len(m.Data)) }

// Row dequantizes row r into out[:Cols] (an embedding lookup), from the packed copy if there
// is one (Pack).
func (m *Matrix) Row(out []float32, r int) {
	if r < 0 || r >= m.Rows {
		panic(fmt.Sprintf("quant: row %d of a %d-row matrix", r, m.Rows))
	}
	if m.packed != nil {
		m.packedRow(out[:m.Cols], r)
		return
	}
	if err := gguf.DequantizeTo(out[:m.Cols], m.Type, m.RowData(r)); err != nil {
		panic("quant: " + err.Error()) // NewMatrix checked the sizes
	}
}

// kQuant reports whether t's rows are reduced against ActsK (super-blocks of 256) rather
// than Acts32.
func kQuant(t gguf.TensorType) bool { return t == gguf.Q4_K || t == gguf.Q5_K || t == gguf.Q6_K }

// dot is row's product with activation row i of w's quantized activations, by the
// unchecked row kernels: row is one of the matrix's rows and the activations hold w.rows
// rows of w.cols.
func (w *work) dot(t gguf.TensorType, row []byte, i int) float32 {
	if kQuant(t) {
		nb, k := w.cols/256, &w.ak
		q, d, bs := k.Q[256*nb*i:256*nb*(i+1)], k.D[nb*i:nb*(i+1)], k.BSums[16*nb*i:16*nb*(i+1)]
		switch t {
		case gguf.Q4_K:
			return rowQ4_K(row, q, d, bs)
		case gguf.Q5_K:
			return rowQ5_K(row, q, d, bs)
		case gguf.Q6_K:
			return rowQ6_K(row, q, d, bs)
		}
	}
	nb, a := w.cols/32, &w.a32
	q, d, s := a.Q[32*nb*i:32*nb*(i+1)], a.D[nb*i:nb*(i+1)], a.S[nb*i:nb*(i+1)]
	switch t {
	case gguf.Q8_0:
		return rowQ8_0(row, q, d)
	case gguf.Q4_0:
		return rowQ4_0(row, q, d)
	case gguf.Q4_1:
		return rowQ4_1(row, q, d, s)
	case gguf.Q5_0:
		return rowQ5_0(row, q, d)
	case gguf.Q5_1:
		return rowQ5_1(row, q, d, s)
	}
	panic("quant: unsupported type " + t.String())
}

// kernel4K is t's multi-row kernel in use for a K-quant, nil for the others and where
// there is none (reduced a row at a time).
func kernel4K(t gguf.TensorType) kern4K {
	switch t {
	case gguf.Q4_K:
		return dot4Q4_K
	case gguf.Q6_K:
		return dot4Q6_K
	}
	return nil
}

// kernel1 and kernel1K are the single-row versions of kernel4 and kernel4K (nil where those
// are), unchecked: what MatMulT reduces the rows left over from the groups of four with, so
// that a row gets the same bits either way.
func kernel1(t gguf.TensorType) kern1 {
	switch t {
	case gguf.Q8_0:
		return row1Q8_0
	case gguf.Q4_0:
		return row1Q4_0
	case gguf.Q4_1:
		return row1Q4_1
	case gguf.Q5_0:
		return row1Q5_0
	case gguf.Q5_1:
		return row1Q5_1
	}
	return nil
}

func kernel1K(t gguf.TensorType) kern1K {
	switch t {
	case gguf.Q4_K:
		return row1Q4_K
	case gguf.Q6_K:
		return row1Q6_K
	}
	return nil
}

// kernel4 is t's multi-row kernel, nil for the K-quants (see kernel4K).
func kernel4(t gguf.TensorType) kern4 {
	switch t {
	case gguf.Q8_0:
		return dot4Q8_0
	case gguf.Q4_0:
		return dot4Q4_0
	case gguf.Q4_1:
		return dot4Q4_1
	case gguf.Q5_0:
		return dot4Q5_0
	case gguf.Q5_1:
		return dot4Q5_1
	}
	return nil
}

// MatMulT computes out = x · Mᵀ (accumulate: out += x · Mᵀ) for x of rows × Cols (stride
// Cols) and out of rows × Rows (stride ldo). Each row of x is quantized once (see
// QuantizeActs32, QuantizeActsK); the weight rows are split across gemm's worker pool, and
// each weight row meets a tile of x rows while it is in L1.
func (m *Matrix) MatMulT(x []float32, rows int, out []float32, ldo int, accumulate bool) {
	w := workPool.Get().(*work)
	w.one[0] = m
	w.mul(x, rows, w.one[:], out, ldo, accumulate, false)
	w.one[0] = nil
	workPool.Put(w)
}

// MatMulTMany computes the products of x (rows × Cols) with several matrices of the same
// Cols as one: matrix i's outputs are the columns of out (rows × ΣRows, stride ldo) after
// those of matrices 0..i-1, as if their rows were concatenated, without copying them. x is
// quantized once per activation layout the types need.
func MatMulTMany(x []float32, rows int, ms []*Matrix, out []float32, ldo int, accumulate bool) {
	w := workPool.Get().(*work)
	w.mul(x, rows, ms, out, ldo, accumulate, false)
	workPool.Put(w)
}

// MatMulTEach computes, for each i, row i of out (stride ldo) = row i of x · ms[i]ᵀ: one row
// through each of several matrices of the same Cols (a decode step's routed experts, each
// with its own input), as one product: the rows quantized once, the weight rows of all the
// matrices split across gemm's worker pool in one parallel section. Rows of out beyond
// ms[i].Rows are left as they are.
func MatMulTEach(x []float32, ms []*Matrix, out []float32, ldo int) {
	w := workPool.Get().(*work)
	w.mul(x, len(ms), ms, out, ldo, false, true)
	workPool.Put(w)
}

// mul is MatMulTMany, or with each MatMulTEach (rows = len(ms)).
func (w *work) mul(x []float32, rows int, ms []*Matrix, out []float32, ldo int, accumulate, each bool) {
	if rows <= 0 || len(ms) == 0 {
		return
	}
	cols, total, widest := ms[0].Cols, 0, 0
	for _, m := range ms {
		if m.Cols != cols {
			panic(fmt.Sprintf("quant: MatMulTMany over matrices of %d and %d columns", cols, m.Cols))
		}
		total += m.Rows
		widest = max(widest, m.Rows)
	}
	width := total // the columns of out a row of x writes
	if each {
		width = widest
	}
	if len(x) < rows*cols || ldo < width || len(out) < (rows-1)*ldo+width {
		panic(fmt.Sprintf("quant: MatMulT of %d rows: x has %d of %d×%d, out %d with stride %d for %d columns", rows, len(x), rows, cols, len(out), ldo, width))
	}
	if g := gemmRows(ms); !each && g > 0 && rows >= g {
		mulGEMM(x, rows, ms, out, ldo, accumulate)
		return
	}
	w.x, w.rows, w.cols, w.ms, w.out, w.ldo, w.acc = x, rows, cols, ms, out, ldo, accumulate
	w.need32, w.needK, w.need16 = false, false, false
	for _, m := range ms {
		if kQuant(m.Type) && m.packed == nil {
			w.needK = true
		} else {
			w.need32 = true
			w.need16 = w.need16 || m.packed != nil && m.Type == gguf.Q6_K
		}
	}
	if w.need16 {
		w.s16 = resize(w.s16, rows*cols/16)
	}
	if w.need32 {
		a, nb := &w.a32, rows*cols/32
		a.Q, a.D, a.S = resize(a.Q, rows*cols), resize(a.D, nb), resize(a.S, nb)
	}
	if w.needK {
		a, nb := &w.ak, rows*cols/256
		a.Q, a.D, a.BSums = resize(a.Q, rows*cols), resize(a.D, nb), resize(a.BSums, rows*cols/16)
	}
	threads := gemm.Threads()
	if rows >= 4 && threads > 1 && !each {
		gemm.Parallel(rows, w.quantFn)
	} else {
		for i := range rows {
			w.quantize(i)
		}
	}
	// Chunks of weight rows: several per thread for balance, none across two matrices.
	chunk := max(4, (total+4*threads-1)/(4*threads))
	if threads == 1 {
		chunk = total
	}
	chunk = (chunk + 3) &^ 3
	w.tasks = w.tasks[:0]
	off := 0
	for i, m := range ms {
		c := chunk
		if m.packed != nil {
			c = (c + packRows - 1) &^ (packRows - 1) // whole groups
		}
		x0, x1 := 0, rows // the activation rows the matrix meets
		if each {
			x0, x1, off = i, i+1, 0
		}
		for r := 0; r < m.Rows; r += c {
			w.tasks = append(w.tasks, task{i, r, min(r+c, m.Rows), off, x0, x1})
		}
		off += m.Rows
	}
	w.o4 = resize(w.o4, len(w.tasks))
	w.o64 = resize(w.o64, len(w.tasks))
	// Fewer than 4 rows run the one-row packed kernels only (decode), with or without
	// software prefetch as the type's tuner has measured faster.
	var probe gemm.Probe
	if m := ms[0]; rows < 4 && m.packed != nil {
		probe = x1Tuners[m.Type].Begin([3]int{total, cols, rows}, len(m.packed.b)*total/m.Rows)
	}
	w.pf = probe.PF()
	gemm.Parallel(len(w.tasks), w.runFn)
	probe.End()
	w.x, w.ms, w.out = nil, nil, nil
}

// GEMMRows, when positive, is the number of activation rows from which MatMulT and
// MatMulTMany dequantize the weights a tile of rows at a time and multiply them with the f32
// GEMM (gemm.Sgemm) instead of quantizing the activations (exact in the activations); 0 (the
// default) or less never does. A positive GEMMRows gives up row invariance: a row's product then
// depends on how many rows it is multiplied with (two arithmetics), which is why it is off.
// It paid only past 512 rows with the assembly kernels (BenchmarkMatMulT, a 1536 × 768
// matrix, GOMAXPROCS=2, 2-core AMD EPYC with AVX-512 VNNI, GMAC/s int8 vs GEMM: Q4_1 40.6 vs
// 42.6 at 512 rows, Q8_0 34.7 vs 42.4; packed matrices never), and with the pure-Go kernels
// it measured no faster than they are since y = x·Wᵀ runs on gemm's dot kernels
// (docs/performance.md, "Batch invariance").
var GEMMRows = 0

// gemmRows is GEMMRows for a product over ms (packed matrices never take the GEMM path:
// their kernels are about twice the multi-row ones).
func gemmRows(ms []*Matrix) int {
	for _, m := range ms {
		if m.packed != nil {
			return 0
		}
	}
	return max(GEMMRows, 0)
}

// mulGEMM is MatMulTMany by dequantized tiles of weight rows and gemm.Sgemm.
func mulGEMM(x []float32, rows int, ms []*Matrix, out []float32, ldo int, accumulate bool) {
	cols := ms[0].Cols
	tile := accTile(cols)
	bp := accPool.Get().(*[]float32)
	defer accPool.Put(bp)
	*bp = resize(*bp, tile*cols)
	buf := *bp
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	off := 0
	for _, m := range ms {
		for r0 := 0; r0 < m.Rows; r0 += tile {
			n := min(tile, m.Rows-r0)
			m.rowsTo(buf, r0, n)
			gemm.Sgemm(false, true, rows, n, cols, 1, x, cols, buf, cols, beta, out[off+r0:], ldo)
		}
		off += m.Rows
	}
}

// rowsTo dequantizes rows [r0, r0+n) into buf (n × Cols) on gemm's worker pool.
func (m *Matrix) rowsTo(buf []float32, r0, n int) {
	gemm.ParallelRows(n, 8, func(i0, i1 int) {
		for r := r0 + i0; r < r0+i1; r++ {
			m.Row(buf[(r-r0)*m.Cols:], r)
		}
	})
}

// xTile is how many activation rows each weight row meets in turn: 16 rows of 8-bit
// activations of a few thousand columns stay in L2 while a chunk of weight rows stays in L1.
const xTile = 16

// work is one product's state, pooled so that a steady stream of products makes no garbage.
type work struct {
	x              []float32
	rows, cols     int
	ms             []*Matrix
	out            []float32
	ldo            int
	acc            bool
	need32, needK  bool
	need16         bool // a packed Q6_K matrix: s16 holds the activations' sums per 16
	s16            []float32
	a32            Acts32 // the rows of x quantized, one after the other
	ak             ActsK
	tasks          []task
	o4             [][32]float32 // each task's multi-row kernel outputs (the first 4; see taskOut)
	o64            [][64]float32 // each task's packed kernel outputs
	one            [1]*Matrix    // MatMulT's ms
	pf             bool          // the one-row packed kernels prefetch (x1Tuners)
	quantFn, runFn func(int)
}

// task is weight rows [r0, r1) of matrix m against activation rows [x0, x1), written to
// columns off+r0.. of out. Its kernels' outputs (o4) are 128 bytes from the next task's, so
// that two cores running neighbouring tasks never write the same cache line: with 16 bytes
// apart, a product of one row (decode) spent as long passing the line between the cores as
// in its kernels.
type task struct{ m, r0, r1, off, x0, x1 int }

var workPool = sync.Pool{New: func() any {
	w := &work{}
	w.quantFn, w.runFn = w.quantize, w.run
	return w
}}

func (w *work) quantize(i int) {
	n := w.cols
	x := w.x[i*n : (i+1)*n]
	if w.need32 {
		a, nb := &w.a32, n/32
		quantizeActs32(a.Q[i*n:(i+1)*n], a.D[i*nb:(i+1)*nb], a.S[i*nb:(i+1)*nb], x)
		if w.need16 {
			w.sums16(i)
		}
	}
	if w.needK {
		a, nb := &w.ak, n/256
		quantizeActsK(a.Q[i*n:(i+1)*n], a.D[i*nb:(i+1)*nb], a.BSums[i*n/16:(i+1)*n/16], x)
	}
}

func (w *work) run(ti int) {
	t := w.tasks[ti]
	m := w.ms[t.m]
	if m.packed != nil {
		w.runPacked(ti)
		return
	}
	typ, n := m.Type, m.RowBytes()
	k4, k1, nb := kernel4(typ), kernel1(typ), w.cols/32
	k4K, k1K, nbK := kernel4K(typ), kernel1K(typ), w.cols/256
	a, ak, o := &w.a32, &w.ak, (*[4]float32)(w.o4[ti][:4])
	for i0 := t.x0; i0 < t.x1; i0 += xTile {
		i1 := min(i0+xTile, t.x1)
		for r := t.r0; r < t.r1; r++ {
			row := m.row(r, n)
			col := t.off + r
			i := i0
			// Four activation rows at a time against the weight row.
			for ; i+4 <= i1 && (k4 != nil || k4K != nil); i += 4 {
				if k4 != nil {
					k4(row, a.Q[32*nb*i:32*nb*(i+4)], a.D[nb*i:nb*(i+4)], a.S[nb*i:nb*(i+4)], o)
				} else {
					k4K(row, ak.Q[256*nbK*i:256*nbK*(i+4)], ak.D[nbK*i:nbK*(i+4)], ak.BSums[16*nbK*i:16*nbK*(i+4)], o)
				}
				for j, v := range o {
					if w.acc {
						v += w.out[(i+j)*w.ldo+col]
					}
					w.out[(i+j)*w.ldo+col] = v
				}
			}
			// The rest one at a time, by the multi-row kernel's single-row version where
			// there is one (the same bits as among four), else the row kernel.
			for ; i < i1; i++ {
				var v float32
				switch {
				case k1 != nil:
					v = k1(row, a.Q[32*nb*i:32*nb*(i+1)], a.D[nb*i:nb*(i+1)], a.S[nb*i:nb*(i+1)])
				case k1K != nil:
					v = k1K(row, ak.Q[256*nbK*i:256*nbK*(i+1)], ak.D[nbK*i:nbK*(i+1)], ak.BSums[16*nbK*i:16*nbK*(i+1)])
				default:
					v = w.dot(typ, row, i)
				}
				if w.acc {
					w.out[i*w.ldo+col] += v
				} else {
					w.out[i*w.ldo+col] = v
				}
			}
		}
	}
}

// accTile is how many weight rows MatMulAcc and mulGEMM dequantize at a time (fewer for wide
// rows, so that the tile stays about 4 MB of f32). Each tile is one GEMM call, which packs
// the activations again (mulGEMM) or passes over dx once more (MatMulAcc): tiles of 1 MB made
// Qwen2.5-0.5B's down projection (rows 4864 long) go by 48 rows, 19 calls per product.
func accTile(cols int) int { return max(16, min(1024, (1<<20)/cols)) &^ 7 }

var accPool = sync.Pool{New: func() any { return new([]float32) }}

// MatMulAcc computes dx += dy · M for dy of rows × Rows and dx of rows × Cols (both dense):
// the backward product of y = x · Mᵀ. It dequantizes a tile of weight rows at a time into a
// small f32 buffer and multiplies it with gemm.Sgemm; the whole matrix is never dequantized.
func (m *Matrix) MatMulAcc(dy []float32, rows int, dx []float32) {
	if rows <= 0 {
		return
	}
	if len(dy) < rows*m.Rows || len(dx) < rows*m.Cols {
		panic(fmt.Sprintf("quant: MatMulAcc of %d rows: dy has %d of %d×%d, dx %d of %d×%d", rows, len(dy), rows, m.Rows, len(dx), rows, m.Cols))
	}
	tile := accTile(m.Cols)
	bp := accPool.Get().(*[]float32)
	defer accPool.Put(bp)
	*bp = resize(*bp, tile*m.Cols)
	buf := *bp
	for r0 := 0; r0 < m.Rows; r0 += tile {
		n := min(tile, m.Rows-r0)
		m.rowsTo(buf, r0, n)
		gemm.Sgemm(false, false, rows, m.Cols, n, 1, dy[r0:], m.Rows, buf, m.Cols, 1, dx, m.Cols)
	}
}

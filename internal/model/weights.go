package model

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kernels"
	"github.com/honeai/hone/internal/quant"
	"github.com/honeai/hone/internal/safetensors"
)

// Weight is a row-major matrix (Rows × Cols) in f32, in a 16-bit format, or in one of ggml's
// quantized block types (a GGUF file's Q8_0 ... Q6_K tensors, kept as a view of the mapped
// file; or a safetensors model quantized at load, LoadOptions.Quantize). Exactly one of F32,
// Half and Q is set, or none once serving's packs hold the values of a heap copy
// (Model.Prepack; see Linear.Dense).
type Weight struct {
	Rows, Cols int
	F32        []float32     // set for f32 weights
	Half       []uint16      // set for bf16/f16 weights
	Kind       gemm.Half     // format of Half (kept when Prepack let Half go); 0 for f32 and quantized weights
	Q          *quant.Matrix // set for quantized weights: multiplied without dequantizing

	src *safetensors.Tensor // the file tensor F32 or Half was read from (see releaseMapped)
	// pk, set by Model.Prepack (or by loader.embedding for a tied embedding dequantized from
	// a GGUF), is a pack whose columns [pkOff, pkOff+Rows) of op(B) = Wᵀ are the weight's
	// rows, exactly: Row reads them there (a tied embedding's rows come from its LM head's
	// pack), and when F32 and Half are nil (a heap copy let go, or never made) the values are
	// restored from it (dense).
	pk    *gemm.PackedB
	pkOff int
}

// dropped reports whether the weight's values are held only by its pack pk.
func (w *Weight) dropped() bool {
	return w.pk != nil && w.F32 == nil && w.Half == nil && w.Q == nil
}

// keepIn makes pk's columns [off, off+Rows), which hold the weight's values, where Row reads
// them, and lets go of F32 or Half when they are a heap copy (a mapped file's view stays: it
// costs nothing once its pages are given back, and is what dense returns).
// It returns the bytes of the heap copy let go.
func (w *Weight) keepIn(pk *gemm.PackedB, off int) int64 {
	if w.Q != nil || pk == nil || w.F32 == nil && w.Half == nil {
		return 0
	}
	if pk.K() != w.Cols || off+w.Rows > pk.N() || (pk.Half() == 0) != (w.Kind == 0) {
		panic(fmt.Sprintf("model: a %d×%d weight (%v) kept in a pack of %d×%d (%v) at %d", w.Rows, w.Cols, w.Kind, pk.N(), pk.K(), pk.Half(), off))
	}
	w.pk, w.pkOff = pk, off
	if _, _, mapped := w.mappedRange(); mapped {
		return 0
	}
	n := w.Bytes()
	w.F32, w.Half = nil, nil
	return n
}

// dense is the weight with its values in F32 or Half: itself, or, when dropped, a copy
// restored from its pack.
func (w *Weight) dense() Weight {
	if !w.dropped() {
		return *w
	}
	d := Weight{Rows: w.Rows, Cols: w.Cols, Kind: w.Kind}
	if w.Kind == 0 {
		d.F32 = make([]float32, w.Rows*w.Cols)
		for r := range w.Rows {
			w.pk.Column(w.pkOff+r, d.F32[r*w.Cols:(r+1)*w.Cols])
		}
		return d
	}
	d.Half = make([]uint16, w.Rows*w.Cols)
	for r := range w.Rows {
		w.pk.ColumnBits(w.pkOff+r, d.Half[r*w.Cols:(r+1)*w.Cols])
	}
	return d
}

// releaseMapped gives back the memory of the mapped file pages F32 or Half views
// (safetensors.Tensor.ReleaseRange); a no-op when Half is not a view of a mapped file (a
// copy, or another source's). Reading Half afterwards stays correct: the pages fault back in.
func (w *Weight) releaseMapped() {
	if off, n, ok := w.mappedRange(); ok {
		w.src.ReleaseRange(off, n)
	}
}

// mappedRange is where F32 or Half lies in its mapped file tensor; ok is false when the
// weight is not a view of a mapped file.
func (w *Weight) mappedRange() (off, n int, ok bool) {
	if w.src == nil || len(w.src.Data) == 0 || !w.src.Mapped() {
		return 0, 0, false
	}
	var p unsafe.Pointer
	switch {
	case len(w.Half) > 0:
		p, n = unsafe.Pointer(&w.Half[0]), 2*len(w.Half)
	case len(w.F32) > 0:
		p, n = unsafe.Pointer(&w.F32[0]), 4*len(w.F32)
	default:
		return 0, 0, false
	}
	base := uintptr(unsafe.Pointer(&w.src.Data[0]))
	if uintptr(p) < base || uintptr(p)-base+uintptr(n) > uintptr(len(w.src.Data)) {
		return 0, 0, false // a copy, not a view of the file
	}
	return int(uintptr(p) - base), n, true
}

// Row writes row r as f32 into out.
func (w *Weight) Row(out []float32, r int) {
	if w.Q != nil {
		w.Q.Row(out, r)
		return
	}
	if w.pk != nil {
		if r < 0 || r >= w.Rows {
			panic(fmt.Sprintf("model: row %d of a %d-row weight", r, w.Rows))
		}
		w.pk.Column(w.pkOff+r, out[:w.Cols])
		return
	}
	if w.F32 != nil {
		copy(out[:w.Cols], w.F32[r*w.Cols:(r+1)*w.Cols])
		return
	}
	w.Kind.Decode(out[:w.Cols], w.Half[r*w.Cols:(r+1)*w.Cols])
}

// Bytes is the memory the weight holds.
func (w *Weight) Bytes() int64 {
	n := int64(len(w.F32))*4 + int64(len(w.Half))*2
	if w.Q != nil {
		n += w.Q.Bytes()
	}
	return n
}

// same reports whether w and v hold the same data (a tied LM head and embedding).
func (w *Weight) same(v *Weight) bool {
	switch {
	case w.dropped():
		return v.dropped() && w.pk == v.pk && w.pkOff == v.pkOff
	case w.Q != nil:
		return w.Q == v.Q || v.Q != nil && len(w.Q.Data) > 0 && len(v.Q.Data) > 0 && &w.Q.Data[0] == &v.Q.Data[0]
	case w.F32 != nil:
		return v.F32 != nil && &w.F32[0] == &v.F32[0]
	case w.Half != nil:
		return v.Half != nil && &w.Half[0] == &v.Half[0]
	}
	return false
}

// Linear is y = x·Wᵀ + b with W (Out × In) in the Hugging Face layout. P is W packed for
// gemm; the model packs the q/k/v and gate/up projections of a layer together (see Layer)
// and leaves their own P nil until Forward is first called on them.
type Linear struct {
	W    Weight
	Bias []float32
	P    *gemm.PackedB

	pairsT, pairsN *gemm.PackedB  // bf16-arithmetic packs (see PairsPacked)
	fusedT         bool           // a fused group's pair pack holds W for y = x·Wᵀ
	released       bool           // ReleasePaired gave back W's mapped pages
	rowPack        unsafe.Pointer // *gemm.PackedB, read atomically: pairsT once released (PackedRow)
	// serving (set by Model.Prepack): W's mapped file pages are given back each time a pack
	// is built from them (packed), since serving's products read only the packs.
	serving bool
	// restored is W's values restored from its pack for training (Dense), once Prepack let
	// W's own heap copy go.
	restored *Weight
}

// Dense returns W with its values in F32 or Half, for products that read W as it is
// (training's dx = dy·W, its head's pack). Serving's Prepack lets go of W's own copy when it
// is a heap copy that a pack holds (a GGUF's matrices dequantized for --dtype f32 or bf16, a
// safetensors model converted at load): Dense then restores it from the pack, exactly, once,
// and keeps it with the linear. Otherwise it is W. Safe for concurrent use.
func (l *Linear) Dense() Weight {
	packMu.Lock()
	defer packMu.Unlock()
	if !l.W.dropped() {
		return l.W
	}
	if l.restored == nil {
		d := l.W.dense()
		l.restored = &d
	}
	return *l.restored
}

// values is W with its values, for building a pack from them: W, the copy Dense restored, or a
// copy restored for the pack alone. Call with packMu held.
func (l *Linear) values() Weight {
	if l.restored != nil {
		return *l.restored
	}
	return l.W.dense()
}

// letGo makes W's values live in the pack serving multiplies by (its own, f32 or pair), letting
// go of a heap copy of W (Weight.keepIn); it returns the bytes let go. Call with packMu held.
func (l *Linear) letGo() int64 {
	if l.P != nil {
		return l.W.keepIn(l.P, 0)
	} else if l.pairsT != nil {
		return l.W.keepIn(l.pairsT, 0)
	}
	return 0
}

// afterPack gives back W's mapped pages after a pack was built from them, when serving (see
// Model.Prepack); a no-op otherwise. Called with packMu held.
func (l *Linear) afterPack() {
	if l.serving {
		l.W.releaseMapped()
	}
}

// packMu serialises lazy packing of Linear weights.
var packMu sync.Mutex

// Packed returns P, packing W first if needed (safe for concurrent use); nil for a quantized
// W, which Forward multiplies as it is.
func (l *Linear) Packed() *gemm.PackedB {
	packMu.Lock()
	defer packMu.Unlock()
	if l.P == nil {
		l.pack()
	}
	return l.P
}

// PairsPacked returns W packed for bf16 arithmetic (gemm.PackBF16Pairs; AMX where the CPU
// has it): transposed for y = x·Wᵀ, not transposed for dx = dy·W (training's backward
// product). Nil unless W is bf16. Built on first use and kept with the model: training uses
// these packs, serving never builds them.
func (l *Linear) PairsPacked(transposed bool) *gemm.PackedB {
	if l.W.Q != nil || l.W.Kind != gemm.BF16 {
		return nil
	}
	packMu.Lock()
	defer packMu.Unlock()
	if transposed {
		if l.pairsT == nil {
			w := l.values()
			l.pairsT = gemm.PackBF16Pairs(true, w.Rows, w.Cols, w.Half, w.Cols)
			l.afterPack()
		}
		return l.pairsT
	}
	if l.pairsN == nil {
		w := l.values()
		l.pairsN = gemm.PackBF16Pairs(false, w.Cols, w.Rows, w.Half, w.Cols)
	}
	return l.pairsN
}

// ReleasePaired gives back the memory of W's mapped file pages once W has pair packs for both
// directions: PairsPacked(false) and the transposed one (its own, or its fused group's; see
// Layer). Training in bf16 arithmetic (train.Trainer.BF16) multiplies by those packs only,
// so beside them the pages are dead weight (the projections of a 0.5B model: 0.7 GB). Whatever
// still reads W.Half stays correct, only slower the first time, as the pages fault back in from
// the file: merging or exporting an adapter, an f32-arithmetic pack (Packed) for a pass in
// f32, Row. A no-op otherwise, and for a W that is not a view of a mapped safetensors file
// (a heap copy, quantized, a GGUF's). A tied head's pages are the embedding's: its rows are
// then read from the head's pack (PackedRow, Model.EmbedRow).
func (l *Linear) ReleasePaired() {
	packMu.Lock()
	defer packMu.Unlock()
	if l.released || l.pairsN == nil || l.pairsT == nil && !l.fusedT {
		return
	}
	l.W.releaseMapped()
	l.released = true
	if l.pairsT != nil {
		atomic.StorePointer(&l.rowPack, unsafe.Pointer(l.pairsT))
	}
}

// PackedRow writes row r of W (W.Cols values) from its bf16 pair pack for x·Wᵀ once
// ReleasePaired has given back W's mapped pages, and reports whether it did: exact, the bf16 values
// widened, as Row reads them from the file. A tied head's rows are the embedding's, which a
// trainer gives back with the head's pages (Model.EmbedRow reads them here then).
//
// It takes no lock: an embedding row is read for every token, and packMu is held while a pack
// is built.
func (l *Linear) PackedRow(out []float32, r int) bool {
	p := (*gemm.PackedB)(atomic.LoadPointer(&l.rowPack))
	if p == nil {
		return false
	}
	p.Column(r, out[:l.W.Cols])
	return true
}

// fused packs several linears with the same input width as one (their outputs side by side),
// so that one GEMM computes them all.
type fused struct {
	parts []*Linear
	n     int             // output width: the sum of Outs
	pairs *gemm.PackedB   // bf16-arithmetic pack of the parts, built on first use
	P     *gemm.PackedB   // f32-arithmetic pack of the parts, built on first use (packed)
	Bias  []float32       // nil when none of the parts has a bias
	Outs  []int           // output width of each part
	qs    []*quant.Matrix // the parts' quantized weights
}

func fuse(parts ...*Linear) *fused {
	f := &fused{parts: parts}
	hasBias := false
	for _, l := range parts {
		if l.W.Q != nil {
			f.qs = append(f.qs, l.W.Q)
		}
		f.n += l.Out()
		f.Outs = append(f.Outs, l.Out())
		hasBias = hasBias || l.Bias != nil
	}
	if hasBias {
		for _, l := range parts {
			if l.Bias != nil {
				f.Bias = append(f.Bias, l.Bias...)
			} else {
				f.Bias = append(f.Bias, make([]float32, l.Out())...)
			}
		}
	}
	return f
}

// packed is the parts' weights packed together for f32-arithmetic products, built on first
// use (a process that only trains bf16 weights on AMX never builds it).
func (f *fused) packed() *gemm.PackedB {
	packMu.Lock()
	defer packMu.Unlock()
	if f.P != nil || f.quantized() {
		return f.P // nil when quantized: forwardQuant multiplies the parts as they are
	}
	in, w0 := f.parts[0].In(), f.parts[0].W
	if w0.Kind == 0 {
		w := make([]float32, 0, f.n*in)
		for _, l := range f.parts {
			w = append(w, l.values().F32...)
		}
		f.P = gemm.PackB(true, f.n, in, w, in)
	} else {
		f.P = gemm.PackHalfB(w0.Kind, true, f.n, in, f.halves(), in)
	}
	for _, l := range f.parts {
		l.afterPack()
	}
	return f.P
}

// halves is the parts' 16-bit weights one after the other (their rows side by side).
func (f *fused) halves() []uint16 {
	w := make([]uint16, 0, f.n*f.parts[0].In())
	for _, l := range f.parts {
		w = append(w, l.values().Half...)
	}
	return w
}

// letGo makes the parts' values live in the group's serving pack (f32 or pair; a part's own
// pack when the group has none), letting go of heap copies (Linear.letGo); it returns the
// bytes let go. Call with packMu held.
func (f *fused) letGo() int64 {
	pk := f.P
	if pk == nil {
		pk = f.pairs
	}
	off, n := 0, int64(0)
	for _, l := range f.parts {
		if pk != nil {
			n += l.W.keepIn(pk, off)
		} else {
			n += l.letGo()
		}
		off += l.Out()
	}
	return n
}

// pairsPacked is the parts' weights packed together for bf16 arithmetic (nil unless bf16).
func (f *fused) pairsPacked() *gemm.PackedB {
	w0 := f.parts[0].W
	if w0.Q != nil || w0.Kind != gemm.BF16 {
		return nil
	}
	packMu.Lock()
	defer packMu.Unlock()
	if f.pairs == nil {
		f.pairs = gemm.PackBF16Pairs(true, f.n, w0.Cols, f.halves(), w0.Cols)
		for _, l := range f.parts {
			l.fusedT = true
			l.afterPack()
		}
	}
	return f.pairs
}

// forward computes the fused product of x (rows × In) into tmp and scatters each part's
// columns into outs[i] (rows × Outs[i]); in bf16 arithmetic on the pair-packed weights when
// bf16 (bf16 weights only).
func (f *fused) forward(bf16 bool, x []float32, rows int, tmp []float32, outs ...[]float32) {
	n := f.n
	if f.quantized() {
		f.forwardQuant(x, rows, tmp)
	} else {
		var pb *gemm.PackedB
		if bf16 {
			pb = f.pairsPacked()
		}
		if pb == nil { // only the pack this pass multiplies by is built
			pb = f.packed()
		}
		// Each part's columns straight into its output where the parts are whole panels
		// (the copy below read and wrote every output again: 3% of a bf16 prefill).
		if gemm.GemmPackedInto(rows, x, pb.K(), pb, outs, f.Outs) {
			if f.Bias != nil {
				f.addBias(outs, rows)
			}
			return
		}
		gemm.GemmPacked(false, rows, 1, x, pb.K(), pb, 0, tmp, n)
	}
	// A prefill's columns are copied on every core (the copy reads and writes memory: on
	// one core the other waited for it).
	if rows < 2*scatterRows {
		f.scatter(tmp, outs, 0, rows)
		return
	}
	gemm.ParallelRows(rows, scatterRows, func(r0, r1 int) { f.scatter(tmp, outs, r0, r1) })
}

// scatter adds the bias to rows [r0, r1) of the fused product tmp and copies each part's
// columns into outs[i].
func (f *fused) scatter(tmp []float32, outs [][]float32, r0, r1 int) {
	n := f.n
	for r := r0; r < r1; r++ {
		row := tmp[r*n : (r+1)*n]
		if f.Bias != nil {
			for i, b := range f.Bias {
				row[i] += b
			}
		}
		c := 0
		for i, w := range f.Outs {
			copy(outs[i][r*w:(r+1)*w], row[c:c+w])
			c += w
		}
	}
}

// addBias adds the bias to rows [0, rows) of each part's output.
func (f *fused) addBias(outs [][]float32, rows int) {
	c := 0
	for i, w := range f.Outs {
		b := f.Bias[c : c+w]
		for r := 0; r < rows; r++ {
			kernels.Add(outs[i][r*w:(r+1)*w], b)
		}
		c += w
	}
}

// scatterRows is how many rows of a fused product's output one task copies into the parts.
const scatterRows = 32

// quantized reports whether any part's weight is quantized: then the parts are multiplied
// one after the other into their columns of the fused output (quant.MatMulTMany when all are
// quantized: one pass, the activations quantized once, no copy of the weights).
func (f *fused) quantized() bool {
	for _, l := range f.parts {
		if l.W.Q != nil {
			return true
		}
	}
	return false
}

func (f *fused) forwardQuant(x []float32, rows int, tmp []float32) {
	n := f.n
	if len(f.qs) == len(f.parts) {
		quant.MatMulTMany(x, rows, f.qs, tmp, n, false)
		return
	}
	c := 0
	for _, l := range f.parts {
		if l.W.Q != nil {
			l.W.Q.MatMulT(x, rows, tmp[c:], n, false)
		} else {
			gemm.GemmPacked(false, rows, 1, x, l.In(), l.Packed(), 0, tmp[c:], n)
		}
		c += l.Out()
	}
}

// In and Out are the input and output widths.
func (l *Linear) In() int  { return l.W.Cols }
func (l *Linear) Out() int { return l.W.Rows }

func (l *Linear) pack() {
	if l.W.Q != nil {
		return
	}
	w := l.values()
	if w.F32 != nil {
		l.P = gemm.PackB(true, w.Rows, w.Cols, w.F32, w.Cols)
	} else {
		l.P = gemm.PackHalfB(w.Kind, true, w.Rows, w.Cols, w.Half, w.Cols)
	}
	l.afterPack()
}

// Forward computes out (rows × Out) = x (rows × In) · Wᵀ + b, with beta = 0 or 1 for
// accumulating into out; in bf16 arithmetic (x rounded to bf16; see PairsPacked) when bf16,
// for bf16 weights only.
//
// A quantized W is multiplied as it is (quant.Matrix.MatMulT: x quantized to 8 bits per
// block, integer dot products), in that arithmetic whatever bf16 says.
func (l *Linear) Forward(bf16 bool, x []float32, rows int, out []float32, accumulate bool) {
	if l.W.Q != nil {
		l.W.Q.MatMulT(x, rows, out, l.Out(), accumulate)
	} else {
		var pb *gemm.PackedB
		if bf16 {
			pb = l.PairsPacked(true)
		}
		if pb == nil { // only the pack this pass multiplies by is built
			pb = l.Packed()
		}
		beta := float32(0)
		if accumulate {
			beta = 1
		}
		gemm.GemmPacked(false, rows, 1, x, l.In(), pb, beta, out, l.Out())
	}
	if l.Bias != nil {
		for r := 0; r < rows; r++ {
			row := out[r*l.Out() : (r+1)*l.Out()]
			for i, b := range l.Bias {
				row[i] += b
			}
		}
	}
}

// DType selects how weights are kept in memory when loading.
type DType string

// Weight formats.
const (
	DTypeAuto DType = ""     // as stored
	DTypeF32  DType = "f32"  // widen 16-bit weights to f32
	DTypeBF16 DType = "bf16" // narrow f32 weights to bf16
)

// tensorSource is where a loader reads weights: a safetensors directory, or a GGUF file
// whose tensors it presents under Hugging Face names (gguf.go).
type tensorSource interface {
	// shape is the named tensor's shape, outermost first; ok is false when it is absent.
	shape(name string) (s []int, ok bool)
	// weight is the named tensor as a rows × cols Weight (a 1-D tensor is 1 × n).
	weight(name string, rows, cols int) (Weight, error)
	// names lists every tensor, for the check that each one is used.
	names() []string
	Close() error
}

// safetensorsSource reads Hugging Face safetensors files.
type safetensorsSource struct{ f *safetensors.File }

func (s safetensorsSource) shape(name string) ([]int, bool) {
	t, ok := s.f.Tensor(name)
	if !ok {
		return nil, false
	}
	return t.Shape, true
}

func (s safetensorsSource) weight(name string, rows, cols int) (Weight, error) {
	t, _ := s.f.Tensor(name)
	return tensorWeight(t, rows, cols)
}

func (s safetensorsSource) names() []string { return s.f.Names() }

// release gives back the memory of the named tensor's mapped pages (safetensors.Tensor.Release).
func (s safetensorsSource) release(name string) {
	if t, ok := s.f.Tensor(name); ok {
		t.Release()
	}
}

// release tells the source that the named tensor's stored data is no longer read (it was
// quantized into a copy), so that its mapped pages stop counting as the process's memory.
func (ld *loader) release(name string) {
	if r, ok := ld.src.(interface{ release(string) }); ok {
		r.release(name)
	}
}

func (s safetensorsSource) Close() error { return s.f.Close() }

type loader struct {
	src      tensorSource
	dtype    DType
	quantize gguf.TensorType // F32: none (LoadOptions.Quantize)
	used     map[string]bool
}

func (ld *loader) tensor(name string, shape ...int) error {
	got, ok := ld.src.shape(name)
	if !ok {
		return fmt.Errorf("model: weight %s is missing", name)
	}
	if !slices.Equal(got, shape) {
		return fmt.Errorf("model: weight %s has shape %v, want %v", name, got, shape)
	}
	ld.used[name] = true
	return nil
}

// tensorWeight is tensor t as a rows × cols Weight, a view of the mapped file: f32 values, or
// bf16/f16 bit patterns with their format. The one place where safetensors dtypes are read.
func tensorWeight(t *safetensors.Tensor, rows, cols int) (Weight, error) {
	w := Weight{Rows: rows, Cols: cols}
	var err error
	switch t.DType {
	case safetensors.F32:
		w.F32, err = t.F32()
		w.src = t
	case safetensors.BF16:
		w.Half, err = t.U16()
		w.Kind, w.src = gemm.BF16, t
	case safetensors.F16:
		w.Half, err = t.U16()
		w.Kind, w.src = gemm.F16, t
	default:
		return Weight{}, fmt.Errorf("has dtype %s (want F32, BF16 or F16)", t.DType)
	}
	return w, err
}

// Floats returns the weight's values as f32 in a new slice.
func (w *Weight) Floats() []float32 {
	if w.dropped() {
		d := w.dense() // a new slice already
		if d.F32 != nil {
			return d.F32
		}
		w = &d
	}
	if w.F32 != nil {
		return append([]float32(nil), w.F32...)
	}
	if w.Q != nil {
		out := make([]float32, w.Rows*w.Cols)
		for r := range w.Rows {
			w.Q.Row(out[r*w.Cols:], r)
		}
		return out
	}
	out := make([]float32, len(w.Half))
	w.Kind.Decode(out, w.Half)
	return out
}

// matrix loads a Rows × Cols weight in the requested format.
func (ld *loader) matrix(name string, rows, cols int) (Weight, error) {
	if err := ld.tensor(name, rows, cols); err != nil {
		return Weight{}, err
	}
	w, err := ld.src.weight(name, rows, cols)
	if err != nil {
		return Weight{}, fmt.Errorf("model: weight %s %w", name, err)
	}
	if ld.quantize != gguf.F32 && w.Q == nil {
		if w, err = quantizeWeight(w, ld.quantize); err != nil {
			return Weight{}, fmt.Errorf("model: weight %s %w", name, err)
		}
		if w.Q != nil {
			ld.release(name)
		}
	}
	_, _, mapped := w.mappedRange()
	mapped = mapped || w.Q != nil // a GGUF's quantized view, converted below
	switch {
	case w.Q != nil && ld.dtype == DTypeF32:
		w = Weight{Rows: rows, Cols: cols, F32: w.Floats()}
	case w.Q != nil && ld.dtype == DTypeBF16:
		w = Weight{Rows: rows, Cols: cols, Half: bf16Rows(&w), Kind: gemm.BF16}
	case w.F32 != nil && ld.dtype == DTypeBF16:
		w.Half, w.Kind = make([]uint16, len(w.F32)), gemm.BF16
		gemm.BF16.Encode(w.Half, w.F32)
		w.F32, w.src = nil, nil
	case w.Half != nil && ld.dtype == DTypeF32:
		w.F32, w.Half, w.Kind, w.src = w.Floats(), nil, 0, nil
	default:
		return w, nil
	}
	if mapped {
		ld.release(name) // converted into a copy: the file's pages are not read again
	}
	return w, nil
}

// embedding loads the input embedding (vocab × hidden) as matrix does, except that a tied
// one converted from a GGUF's quantized blocks (--dtype f32 or bf16) is dequantized straight
// into the LM head's pack (gemm.PackRowsT), a panel of rows at a time: the head's products
// read that pack and the embedding's rows are read from it (Weight.pk), so the matrix is never
// held in row-major order besides it (Gemma 3's 262,144 × 640: 671 MB in f32).
func (ld *loader) embedding(name string, rows, cols int, tied bool) (Weight, error) {
	if !tied || ld.quantize != gguf.F32 || ld.dtype == DTypeAuto {
		return ld.matrix(name, rows, cols)
	}
	if err := ld.tensor(name, rows, cols); err != nil {
		return Weight{}, err
	}
	w, err := ld.src.weight(name, rows, cols)
	if err != nil {
		return Weight{}, fmt.Errorf("model: weight %s %w", name, err)
	}
	if w.Q == nil {
		return ld.matrix(name, rows, cols)
	}
	q := w.Q
	d := Weight{Rows: rows, Cols: cols}
	if ld.dtype == DTypeF32 {
		d.pk = gemm.PackRowsT(rows, cols, func(r int, row []float32) { q.Row(row, r) })
	} else {
		f := make([]float32, cols)
		d.Kind = gemm.BF16
		d.pk = gemm.PackHalfRowsT(gemm.BF16, rows, cols, func(r int, row []uint16) {
			q.Row(f, r)
			gemm.BF16.Encode(row, f)
		})
	}
	ld.release(name)
	return d, nil
}

// bf16Rows is a quantized weight's values rounded to bf16, dequantized a row at a time (no f32
// copy of the whole matrix).
func bf16Rows(w *Weight) []uint16 {
	out := make([]uint16, w.Rows*w.Cols)
	row := make([]float32, w.Cols)
	for r := range w.Rows {
		w.Q.Row(row, r)
		gemm.BF16.Encode(out[r*w.Cols:(r+1)*w.Cols], row)
	}
	return out
}

// vector loads a 1-D weight (norms, biases) as f32.
func (ld *loader) vector(name string, n int) ([]float32, error) {
	if err := ld.tensor(name, n); err != nil {
		return nil, err
	}
	w, err := ld.src.weight(name, 1, n)
	if err != nil {
		return nil, fmt.Errorf("model: weight %s %w", name, err)
	}
	return w.Floats(), nil
}

func (ld *loader) linear(prefix string, out, in int, bias bool) (Linear, error) {
	w, err := ld.matrix(prefix+".weight", out, in)
	if err != nil {
		return Linear{}, err
	}
	l := Linear{W: w}
	if bias {
		if l.Bias, err = ld.vector(prefix+".bias", out); err != nil {
			return Linear{}, err
		}
	}
	return l, nil
}

// storedBytes is the weight's size in the form its products read: quantized blocks, 16-bit or
// f32 values (a dropped weight's pack holds the same values, in its own element size).
func (w *Weight) storedBytes() int64 {
	switch {
	case w.Q != nil:
		return w.Q.Bytes()
	case w.Half != nil || w.Kind != 0:
		return int64(w.Rows) * int64(w.Cols) * 2
	case w.F32 != nil:
		return int64(w.Rows) * int64(w.Cols) * 4
	case w.pk != nil && w.pk.Half() != 0:
		return int64(w.Rows) * int64(w.Cols) * 2
	}
	return int64(w.Rows) * int64(w.Cols) * 4
}

// DecodeWeightBytes is how many bytes of weights one decode step reads from memory whatever
// its batch: every layer's projections and the LM head, in the form they are stored (the
// embedding's one row per token is left out). Benchmarks divide it by a step's time for the
// whole model's bandwidth, to set beside the memory's (docs/performance.md). 0 for a model
// with routed experts, whose steps read only the experts they route to.
func (m *Model) DecodeWeightBytes() int64 {
	var n int64
	for i := range m.Layers {
		L := &m.Layers[i]
		if L.MoE != nil {
			return 0
		}
		for _, l := range L.linears() {
			n += l.W.storedBytes()
		}
	}
	return n + m.LMHead.W.storedBytes()
}

package model

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/synth"
)

// mappedRSSKB is the resident memory (kB, /proc/self/smaps) of the mapping that holds p.
func mappedRSSKB(t *testing.T, p unsafe.Pointer) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	addr, in := uintptr(p), false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 { // a mapping's first line: its address range
			in = lo <= addr && addr < hi
			continue
		}
		var kb int
		if in && strings.HasPrefix(line, "Rss:") {
			fmt.Sscanf(strings.TrimPrefix(line, "Rss:"), "%d", &kb)
			return kb
		}
	}
	t.Fatal("no mapping holds the weight")
	return 0
}

// TestReleasePaired: once a bf16 linear mapped from a file has both pair packs (its own
// transposed one, or its fused group's), ReleasePaired drops its pages from the process's
// memory, and W.Half still reads the right values (faulted back from the file); before both
// packs exist, and for a heap copy, it does nothing.
func TestReleasePaired(t *testing.T) {
	const rows, cols = 64, 512 // 64 KiB each: sixteen pages
	vals := make([][]uint16, 3)
	var ts []safetensors.Tensor
	for i := range vals {
		f := make([]float32, rows*cols)
		for j := range f {
			f[j] = float32((j*7+i*13)%101) / 50
		}
		vals[i] = make([]uint16, len(f))
		gemm.BF16.Encode(vals[i], f)
		ts = append(ts, safetensors.FromU16(fmt.Sprintf("w%d", i), safetensors.BF16, []int{rows, cols}, vals[i]))
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := safetensors.Write(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	file, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	lins := make([]*Linear, 3)
	for i := range lins {
		tn, _ := file.Tensor(fmt.Sprintf("w%d", i))
		w, err := tensorWeight(tn, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		lins[i] = &Linear{W: w}
	}
	p := unsafe.Pointer(&lins[0].W.Half[0])
	check := func(when string) {
		t.Helper()
		for i, l := range lins {
			if !slices.Equal(l.W.Half, vals[i]) {
				t.Fatalf("%s: weight %d reads wrong values", when, i)
			}
		}
	}
	check("loaded") // every page resident
	full := mappedRSSKB(t, p)
	if full < 3*rows*cols*2/1024 {
		t.Skipf("the mapping holds %d kB after reading every weight", full)
	}

	lins[0].PairsPacked(false)
	lins[0].ReleasePaired() // no transposed pack yet: kept
	if got := mappedRSSKB(t, p); got != full {
		t.Fatalf("released with one pack: %d kB resident, %d before", got, full)
	}
	lins[0].PairsPacked(true)
	lins[0].ReleasePaired()
	f := fuse(lins[1], lins[2])
	f.pairsPacked()
	for _, l := range lins[1:] {
		l.PairsPacked(false)
		l.ReleasePaired()
	}
	if got, want := mappedRSSKB(t, p), full-3*(rows*cols*2/1024-8); got > want {
		t.Fatalf("%d kB resident after ReleasePaired, want at most %d (of %d)", got, want, full)
	}
	check("released")
	// A released linear's rows from its pack (a tied head's, the embedding's): the file's
	// values widened; one without packs reads none.
	row, want := make([]float32, cols), make([]float32, cols)
	for r := range rows {
		if !lins[0].PackedRow(row, r) {
			t.Fatal("PackedRow declined a released linear")
		}
		gemm.BF16.Decode(want, vals[0][r*cols:(r+1)*cols])
		if !slices.Equal(row, want) {
			t.Fatalf("row %d from the pack differs from the file's", r)
		}
	}

	heap := &Linear{W: lins[0].W}
	heap.W.Half = slices.Clone(heap.W.Half) // a copy: never released
	heap.PairsPacked(true)
	heap.PairsPacked(false)
	heap.ReleasePaired()
	if !slices.Equal(heap.W.Half, vals[0]) {
		t.Fatal("a heap copy changed on ReleasePaired")
	}
	if fresh := (&Linear{W: lins[1].W}); fresh.PackedRow(row, 0) {
		t.Fatal("PackedRow read a row of a linear without packs")
	}
}

// TestPrepackReleasesMappedWeights: serving's Prepack gives back the mapped file pages of
// every projection (and of an untied LM head) as it packs them, for f32 and bf16 files, so a
// served model is resident once, as its packs; the embedding stays (its rows are read per
// token); and a forward pass afterwards gives the logits it gave before.
func TestPrepackReleasesMappedWeights(t *testing.T) {
	for _, dtype := range []string{"f32", "bf16"} {
		t.Run(dtype, func(t *testing.T) {
			o := synth.Tiny("llama")
			o.Hidden, o.Intermediate, o.Layers, o.DType = 256, 1024, 2, dtype
			dir := t.TempDir()
			if err := synth.Write(dir, o); err != nil {
				t.Fatal(err)
			}
			m, err := Load(dir, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			forward := func() []float32 {
				cache := NewKVCache(&m.Config, kvcache.Options{NumBlocks: 16})
				logits, err := m.Forward([]Step{{Seq: cache.NewSequence(), Tokens: []int{1, 2, 3, 4, 5}, LogitsAt: []int{4}}})
				if err != nil {
					t.Fatal(err)
				}
				return logits[0][0]
			}
			ref := forward() // packs lazily, reading (so touching) every projection's pages
			w := m.Layers[0].Gate.W
			p, esz := unsafe.Pointer(unsafe.SliceData(w.F32)), 4
			if dtype == "bf16" {
				p, esz = unsafe.Pointer(unsafe.SliceData(w.Half)), 2
			}
			before := mappedRSSKB(t, p)
			m.Prepack()
			after := mappedRSSKB(t, p)
			projKB := 0
			for _, L := range m.Layers {
				for _, l := range []*Linear{&L.Q, &L.K, &L.V, &L.O, &L.Gate, &L.Up, &L.Down} {
					projKB += esz * l.W.Rows * l.W.Cols / 1024
				}
			}
			if projKB += esz * m.LMHead.W.Rows * m.LMHead.W.Cols / 1024; before-after < projKB*3/4 {
				t.Fatalf("the mapping's RSS went %d → %d kB; the projections and head are %d kB", before, after, projKB)
			}
			if got := forward(); !slices.Equal(got, ref) {
				t.Fatal("logits changed after Prepack released the mapped pages")
			}
		})
	}
}

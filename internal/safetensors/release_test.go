package safetensors

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestRelease: releasing a tensor's pages (several pages long, so whole pages are dropped)
// leaves the file mapped and its data readable, unchanged, and leaves its neighbours alone;
// tensors not read from a file and empty ones are no-ops.
func TestRelease(t *testing.T) {
	big := make([]float32, 5000) // about five pages
	for i := range big {
		big[i] = float32(i) * 0.5
	}
	small := []float32{1, 2, 3}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := Write(path, []Tensor{FromF32("big", []int{5000}, big), FromF32("small", []int{3}, small)}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tb, _ := f.Tensor("big")
	ts, _ := f.Tensor("small")
	for range 2 {
		tb.Release()
		v, err := tb.F32()
		if err != nil || !slices.Equal(v, big) {
			t.Fatalf("big after Release: %v", err)
		}
		if v, _ := ts.F32(); !slices.Equal(v, small) {
			t.Fatalf("small after its neighbour's Release: %v", v)
		}
	}
	ts.Release()
	mem := FromF32("mem", []int{3}, small)
	mem.Release()
	(&Tensor{}).Release()
	if v, _ := mem.F32(); !slices.Equal(v, small) {
		t.Fatalf("an in-memory tensor after Release: %v", v)
	}
}

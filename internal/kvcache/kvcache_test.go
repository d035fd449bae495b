package kvcache_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
)

// value is what the tests store as element i of layer l's key (v = false) or value (v =
// true) at position pos: a multiple of 1/4 below 2048, so binary16 holds it exactly.
func value(l, pos, i int, v bool) float32 {
	x := float32((l*131+pos*7+i*3)%2000) / 4
	if v {
		x = -x
	}
	return x
}

// appendPositions stores positions [s.Len(), s.Len()+n) of every layer as a forward pass
// does (Reserve, Store, Advance).
func appendPositions(t *testing.T, s *kvcache.Sequence, lo kvcache.Layout, n int) error {
	t.Helper()
	if err := s.Reserve(n); err != nil {
		return err
	}
	k, v := make([]float32, lo.KVDim), make([]float32, lo.KVDim)
	for p := s.Len(); p < s.Len()+n; p++ {
		for l := range lo.Layers {
			for i := range k {
				k[i], v[i] = value(l, p, i, false), value(l, p, i, true)
			}
			s.Store(l, p, k, v)
		}
	}
	s.Advance(n)
	return nil
}

// checkPositions gathers layer l's positions [from, s.Len()) of s, whole rows and one head's
// slice of them, and compares them with what appendPositions stored.
func checkPositions(t *testing.T, s *kvcache.Sequence, lo kvcache.Layout, l, from int) {
	t.Helper()
	n := s.Len() - from
	K, V := make([]float32, n*lo.KVDim), make([]float32, n*lo.KVDim)
	s.Gather(l, from, s.Len(), 0, lo.KVDim, K, V)
	const off, hd = 1, 2
	Kh, Vh := make([]float32, n*hd), make([]float32, n*hd)
	s.Gather(l, from, s.Len(), off, hd, Kh, Vh)
	for p := from; p < s.Len(); p++ {
		for i := range lo.KVDim {
			r := (p-from)*lo.KVDim + i
			if K[r] != value(l, p, i, false) || V[r] != value(l, p, i, true) {
				t.Fatalf("layer %d position %d element %d: %v, %v; want %v, %v", l, p, i, K[r], V[r], value(l, p, i, false), value(l, p, i, true))
			}
		}
		for i := range hd {
			r := (p-from)*hd + i
			if Kh[r] != value(l, p, off+i, false) || Vh[r] != value(l, p, off+i, true) {
				t.Fatalf("layer %d position %d head element %d: %v, %v", l, p, i, Kh[r], Vh[r])
			}
		}
	}
}

// TestCacheGrowsWithUse: a cache holds no memory until sequences need blocks, allocates it a
// chunk at a time as they grow (bounded by NumBlocks), keeps it when they end and reuses it;
// keys and values spread over several chunks (and a copy on write across chunks) read back as
// stored, in f32 and f16.
func TestCacheGrowsWithUse(t *testing.T) {
	lo := kvcache.Layout{Layers: 3, KVDim: 4}
	for _, dtype := range []kvcache.DType{kvcache.F32, kvcache.F16} {
		t.Run(dtype.String(), func(t *testing.T) {
			const bs, maxBlocks, chunk = 4, 12, 2
			cache := kvcache.New(lo, kvcache.Options{BlockSize: bs, NumBlocks: maxBlocks, ChunkBlocks: chunk, DType: dtype})
			defer cache.Close()
			per := cache.BytesPerBlock()
			if per != lo.BytesPerBlock(bs, dtype) || per != int64(lo.Layers*bs*lo.KVDim*2)*dtype.Size() || cache.MaxBytes() != maxBlocks*per {
				t.Fatalf("bytes per block %d, max %d", per, cache.MaxBytes())
			}
			if cache.DType() != dtype || cache.BlockSize() != bs || cache.NumBlocks() != maxBlocks || cache.Window() != nil {
				t.Fatalf("dtype %v, block size %d, blocks %d", cache.DType(), cache.BlockSize(), cache.NumBlocks())
			}
			held := func(blocks int) {
				t.Helper()
				if got := cache.MemoryBytes(); got != int64(blocks)*per {
					t.Fatalf("holds %d bytes (%d blocks), want %d blocks", got, got/per, blocks)
				}
			}
			held(0)
			if cache.FreeBlocks() != maxBlocks {
				t.Fatalf("free %d", cache.FreeBlocks())
			}
			a := cache.NewSequence()
			if err := appendPositions(t, a, lo, 5); err != nil {
				t.Fatal(err)
			}
			held(2) // 5 positions: 2 blocks, one chunk
			if err := appendPositions(t, a, lo, 10); err != nil {
				t.Fatal(err)
			}
			held(4) // 15 positions: 4 blocks, two chunks
			for l := range lo.Layers {
				checkPositions(t, a, lo, l, 0)
			}
			// A fork writing into the shared partly filled last block copies it into a new
			// chunk; the original keeps its own.
			b := a.Fork()
			if b.Len() != 15 || !slices.Equal(b.Blocks(), a.Blocks()) || cache.RefCount(a.Blocks()[0]) != 2 {
				t.Fatalf("fork: %d positions, blocks %v of %v", b.Len(), b.Blocks(), a.Blocks())
			}
			if err := appendPositions(t, b, lo, 3); err != nil {
				t.Fatal(err)
			}
			held(6)
			if b.Blocks()[3] == a.Blocks()[3] || b.Blocks()[2] != a.Blocks()[2] {
				t.Fatalf("copy on write: fork's blocks %v, original's %v", b.Blocks(), a.Blocks())
			}
			for l := range lo.Layers {
				checkPositions(t, a, lo, l, 0)
				checkPositions(t, b, lo, l, 0)
			}
			// Ended sequences give their blocks back to the pool; the memory stays and is
			// reused.
			a.Free()
			b.Free()
			held(6)
			if cache.FreeBlocks() != maxBlocks || a.Len() != 0 {
				t.Fatalf("free %d after freeing everything", cache.FreeBlocks())
			}
			c := cache.NewSequence()
			if err := appendPositions(t, c, lo, 15); err != nil {
				t.Fatal(err)
			}
			held(6)
			checkPositions(t, c, lo, 1, 3)
			c.Truncate(6)
			if c.Len() != 6 || len(c.Blocks()) != 2 {
				t.Fatalf("truncated to %d positions in %d blocks", c.Len(), len(c.Blocks()))
			}
			c.Free()
			// NumBlocks bounds the memory: 48 positions fill it, one more does not fit and
			// changes nothing.
			d := cache.NewSequence()
			if err := appendPositions(t, d, lo, maxBlocks*bs+1); !errors.Is(err, kvcache.ErrNoBlocks) {
				t.Fatalf("%d positions in %d blocks: err = %v", maxBlocks*bs+1, maxBlocks, err)
			}
			held(6)
			if d.Len() != 0 || len(d.Blocks()) != 0 {
				t.Fatalf("a refused reserve left %d positions, %d blocks", d.Len(), len(d.Blocks()))
			}
			if err := appendPositions(t, d, lo, maxBlocks*bs); err != nil {
				t.Fatal(err)
			}
			held(maxBlocks)
			if cache.MemoryBytes() != cache.MaxBytes() || cache.FreeBlocks() != 0 {
				t.Fatalf("full cache: holds %d of %d, free %d", cache.MemoryBytes(), cache.MaxBytes(), cache.FreeBlocks())
			}
			// A reserve and its undoing.
			d.Truncate(8)
			if err := d.Reserve(9); err != nil {
				t.Fatal(err)
			}
			if len(d.Blocks()) != 5 {
				t.Fatalf("reserved %d blocks for 17 positions", len(d.Blocks()))
			}
			d.Shrink()
			if len(d.Blocks()) != 2 || cache.FreeBlocks() != maxBlocks-2 {
				t.Fatalf("after Shrink: %d blocks, %d free", len(d.Blocks()), cache.FreeBlocks())
			}
		})
	}
}

// TestParseDType: ParseDType takes --kv-cache-dtype's values, and a cache made with Auto is
// f32.
func TestParseDType(t *testing.T) {
	for in, want := range map[string]kvcache.DType{"": kvcache.Auto, "auto": kvcache.Auto, "f32": kvcache.F32, "f16": kvcache.F16} {
		if got, err := kvcache.ParseDType(in); err != nil || got != want || (in != "" && got.String() != in) {
			t.Errorf("ParseDType(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"fp8", "bf16", "F16", "half"} {
		if _, err := kvcache.ParseDType(in); err == nil {
			t.Errorf("ParseDType(%q): no error", in)
		}
	}
	if c := kvcache.New(kvcache.Layout{Layers: 1, KVDim: 2}, kvcache.Options{}); c.DType() != kvcache.F32 || c.BlockSize() != 16 || c.NumBlocks() != 256 {
		t.Errorf("defaults: %v, block size %d, %d blocks", c.DType(), c.BlockSize(), c.NumBlocks())
	}
}

// TestPrefixIndex: full blocks inserted under their chained hashes are found again by a
// prompt with the same prefix (not by one with another salt), stay after their sequence ends,
// and are evicted least recently used first when the pool runs out.
func TestPrefixIndex(t *testing.T) {
	lo := kvcache.Layout{Layers: 2, KVDim: 4}
	const bs = 4
	cache := kvcache.New(lo, kvcache.Options{BlockSize: bs, NumBlocks: 6})
	prompt := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	hashes := kvcache.HashBlocks(prompt, bs, "")
	if len(hashes) != 2 || hashes[0] == hashes[1] {
		t.Fatalf("hashes %v", hashes)
	}
	other := kvcache.HashBlocks(append([]int{0}, prompt[1:]...), bs, "")
	salted := kvcache.HashBlocks(prompt, bs, "adapter")
	if other[1] == hashes[1] || salted[0] == hashes[0] || kvcache.HashBlocks(prompt[:8], bs, "")[1] != hashes[1] {
		t.Fatal("a block's hash does not follow every token before it and the salt alone")
	}
	s := cache.NewSequence()
	if err := appendPositions(t, s, lo, len(prompt)); err != nil {
		t.Fatal(err)
	}
	cache.InsertSequence(hashes, s)
	if cache.CachedBlocks() != 2 || cache.RefCount(s.Blocks()[0]) != 2 {
		t.Fatalf("cached %d, refs %d", cache.CachedBlocks(), cache.RefCount(s.Blocks()[0]))
	}
	held := slices.Clone(s.Blocks()[:2])
	s.Free()
	if got := cache.Lookup(salted); len(got) != 0 {
		t.Fatalf("another salt found %v", got)
	}
	p := cache.LookupPrefix(hashes)
	if p.Blocks() != 2 {
		t.Fatalf("prefix of %d blocks", p.Blocks())
	}
	r := cache.NewSequenceFromPrefix(p, 8)
	if !slices.Equal(r.Blocks(), held) {
		t.Fatalf("prefix blocks %v, want %v", r.Blocks(), held)
	}
	for l := range lo.Layers {
		checkPositions(t, r, lo, l, 0)
	}
	r.Free()
	// Both cached blocks are evictable; a sequence needing every block evicts them.
	if cache.FreeBlocks() != 6 {
		t.Fatalf("free %d with two cached blocks only the index holds", cache.FreeBlocks())
	}
	big := cache.NewSequence()
	if err := appendPositions(t, big, lo, 6*bs); err != nil {
		t.Fatal(err)
	}
	if cache.CachedBlocks() != 0 || len(cache.Lookup(hashes)) != 0 {
		t.Fatalf("%d blocks still cached", cache.CachedBlocks())
	}
}

// TestWindowReleasesBlocks: a model whose every layer attends within a window of 8 positions
// holds a bounded number of blocks however long its sequence (the window, a rollback margin
// and a block), the positions its queries read still as stored; a model mixing global and
// sliding layers keeps the sliding ones in a cache of their own that does the same while the
// global layers keep every position.
func TestWindowReleasesBlocks(t *testing.T) {
	const bs, window, total = 4, 8, 200
	bound := (window+kvcache.WindowRollback+bs-1)/bs + 2
	for _, tc := range []struct {
		name    string
		sliding []bool
	}{{"every layer", nil}, {"mixed", []bool{true, false, true}}} {
		t.Run(tc.name, func(t *testing.T) {
			lo := kvcache.Layout{Layers: 3, KVDim: 4, Window: window, Sliding: tc.sliding}
			cache := kvcache.New(lo, kvcache.Options{BlockSize: bs, NumBlocks: 128})
			defer cache.Close()
			global, sliding := lo.Split()
			if (tc.sliding == nil) != (cache.Window() == nil) || (tc.sliding == nil) != (global == nil) {
				t.Fatalf("window cache %v, split %v %v", cache.Window() != nil, global, sliding)
			}
			s := cache.NewSequence()
			for s.Len() < total {
				if err := appendPositions(t, s, lo, 1+s.Len()%3); err != nil {
					t.Fatal(err)
				}
				w := s
				if tc.sliding != nil {
					w = s.Window()
					if s.HeldBlocks() != (s.Len()+bs-1)/bs {
						t.Fatalf("%d positions: the global layers hold %d blocks", s.Len(), s.HeldBlocks())
					}
				}
				if w.HeldBlocks() > bound {
					t.Fatalf("%d positions: the sliding layers hold %d blocks, more than %d", s.Len(), w.HeldBlocks(), bound)
				}
				for l := range lo.Layers {
					from := 0
					if lo.IsSliding(l) {
						from = max(0, s.Len()-window) / bs * bs
					}
					checkPositions(t, s, lo, l, from)
				}
			}
			// A rollback within the margin keeps every position the window reads.
			s.Truncate(s.Len() - kvcache.WindowRollback + 1)
			for l := range lo.Layers {
				if lo.IsSliding(l) {
					checkPositions(t, s, lo, l, max(0, s.Len()-window)/bs*bs)
				}
			}
			s.Free()
			if cache.FreeBlocks() != 128 || (cache.Window() != nil && cache.Window().FreeBlocks() != 128) {
				t.Fatalf("free %d after freeing everything", cache.FreeBlocks())
			}
		})
	}
}

// ExampleLayout_Split: Gemma 2's layers alternate sliding and global; its KV cache is two.
func ExampleLayout_Split() {
	lo := kvcache.Layout{Layers: 4, KVDim: 8, Window: 4096, Sliding: []bool{true, false, true, false}}
	global, sliding := lo.Split()
	fmt.Println(global, sliding)
	// Output: [1 3] [0 2]
}

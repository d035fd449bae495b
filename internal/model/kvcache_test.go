package model_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
)

// TestKVCacheGrowsWithUse: a cache holds no memory until sequences need blocks, allocates it a
// chunk at a time as they grow (bounded by NumBlocks), keeps it when they end and reuses it;
// sequences spread over several chunks (and a copy-on-write across chunks) still give the
// reference logits.
func TestKVCacheGrowsWithUse(t *testing.T) {
	m := load(t, "llama")
	const bs, maxBlocks, chunk = 4, 12, 2
	cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: bs, NumBlocks: maxBlocks, ChunkBlocks: chunk})
	defer cache.Close()
	per := cache.BytesPerBlock()
	if per != model.KVBytesPerBlock(&m.Config, bs, kvcache.F32) || cache.MaxBytes() != maxBlocks*per {
		t.Fatalf("bytes per block %d, max %d", per, cache.MaxBytes())
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
	rng := rand.New(rand.NewPCG(21, 22))
	tokens := randTokens(rng, 15, m.Config.VocabSize)
	want := reference(m, tokens, nil)
	a := cache.NewSequence()
	if _, err := m.Forward([]model.Step{{Seq: a, Tokens: tokens[:5]}}); err != nil {
		t.Fatal(err)
	}
	held(2) // 5 positions: 2 blocks, one chunk
	out, err := m.Forward([]model.Step{{Seq: a, Tokens: tokens[5:], LogitsAt: all(10)}})
	if err != nil {
		t.Fatal(err)
	}
	held(4) // 15 positions: 4 blocks, two chunks
	for j := range 10 {
		if e := relErr(out[0][j], want[5+j]); e > 1e-4 {
			t.Fatalf("position %d: relative error %.3g", 5+j, e)
		}
	}
	// A fork writing into the shared partly filled last block copies it into a new chunk.
	b := a.Fork()
	more := randTokens(rng, 3, m.Config.VocabSize)
	wantB := reference(m, append(append([]int{}, tokens...), more...), nil)
	out, err = m.Forward([]model.Step{{Seq: b, Tokens: more, LogitsAt: all(3)}})
	if err != nil {
		t.Fatal(err)
	}
	held(6)
	for j := range 3 {
		if e := relErr(out[0][j], wantB[15+j]); e > 1e-4 {
			t.Fatalf("fork position %d: relative error %.3g", 15+j, e)
		}
	}
	// Ended sequences give their blocks back to the pool; the memory stays and is reused.
	a.Free()
	b.Free()
	held(6)
	if cache.FreeBlocks() != maxBlocks {
		t.Fatalf("free %d after freeing everything", cache.FreeBlocks())
	}
	c := cache.NewSequence()
	out, err = m.Forward([]model.Step{{Seq: c, Tokens: tokens, LogitsAt: []int{14}}})
	if err != nil {
		t.Fatal(err)
	}
	held(6)
	if e := relErr(out[0][0], want[14]); e > 1e-4 {
		t.Fatalf("in reused blocks: relative error %.3g", e)
	}
	c.Free()
	// NumBlocks bounds the memory: 48 positions fill it, one more does not fit.
	long := randTokens(rng, maxBlocks*bs+1, m.Config.VocabSize)
	d := cache.NewSequence()
	if _, err := m.Forward([]model.Step{{Seq: d, Tokens: long}}); !errors.Is(err, kvcache.ErrNoBlocks) {
		t.Fatalf("%d positions in %d blocks: err = %v", len(long), maxBlocks, err)
	}
	held(6)
	if _, err := m.Forward([]model.Step{{Seq: d, Tokens: long[:maxBlocks*bs]}}); err != nil {
		t.Fatal(err)
	}
	held(maxBlocks)
	if cache.MemoryBytes() != cache.MaxBytes() || cache.FreeBlocks() != 0 {
		t.Fatalf("full cache: holds %d of %d, free %d", cache.MemoryBytes(), cache.MaxBytes(), cache.FreeBlocks())
	}
}

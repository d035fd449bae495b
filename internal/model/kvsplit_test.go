package model_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// TestWindowSplitMatchesOneCache: Gemma 2 and Gemma 3 (global layers between windowed ones,
// window 8) keep their sliding layers in a cache of their own that gives back the blocks
// behind the window. Prefilled in chunks, decoded, forked and truncated (a rollback), every
// step's logits equal those of the same steps on one cache holding every layer, in f32 and
// f16; the sliding layers' sequence holds a bounded number of blocks while the global
// layers' holds them all; freeing everything gives every block back.
func TestWindowSplitMatchesOneCache(t *testing.T) {
	for _, arch := range []string{"gemma2", "gemma3"} {
		for _, dtype := range []kvcache.DType{kvcache.F32, kvcache.F16} {
			t.Run(arch+"/"+dtype.String(), func(t *testing.T) {
				o := synth.Tiny(arch)
				o.Std = 0.1
				m := synthModel(t, o)
				const bs, chunk = 4, 13
				one := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: bs, NumBlocks: 256, DType: dtype, NoWindowSplit: true})
				split := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: bs, NumBlocks: 256, DType: dtype})
				if one.Window() != nil || split.Window() == nil {
					t.Fatalf("window caches: one %v, split %v", one.Window() != nil, split.Window() != nil)
				}
				limit := model.KVWindowBlocks(&m.Config, bs, chunk)
				a, b := one.NewSequence(), split.NewSequence()
				step := func(what string, sa, sb *kvcache.Sequence, tokens []int) {
					t.Helper()
					logits := func(s *kvcache.Sequence) [][]float32 {
						out, err := m.Forward([]model.Step{{Seq: s, Tokens: tokens, LogitsAt: all(len(tokens))}})
						if err != nil {
							t.Fatal(err)
						}
						return out[0]
					}
					want, got := logits(sa), logits(sb)
					for p := range want {
						for j := range want[p] {
							if math.Float32bits(want[p][j]) != math.Float32bits(got[p][j]) {
								t.Fatalf("%s, position %d of %d: logit %d is %v with the split cache, %v with one", what, sb.Len()-len(tokens)+p, sb.Len(), j, got[p][j], want[p][j])
							}
						}
					}
					if w := sb.Window(); w.HeldBlocks() > limit {
						t.Fatalf("%s: the sliding layers hold %d blocks at %d positions, want at most %d", what, w.HeldBlocks(), sb.Len(), limit)
					}
					if sb.HeldBlocks() != (sb.Len()+bs-1)/bs {
						t.Fatalf("%s: the global layers hold %d blocks at %d positions", what, sb.HeldBlocks(), sb.Len())
					}
				}
				tok := func(i int) int { return (i*37 + 11) % o.Vocab }
				for i := 0; i < 130; i += chunk {
					var ts []int
					for j := i; j < min(i+chunk, 130); j++ {
						ts = append(ts, tok(j))
					}
					step("prefill", a, b, ts)
				}
				fa, fb := a.Fork(), b.Fork()
				for i := range 20 {
					step("decode", a, b, []int{tok(200 + i)})
					step("fork", fa, fb, []int{tok(300 + 2*i)})
				}
				a.Truncate(a.Len() - 5)
				b.Truncate(b.Len() - 5)
				for i := range 10 {
					step("after a rollback", a, b, []int{tok(400 + i)})
				}
				t.Logf("at %d positions: global layers %d blocks, sliding layers %d (limit %d)", b.Len(), b.HeldBlocks(), b.Window().HeldBlocks(), limit)
				for _, s := range []*kvcache.Sequence{a, b, fa, fb} {
					s.Free()
				}
				if split.FreeBlocks() != 256 || split.Window().FreeBlocks() != 256 {
					t.Fatalf("after freeing: %d and %d free blocks of 256", split.FreeBlocks(), split.Window().FreeBlocks())
				}
			})
		}
	}
}

// TestWindowSplitPrefix: a cached prefix of a split cache is found with the sliding layers'
// blocks of its last window: a sequence started from it computes what a fresh one does; a
// prefix whose window the sliding layers gave back is not found.
func TestWindowSplitPrefix(t *testing.T) {
	o := synth.Tiny("gemma3")
	o.Std = 0.1
	m := synthModel(t, o)
	const bs = 4
	cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: bs, NumBlocks: 256})
	tokens := make([]int, 200)
	for i := range tokens {
		tokens[i] = (i*41 + 7) % o.Vocab
	}
	a := cache.NewSequence()
	if _, err := m.Forward([]model.Step{{Seq: a, Tokens: tokens, LogitsAt: []int{0}}}); err != nil {
		t.Fatal(err)
	}
	hashes := kvcache.HashBlocks(tokens, bs, "")
	cache.InsertSequence(hashes, a)
	// The sliding layers gave back the blocks behind 200 - 8 + 1 - 64 (WindowRollback).
	dropped := (200 - o.SlidingWindow + 1 - kvcache.WindowRollback) / bs
	if p := cache.LookupPrefix(hashes[:20]); p.Blocks() != 0 {
		t.Fatalf("a prefix of 20 blocks, whose window the sliding layers gave back (before block %d), was found with %d blocks", dropped, p.Blocks())
	}
	p := cache.LookupPrefix(hashes[:45])
	if p.Blocks() != 45 {
		t.Fatalf("the prefix of 45 blocks: found %d", p.Blocks())
	}
	b := cache.NewSequenceFromPrefix(p, 45*bs)
	rest := append(append([]int(nil), tokens[45*bs:]...), 5, 6, 7)
	got, err := m.Forward([]model.Step{{Seq: b, Tokens: rest, LogitsAt: all(len(rest))}})
	if err != nil {
		t.Fatal(err)
	}
	full := append(append([]int(nil), tokens...), 5, 6, 7)
	ref := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: bs, NumBlocks: 256, NoWindowSplit: true}).NewSequence()
	want, err := m.Forward([]model.Step{{Seq: ref, Tokens: full, LogitsAt: all(len(full))}})
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i := range rest {
		for j := range got[0][i] {
			worst = max(worst, math.Abs(float64(got[0][i][j]-want[0][45*bs+i][j])))
		}
	}
	if worst > 1e-4 {
		t.Fatalf("from the cached prefix, logits differ from a fresh sequence's by %.3g", worst)
	}
	a.Free()
	b.Free()
}

// BenchmarkGemmaKVMemory: the KV memory a sequence holds on Gemma 3 1B's cache layout (26
// layers, every sixth global, one KV head of 256, window 512; f16, blocks of 16) with a
// tiny hidden size, prefilled to 2,048 and 8,192 positions in chunks of 512: with the sliding
// layers in a window cache of their own (split) against one cache of every layer.
func BenchmarkGemmaKVMemory(b *testing.B) {
	o := synth.Tiny("gemma3")
	o.Layers, o.Hidden, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate = 26, 64, 4, 1, 256, 128
	o.MaxPos, o.SlidingWindow, o.QueryPreAttnScalar = 8192, 512, 256
	m := synthModel(b, o)
	for l := range m.Config.Sliding {
		m.Config.Sliding[l] = l%6 < 5 // Gemma 3's pattern (synth writes every second)
	}
	for _, n := range []int{2048, 8192} {
		b.Run(fmt.Sprintf("positions%d", n), func(b *testing.B) {
			for range b.N {
				held := map[bool]int64{}
				for _, one := range []bool{false, true} {
					c := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: n / 16, DType: kvcache.F16, NoWindowSplit: one})
					s := c.NewSequence()
					for p := 0; p < n; p += 512 {
						tokens := make([]int, 512)
						for i := range tokens {
							tokens[i] = (p + i*7) % o.Vocab
						}
						if _, err := m.Forward([]model.Step{{Seq: s, Tokens: tokens}}); err != nil {
							b.Fatal(err)
						}
					}
					held[one] = c.MemoryBytes()
					c.Close()
				}
				b.ReportMetric(float64(held[false])/(1<<20), "MiB-split")
				b.ReportMetric(float64(held[true])/(1<<20), "MiB-one-cache")
				b.ReportMetric(float64(held[true])/float64(held[false]), "ratio")
			}
		})
	}
}

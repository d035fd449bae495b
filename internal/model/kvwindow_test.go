package model_test

import (
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// TestSlidingWindowReleasesBlocks: a Mistral (every layer windowed to 8 positions) decoding
// 90 positions in blocks of 4 holds a bounded number of blocks (those of the window and a
// block of margin), the pool gets the others back, and every decode step's logits equal
// those of one full prefill over the same tokens. Forks and the prefix index cope with the
// released entries. A Gemma 2 (global layers between the windowed ones) keeps every block of
// its global layers and a window's of its sliding layers.
func TestSlidingWindowReleasesBlocks(t *testing.T) {
	for _, arch := range []string{"mistral", "gemma2"} {
		t.Run(arch, func(t *testing.T) {
			o := synth.Tiny(arch)
			o.Std = 0.08
			m := synthModel(t, o)
			tokens := make([]int, 200)
			for i := range tokens {
				tokens[i] = (i*37 + 11) % o.Vocab
			}
			const bs = 4
			ref := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: bs, NumBlocks: 128}).NewSequence()
			want, err := m.Forward([]model.Step{{Seq: ref, Tokens: tokens, LogitsAt: all(len(tokens))}})
			if err != nil {
				t.Fatal(err)
			}
			cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: bs, NumBlocks: 128})
			seq := cache.NewSequence()
			most := 0
			for i, tok := range tokens {
				out, err := m.Forward([]model.Step{{Seq: seq, Tokens: []int{tok}, LogitsAt: []int{0}}})
				if err != nil {
					t.Fatal(err)
				}
				worst := 0.0
				for j := range out[0][0] {
					worst = max(worst, float64(abs32(out[0][0][j]-want[0][i][j])))
				}
				if worst > 1e-4 {
					t.Fatalf("position %d: decode logits differ from the prefill's by %.3g", i, worst)
				}
				most = max(most, seq.HeldBlocks())
			}
			full := (len(tokens) + bs - 1) / bs
			if arch == "gemma2" {
				// The global layers keep every block; the sliding ones, in a window cache of
				// their own, the window's.
				if seq.HeldBlocks() != full {
					t.Fatalf("gemma2's global layers hold %d blocks, want all %d", seq.HeldBlocks(), full)
				}
				if w, limit := seq.Window().HeldBlocks(), model.KVWindowBlocks(&m.Config, bs, 1); w > limit {
					t.Fatalf("gemma2's sliding layers hold %d blocks, want at most %d", w, limit)
				}
				return
			}
			// The window's 8 positions and the WindowRollback margin span at most
			// (8+64)/4+1 blocks of 4, plus the one being filled.
			if limit := (o.SlidingWindow+kvcache.WindowRollback+bs-1)/bs + 2; most > limit {
				t.Fatalf("held up to %d blocks, want at most %d", most, limit)
			}
			if free := cache.FreeBlocks(); free != 128-seq.HeldBlocks() {
				t.Fatalf("%d free blocks with %d held of 128", free, seq.HeldBlocks())
			}
			t.Logf("held at most %d of %d blocks", most, full)
			f := seq.Fork()
			cache.Insert(kvcache.HashBlocks(tokens, bs, ""), seq.Blocks())
			if _, err := m.Forward([]model.Step{{Seq: f, Tokens: []int{1}, LogitsAt: []int{0}}}); err != nil {
				t.Fatal(err)
			}
			f.Free()
			seq.Free()
			if free := cache.FreeBlocks(); free != 128 {
				t.Fatalf("%d free blocks after freeing everything", free)
			}
		})
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// BenchmarkSlidingWindowKV reports the KV cache memory a Mistral-shaped model (every layer
// windowed to 512 positions) holds for one sequence at 4096 positions (kv_MiB_held), beside
// what the whole length takes (kv_MiB_full): blocks held × bytes per block.
func BenchmarkSlidingWindowKV(b *testing.B) {
	dir := b.TempDir()
	o := synth.Tiny("mistral")
	o.SlidingWindow, o.MaxPos, o.Layers = 512, 8192, 4
	if err := synth.Write(dir, o); err != nil {
		b.Fatal(err)
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	const n, chunk, bs = 4096, 256, 16
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = (i*37 + 11) % o.Vocab
	}
	var held int
	for range b.N {
		cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: bs, NumBlocks: n / bs})
		seq := cache.NewSequence()
		for p := 0; p < n; p += chunk {
			if _, err := m.Forward([]model.Step{{Seq: seq, Tokens: tokens[p : p+chunk], LogitsAt: []int{chunk - 1}}}); err != nil {
				b.Fatal(err)
			}
		}
		held = seq.HeldBlocks()
		seq.Free()
	}
	per := float64(model.KVBytesPerBlock(&m.Config, bs, kvcache.F32)) / (1 << 20)
	b.ReportMetric(float64(held)*per, "kv_MiB_held")
	b.ReportMetric(float64(n/bs)*per, "kv_MiB_full")
	b.Logf("%d of %d blocks held", held, n/bs)
}

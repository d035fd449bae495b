package model

import "github.com/honeai/hone/internal/kvcache"

// KVLayout is what a KV cache for cfg's model needs to know of it: its layers, the width of
// a position's keys, and its sliding window.
func (c *Config) KVLayout() kvcache.Layout {
	return kvcache.Layout{Layers: c.NumLayers, KVDim: c.KVDim(), Window: c.SlidingWindow, Sliding: c.Sliding}
}

// NewKVCache returns a KV cache for cfg's model (kvcache.New); it holds no block memory
// until sequences grow.
func NewKVCache(cfg *Config, opts kvcache.Options) *kvcache.Cache {
	return kvcache.New(cfg.KVLayout(), opts)
}

// KVBytesPerBlock is the memory of one block of blockSize positions of cfg's model: keys and
// values of every layer, in dtype (kvcache.Auto: f32).
func KVBytesPerBlock(cfg *Config, blockSize int, dtype kvcache.DType) int64 {
	return cfg.KVLayout().BytesPerBlock(blockSize, dtype)
}

// KVLayerSplit returns the global and the sliding-window layers of a model that mixes the
// two (Gemma 2 and 3, Ministral), whose KV cache is two caches: the global layers keep every
// position, the sliding ones only their window (NewKVCache). Both are nil for a model whose
// layers are all global or all windowed.
func KVLayerSplit(cfg *Config) (global, sliding []int) { return cfg.KVLayout().Split() }

// KVWindowBlocks is the most blocks a sequence's sliding layers hold when each forward pass
// adds at most stepTokens positions: the window, the rollback margin, the step's new
// positions, and a partly filled block at either end.
func KVWindowBlocks(cfg *Config, blockSize, stepTokens int) int {
	return cfg.KVLayout().WindowBlocks(blockSize, stepTokens)
}

// AutoKVDType is what kvcache.Auto means for m: f16 when its matrices are quantized (ggml
// block types: llama.cpp keeps such models' KV cache in f16 by default), else f32, so that a
// model served at f32 or bf16 keeps its exact f32 attention.
func (m *Model) AutoKVDType() kvcache.DType {
	q := m.Embed.Q != nil || m.LMHead.W.Q != nil
	for i := range m.Layers {
		for _, l := range m.Layers[i].linears() {
			q = q || l.W.Q != nil
		}
	}
	if q {
		return kvcache.F16
	}
	return kvcache.F32
}

// windowFrom is the first position (a block start) that queries at positions from p on read
// in layer l: the blocks before it may have been given back (kvcache's window.go).
func (m *Model) windowFrom(l, p, blockSize int) int {
	return m.WindowStart(l, p) / blockSize * blockSize
}

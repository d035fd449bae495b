// Package kvcache is the paged key/value cache of the forward pass: fixed-size blocks of
// positions in one pool shared by every sequence, each sequence holding a block table, with
// reference-counted blocks (forks, beam search, a prefix cache), copy on write, a prefix index
// keyed by chained block hashes, f32 or f16 elements, and, for models with sliding-window
// attention, blocks given back once they fall behind the window (window.go).
//
// The cache knows of its model only its Layout; package model builds it from a Config
// (model.NewKVCache) and reads and writes the cache in its forward pass:
//
//	cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: 1024})
//	seq := cache.NewSequence()
//	logits, err := m.Forward([]model.Step{{Seq: seq, Tokens: prompt, LogitsAt: []int{len(prompt) - 1}}})
//	...
//	seq.Free()
package kvcache

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"unsafe"

	"github.com/honeai/hone/internal/gemm"
)

// Cache is a paged key/value cache: fixed-size blocks of BlockSize positions, shared by all
// sequences, each sequence holding a block table. Blocks are reference-counted so that
// sequences can share prefix blocks (forks for n > 1 and beam search, a prefix cache): a
// shared block is never written; appending into a shared, partly filled last block copies it
// first (copy on write).
//
// NumBlocks is a ceiling, not an allocation: the memory behind the blocks is allocated in
// chunks of blocks as sequences first need them (outside the Go heap where the system allows,
// so the collector's heap goal does not grow with the cache), and kept: blocks freed by
// finished sequences go to a free list and are reused before any new chunk is allocated. The
// memory held follows the most the cache has had in use, up to NumBlocks × BytesPerBlock.
//
// The cache also keeps a prefix index: full blocks of prompts, keyed by a hash that chains
// every token before them (and a salt), stay in the pool after their sequences end, holding
// one reference, so that a later prompt with the same prefix starts from them. They are
// evicted, least recently used first, when an allocation finds no free block and the cache
// cannot grow.
type Cache struct {
	blockSize int
	layers    int
	kvDim     int
	maxBlocks int
	dtype     DType
	// Memory: chunk i holds blocks [i·chunkBlocks, (i+1)·chunkBlocks); a block is its layers'
	// keys then values, blockElems elements each: f32 in chunks, or IEEE half bit patterns in
	// chunks16 (dtype F16; the same memory seen as uint16).
	chunkBlocks int // a power of two
	chunkShift  uint
	blockElems  int // blockSize × kvDim
	chunks      [][]float32
	chunks16    [][]uint16
	frees       []func() // per chunk: gives its memory back (nil: on the Go heap)
	cleanups    []runtime.Cleanup

	mu   sync.Mutex
	free []int32 // blocks with memory and no reference
	ref  []int32 // per allocated block

	prefix    map[BlockHash]int32 // hash → block held by the index
	hashOf    map[int32]BlockHash // the reverse
	lastUse   []int64             // per allocated block, the clock at its last lookup or insertion
	clock     int64
	evictable int // indexed blocks whose only reference is the index's
	hits      int64

	// A model mixing global and sliding-window layers: swa holds the sliding layers
	// (layerSWA), this cache the global ones; slot is each model layer's index in its cache.
	// window is the sliding layers' window; windowed marks a cache whose every layer attends
	// within it (a model windowed throughout, or swa), whose sequences give back the blocks
	// behind it (window.go).
	swa      *Cache
	layerSWA []bool
	slot     []int
	window   int
	windowed bool
}

// BlockHash identifies a full block of tokens by everything before it: see HashBlocks.
type BlockHash [16]byte

// HashBlocks returns the hash of each full block of tokens: block i's hash chains block
// i-1's, so equal hashes mean equal token prefixes. salt separates requests that must never
// share blocks (vLLM's cache_salt, a LoRA adapter's identity): it enters the first block's
// hash and so every later one.
func HashBlocks(tokens []int, blockSize int, salt string) []BlockHash {
	n := len(tokens) / blockSize
	out := make([]BlockHash, n)
	var prev BlockHash
	buf := make([]byte, 0, 16+len(salt)+8+blockSize*4)
	for i := 0; i < n; i++ {
		buf = append(buf[:0], prev[:]...)
		if i == 0 {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(len(salt)))
			buf = append(buf, salt...)
		}
		for _, t := range tokens[i*blockSize : (i+1)*blockSize] {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
		}
		sum := sha256.Sum256(buf)
		copy(prev[:], sum[:16])
		out[i] = prev
	}
	return out
}

// ErrNoBlocks is returned when the cache has too few free blocks for a step.
var ErrNoBlocks = errors.New("kvcache: KV cache is full")

// DType is the element type of a KV cache's keys and values.
type DType uint8

const (
	// Auto is f16 for a model whose matrices are quantized (a quantized GGUF file, or
	// --quantize), as llama.cpp's default, and f32 otherwise (Model.AutoKVDType); a cache
	// made without a model (New) takes it as f32.
	Auto DType = iota
	// F32 stores keys and values as float32.
	F32
	// F16 stores them as IEEE-754 binary16 (rounded to nearest even, overflowing to ±Inf
	// beyond 65504), widened to f32 inside the attention products: half the memory.
	F16
)

// String returns "auto", "f32" or "f16".
func (d DType) String() string {
	switch d {
	case Auto:
		return "auto"
	case F32:
		return "f32"
	case F16:
		return "f16"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// ParseDType reads "auto" (or ""), "f32" or "f16" (vLLM's --kv-cache-dtype spelling).
func ParseDType(s string) (DType, error) {
	switch s {
	case "", "auto":
		return Auto, nil
	case "f32":
		return F32, nil
	case "f16":
		return F16, nil
	}
	return 0, fmt.Errorf("unknown KV cache dtype %q (auto, f32 or f16)", s)
}

// Size is the bytes of one element (Auto counts as f32).
func (d DType) Size() int64 {
	if d == F16 {
		return 2
	}
	return 4
}

// Options sizes a cache.
type Options struct {
	BlockSize int // positions per block (default 16)
	NumBlocks int // most blocks in the pool (default 256)
	// DType is the keys' and values' element type (Auto: f32 here; the engine resolves
	// Auto with model.Model.AutoKVDType).
	DType DType
	// ChunkBlocks is how many blocks' memory is allocated at a time (default: about
	// ChunkBytes' worth, at least one block); rounded down to a power of two.
	ChunkBlocks int
	// WindowBlocks is the most blocks of the sliding layers' cache of a model that mixes
	// sliding-window and global layers (Gemma 2 and 3, Ministral; see Layout.Split), default
	// NumBlocks. NoWindowSplit keeps every layer in one cache (tests compare the two).
	WindowBlocks  int
	NoWindowSplit bool
}

// ChunkBytes is the memory a cache allocates at a time by default.
const ChunkBytes = 4 << 20

// Layout is what a cache knows of its model: the shape of the keys and values of a position,
// and which layers attend within a sliding window (package model builds it from a Config:
// model.Config.KVLayout).
type Layout struct {
	Layers int // the model's layers
	KVDim  int // floats of the keys (and of the values) of one position in one layer
	// Window > 0: the layers Sliding marks (every layer when Sliding is nil) attend to the
	// Window latest positions only.
	Window  int
	Sliding []bool
}

// IsSliding reports whether layer l attends within the window.
func (lo Layout) IsSliding(l int) bool {
	if lo.Window <= 0 {
		return false
	}
	return lo.Sliding == nil || lo.Sliding[l]
}

// EveryLayerWindowed reports whether every layer attends within the window.
func (lo Layout) EveryLayerWindowed() bool {
	if lo.Window <= 0 {
		return false
	}
	for _, s := range lo.Sliding {
		if !s {
			return false
		}
	}
	return true
}

// BytesPerBlock is the memory of one block of blockSize positions: keys and values of every
// layer, in dtype (Auto: f32).
func (lo Layout) BytesPerBlock(blockSize int, dtype DType) int64 {
	return int64(lo.Layers) * int64(blockSize) * int64(lo.KVDim) * dtype.Size() * 2
}

// Split returns the global and the sliding-window layers of a model that mixes the two
// (Gemma 2 and 3, Ministral), whose KV cache is two caches: the global layers keep every
// position, the sliding ones only their window (New). Both are nil for a model whose layers
// are all global or all windowed.
func (lo Layout) Split() (global, sliding []int) {
	if lo.Window <= 0 || lo.EveryLayerWindowed() {
		return nil, nil
	}
	for l := 0; l < lo.Layers; l++ {
		if lo.IsSliding(l) {
			sliding = append(sliding, l)
		} else {
			global = append(global, l)
		}
	}
	if len(sliding) == 0 || len(global) == 0 {
		return nil, nil
	}
	return global, sliding
}

// WindowBlocks is the most blocks a sequence's sliding layers hold when each forward pass
// adds at most stepTokens positions: the window, the rollback margin, the step's new
// positions, and a partly filled block at either end.
func (lo Layout) WindowBlocks(blockSize, stepTokens int) int {
	return (lo.Window+max(blockSize, WindowRollback)+stepTokens+blockSize-1)/blockSize + 2
}

// New returns a cache for a model of the given layout; it holds no block memory until
// sequences grow. For a model that mixes global and sliding-window layers (Layout.Split) it
// is the global layers' cache and holds a second one, of opts.WindowBlocks blocks, for the
// sliding layers: their sequences give back the blocks behind the window (window.go), so a
// long sequence holds its global layers' keys and values in full and its sliding layers' for
// the window only.
func New(lo Layout, opts Options) *Cache {
	if opts.BlockSize <= 0 {
		opts.BlockSize = 16
	}
	if opts.NumBlocks <= 0 {
		opts.NumBlocks = 256
	}
	if opts.DType == Auto {
		opts.DType = F32
	}
	global, sliding := lo.Split()
	if global == nil || opts.NoWindowSplit {
		c := newCache(lo.Layers, lo.KVDim, opts)
		if lo.EveryLayerWindowed() {
			c.window, c.windowed = lo.Window, true
		}
		return c
	}
	c := newCache(len(global), lo.KVDim, opts)
	wopts := opts
	if wopts.NumBlocks = opts.WindowBlocks; wopts.NumBlocks <= 0 {
		wopts.NumBlocks = opts.NumBlocks
	}
	c.swa = newCache(len(sliding), lo.KVDim, wopts)
	c.window = lo.Window
	c.swa.window, c.swa.windowed = lo.Window, true
	c.layerSWA, c.slot = make([]bool, lo.Layers), make([]int, lo.Layers)
	for i, l := range global {
		c.slot[l] = i
	}
	for i, l := range sliding {
		c.layerSWA[l], c.slot[l] = true, i
	}
	return c
}

// newCache is a cache of the given layers, with opts' defaults filled in.
func newCache(layers, kvDim int, opts Options) *Cache {
	if opts.ChunkBlocks <= 0 {
		opts.ChunkBlocks = int(max(1, ChunkBytes/(int64(layers)*int64(opts.BlockSize)*int64(kvDim)*opts.DType.Size()*2)))
	}
	// A power of two, so that finding a block's chunk is a shift.
	shift := bits.Len(uint(min(opts.ChunkBlocks, opts.NumBlocks))) - 1
	return &Cache{blockSize: opts.BlockSize, layers: layers, kvDim: kvDim, maxBlocks: opts.NumBlocks, dtype: opts.DType,
		chunkBlocks: 1 << shift, chunkShift: uint(shift), blockElems: opts.BlockSize * kvDim,
		prefix: map[BlockHash]int32{}, hashOf: map[int32]BlockHash{}}
}

// Window is the cache of the sliding layers of a model that mixes global and sliding-window
// layers (see New), or nil.
func (c *Cache) Window() *Cache { return c.swa }

// grow allocates the next chunk's memory and puts its blocks on the free list (the lowest
// first to be taken); false when the cache holds NumBlocks already.
func (c *Cache) grow() bool {
	first := len(c.ref)
	n := min(c.chunkBlocks, c.maxBlocks-first)
	if n <= 0 {
		return false
	}
	elems := n * c.layers * 2 * c.blockElems
	if c.dtype == F16 {
		mem, free := allocKV((elems + 1) / 2)
		c.chunks16 = append(c.chunks16, unsafe.Slice((*uint16)(unsafe.Pointer(&mem[0])), elems))
		c.grown(first, n, free)
		return true
	}
	mem, free := allocKV(elems)
	c.chunks = append(c.chunks, mem)
	c.grown(first, n, free)
	return true
}

// grown records a new chunk of n blocks from block first, whose memory free gives back.
func (c *Cache) grown(first, n int, free func()) {
	c.frees = append(c.frees, free)
	if free != nil {
		c.cleanups = append(c.cleanups, runtime.AddCleanup(c, func(f func()) { f() }, free))
	}
	c.ref = append(c.ref, make([]int32, n)...)
	c.lastUse = append(c.lastUse, make([]int64, n)...)
	for b := first + n - 1; b >= first; b-- {
		c.free = append(c.free, int32(b))
	}
}

// Close gives the cache's memory back now rather than when the cache is collected; the
// cache and its sequences must not be used afterwards.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.cleanups {
		cl.Stop()
	}
	for _, f := range c.frees {
		if f != nil {
			f()
		}
	}
	c.chunks, c.chunks16, c.frees, c.cleanups = nil, nil, nil, nil
	if c.swa != nil {
		c.swa.Close()
	}
}

// MemoryBytes is the block memory the cache holds now (it grows with use, up to MaxBytes),
// the sliding layers' cache included.
func (c *Cache) MemoryBytes() int64 {
	c.mu.Lock()
	n := int64(len(c.ref)) * c.BytesPerBlock()
	c.mu.Unlock()
	if c.swa != nil {
		n += c.swa.MemoryBytes()
	}
	return n
}

// MaxBytes is the memory the cache holds with all NumBlocks blocks in use (and all of the
// sliding layers' cache's).
func (c *Cache) MaxBytes() int64 {
	n := int64(c.maxBlocks) * c.BytesPerBlock()
	if c.swa != nil {
		n += c.swa.MaxBytes()
	}
	return n
}

// kv returns layer l's keys and values of block b (an f32 cache).
func (c *Cache) kv(l int, b int32) (k, v []float32) {
	ch := c.chunks[int(b)>>c.chunkShift]
	off := ((int(b)&(c.chunkBlocks-1))*c.layers + l) * 2 * c.blockElems
	return ch[off : off+c.blockElems], ch[off+c.blockElems : off+2*c.blockElems]
}

// kv16 returns layer l's keys and values of block b (an f16 cache).
func (c *Cache) kv16(l int, b int32) (k, v []uint16) {
	ch := c.chunks16[int(b)>>c.chunkShift]
	off := ((int(b)&(c.chunkBlocks-1))*c.layers + l) * 2 * c.blockElems
	return ch[off : off+c.blockElems], ch[off+c.blockElems : off+2*c.blockElems]
}

// DType is the keys' and values' element type (F32 or F16).
func (c *Cache) DType() DType { return c.dtype }

// BlockSize is the number of positions per block.
func (c *Cache) BlockSize() int { return c.blockSize }

// NumBlocks is the most blocks the pool holds.
func (c *Cache) NumBlocks() int { return c.maxBlocks }

// FreeBlocks is how many blocks an allocation can have: unused ones (with memory or not yet)
// and those only the prefix index holds.
func (c *Cache) FreeBlocks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.available()
}

func (c *Cache) available() int { return len(c.free) + c.evictable + c.maxBlocks - len(c.ref) }

// CachedBlocks is how many blocks the prefix index holds.
func (c *Cache) CachedBlocks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.prefix)
}

// Lookup returns the blocks of the longest prefix of hashes held by the prefix index, most
// recently used from now on. The caller starts a sequence from them with NewSequenceFrom.
func (c *Cache) Lookup(hashes []BlockHash) []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	var out []int32
	for _, h := range hashes {
		b, ok := c.prefix[h]
		if !ok {
			break
		}
		c.lastUse[b] = c.clock
		out = append(out, b)
	}
	if len(out) > 0 {
		c.hits++
	}
	return out
}

// Insert adds a sequence's full blocks to the prefix index: blocks[i] holds the tokens
// hashes[i] names. Blocks already indexed (under any hash) and hashes already present are
// skipped. Each newly indexed block gains the index's reference.
func (c *Cache) Insert(hashes []BlockHash, blocks []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.index(hashes, blocks, false)
}

// index is Insert under c.mu. At a block released behind a sliding window (window.go) it
// stops (nothing after it is reachable by a prefix chain), or with pastReleased skips it
// (the sliding layers' cache, whose blocks are looked up by their own hashes).
func (c *Cache) index(hashes []BlockHash, blocks []int32, pastReleased bool) {
	c.clock++
	for i, h := range hashes {
		if i >= len(blocks) {
			break
		}
		b := blocks[i]
		if b == noBlock {
			if pastReleased {
				continue
			}
			break
		}
		if old, ok := c.prefix[h]; ok {
			c.lastUse[old] = c.clock
			continue
		}
		if _, ok := c.hashOf[b]; ok || c.ref[b] == 0 {
			continue
		}
		c.prefix[h], c.hashOf[b] = b, h
		c.ref[b]++
		c.lastUse[b] = c.clock
	}
}

// Prefix is a cached prompt prefix found by LookupPrefix: its blocks, and for a cache with a
// sliding layers' cache those of the sliding layers (noBlock behind the window).
type Prefix struct {
	blocks, swa []int32
}

// Blocks is the number of full blocks the prefix holds.
func (p Prefix) Blocks() int { return len(p.blocks) }

// LookupPrefix is Lookup for any cache: for one with a sliding layers' cache, the longest
// cached prefix whose last window of positions the sliding layers' cache also holds (its
// blocks behind the window are not needed; a prefix whose window was given back is cut to
// one that still has it, or to nothing).
func (c *Cache) LookupPrefix(hashes []BlockHash) Prefix {
	blocks := c.Lookup(hashes)
	if c.swa == nil || len(blocks) == 0 {
		return Prefix{blocks: blocks}
	}
	w := c.swa
	w.mu.Lock()
	defer w.mu.Unlock()
	w.clock++
	bs := c.blockSize
	for n := len(blocks); n > 0; n-- {
		lo := max(0, n*bs-c.window+1) / bs // the first block the next position's window reads
		ok := true
		for _, h := range hashes[lo:n] {
			if _, found := w.prefix[h]; !found {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		swa := make([]int32, n)
		for i := range swa {
			swa[i] = noBlock
		}
		for i := lo; i < n; i++ {
			swa[i] = w.prefix[hashes[i]]
			w.lastUse[swa[i]] = w.clock
		}
		w.hits++
		return Prefix{blocks: blocks[:n], swa: swa}
	}
	return Prefix{}
}

// NewSequenceFromPrefix returns a sequence whose first n positions are the prefix's blocks
// (n within its last block), adding a reference to each.
func (c *Cache) NewSequenceFromPrefix(p Prefix, n int) *Sequence {
	s := c.newSequenceFrom(p.blocks, n)
	if c.swa != nil {
		if len(p.swa) != len(p.blocks) {
			panic("kvcache: a prefix without the sliding layers' blocks")
		}
		s.swa = c.swa.newSequenceFrom(p.swa, n)
	}
	return s
}

// InsertSequence adds the sequence's full blocks to the prefix index (Insert), the sliding
// layers' too: those it still holds, each under its own hash (LookupPrefix asks for the
// window's only).
func (c *Cache) InsertSequence(hashes []BlockHash, s *Sequence) {
	c.Insert(hashes, s.blocks)
	if c.swa == nil || s.swa == nil {
		return
	}
	c.swa.mu.Lock()
	defer c.swa.mu.Unlock()
	c.swa.index(hashes, s.swa.blocks, true)
}

// evictOne drops the least recently used block that only the index holds; false if none.
func (c *Cache) evictOne() bool {
	best, bestUse := int32(-1), int64(0)
	for b := range c.hashOf {
		if c.ref[b] == 1 && (best < 0 || c.lastUse[b] < bestUse) {
			best, bestUse = b, c.lastUse[b]
		}
	}
	if best < 0 {
		return false
	}
	delete(c.prefix, c.hashOf[best])
	delete(c.hashOf, best)
	c.evictable--
	c.ref[best] = 0
	c.free = append(c.free, best)
	return true
}

// BytesPerBlock is the memory of one block over the cache's layers (keys and values; for a
// model mixing global and sliding layers, the global ones: see Window).
func (c *Cache) BytesPerBlock() int64 {
	return int64(c.layers) * int64(c.blockElems) * c.dtype.Size() * 2
}

func (c *Cache) alloc() (int32, bool) {
	if len(c.free) == 0 && !c.grow() && !c.evictOne() {
		return 0, false
	}
	b := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	c.ref[b] = 1
	return b, true
}

func (c *Cache) release(b int32) {
	c.ref[b]--
	if c.ref[b] == 0 {
		c.free = append(c.free, b)
	}
	if c.ref[b] < 0 {
		panic(fmt.Sprintf("kvcache: KV block %d released too often", b))
	}
	if c.ref[b] == 1 {
		if _, ok := c.hashOf[b]; ok {
			c.evictable++
		}
	}
}

func (c *Cache) retain(b int32) {
	if c.ref[b] == 1 {
		if _, ok := c.hashOf[b]; ok {
			c.evictable--
		}
	}
	c.ref[b]++
}

// Retain adds a reference to blocks.
func (c *Cache) Retain(blocks []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range blocks {
		if b != noBlock {
			c.retain(b)
		}
	}
}

// Release drops a reference to blocks.
func (c *Cache) Release(blocks []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range blocks {
		if b != noBlock {
			c.release(b)
		}
	}
}

// RefCount is the number of references to a block.
func (c *Cache) RefCount(b int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.ref[b])
}

// Sequence is one sequence's view of the cache: its block table and length (and, for a
// model mixing global and sliding layers, its view of the sliding layers' cache).
type Sequence struct {
	c      *Cache
	blocks []int32
	n      int
	swa    *Sequence
}

// NewSequence returns an empty sequence.
func (c *Cache) NewSequence() *Sequence {
	s := &Sequence{c: c}
	if c.swa != nil {
		s.swa = c.swa.NewSequence()
	}
	return s
}

// NewSequenceFrom returns a sequence whose first n positions are the given (full or partly
// filled) blocks, adding a reference to each; used to start from cached prefix blocks. A
// cache with a sliding layers' cache takes its prefixes with LookupPrefix and
// NewSequenceFromPrefix instead.
func (c *Cache) NewSequenceFrom(blocks []int32, n int) *Sequence {
	if c.swa != nil {
		panic("kvcache: NewSequenceFrom on a cache with a sliding layers' cache (use NewSequenceFromPrefix)")
	}
	return c.newSequenceFrom(blocks, n)
}

func (c *Cache) newSequenceFrom(blocks []int32, n int) *Sequence {
	if n > len(blocks)*c.blockSize || n < (len(blocks)-1)*c.blockSize {
		panic(fmt.Sprintf("kvcache: %d positions do not fill %d blocks", n, len(blocks)))
	}
	c.Retain(blocks)
	return &Sequence{c: c, blocks: append([]int32(nil), blocks...), n: n}
}

// Len is the number of positions held.
func (s *Sequence) Len() int { return s.n }

// Blocks is the block table (do not modify).
func (s *Sequence) Blocks() []int32 { return s.blocks }

// Window is the sequence's view of the sliding layers' cache, or nil (see Cache.Window).
func (s *Sequence) Window() *Sequence { return s.swa }

// Fork returns a new sequence sharing every block of s.
func (s *Sequence) Fork() *Sequence {
	s.c.Retain(s.blocks)
	f := &Sequence{c: s.c, blocks: append([]int32(nil), s.blocks...), n: s.n}
	if s.swa != nil {
		f.swa = s.swa.Fork()
	}
	return f
}

// Free releases the sequence's blocks; the sequence is empty afterwards.
func (s *Sequence) Free() {
	s.c.Release(s.blocks)
	s.blocks, s.n = nil, 0
	if s.swa != nil {
		s.swa.Free()
	}
}

// Truncate shortens the sequence to n positions, releasing blocks no longer needed.
func (s *Sequence) Truncate(n int) {
	if s.swa != nil {
		s.swa.Truncate(n)
	}
	if n >= s.n {
		return
	}
	keep := (n + s.c.blockSize - 1) / s.c.blockSize
	s.c.Release(s.blocks[keep:])
	s.blocks = s.blocks[:keep]
	s.n = n
}

// BlockSize is the number of positions per block of the sequence's cache.
func (s *Sequence) BlockSize() int { return s.c.blockSize }

// Reserve makes room for n more positions: new blocks, and a private copy of a shared,
// partly filled last block. It changes nothing when the pool is too small (ErrNoBlocks). A
// forward pass reserves its steps' positions, stores their keys and values (Store), and then
// counts them (Advance); Shrink undoes a Reserve.
func (s *Sequence) Reserve(n int) error {
	if err := s.reserveOwn(n); err != nil {
		return err
	}
	if s.swa != nil {
		if err := s.swa.reserveOwn(n); err != nil {
			s.Shrink()
			return err
		}
	}
	return nil
}

// Advance counts k more positions stored, then gives back the blocks behind a sliding
// window that no layer will read again (window.go).
func (s *Sequence) Advance(k int) {
	s.n += k
	if s.swa != nil {
		s.swa.n += k
	}
	s.releaseBehindWindow()
}

// reserveOwn is Reserve in the sequence's own cache.
func (s *Sequence) reserveOwn(n int) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	cow := s.n%c.blockSize != 0 && len(s.blocks) > 0 && c.ref[s.blocks[len(s.blocks)-1]] > 1
	need := (s.n+n+c.blockSize-1)/c.blockSize - len(s.blocks)
	extra := need
	if cow {
		extra++
	}
	if extra > c.available() {
		return ErrNoBlocks
	}
	if cow {
		last := s.blocks[len(s.blocks)-1]
		b, _ := c.alloc()
		used := (s.n % c.blockSize) * c.kvDim
		for l := 0; l < c.layers; l++ {
			if c.dtype == F16 {
				sk, sv := c.kv16(l, last)
				dk, dv := c.kv16(l, b)
				copy(dk[:used], sk[:used])
				copy(dv[:used], sv[:used])
				continue
			}
			sk, sv := c.kv(l, last)
			dk, dv := c.kv(l, b)
			copy(dk[:used], sk[:used])
			copy(dv[:used], sv[:used])
		}
		c.release(last)
		s.blocks[len(s.blocks)-1] = b
	}
	for i := 0; i < need; i++ {
		b, _ := c.alloc()
		s.blocks = append(s.blocks, b)
	}
	return nil
}

// Shrink releases blocks beyond those the sequence's length needs (undoing a Reserve).
func (s *Sequence) Shrink() {
	keep := (s.n + s.c.blockSize - 1) / s.c.blockSize
	if keep < len(s.blocks) {
		s.c.Release(s.blocks[keep:])
		s.blocks = s.blocks[:keep]
	}
	if s.swa != nil {
		s.swa.Shrink()
	}
}

// layer returns the sequence and the layer index within its cache that hold model layer l.
func (s *Sequence) layer(l int) (*Sequence, int) {
	if s.c.slot == nil {
		return s, l
	}
	if s.c.layerSWA[l] {
		return s.swa, s.c.slot[l]
	}
	return s, s.c.slot[l]
}

// at returns layer l's keys and values of the sequence from position pos to the end of the
// block holding it (rows of kvDim floats).
func (s *Sequence) at(l, pos int) (k, v []float32) {
	s, l = s.layer(l)
	bs := s.c.blockSize
	k, v = s.c.kv(l, s.blocks[pos/bs])
	off := (pos % bs) * s.c.kvDim
	return k[off:], v[off:]
}

// at16 is at for an f16 cache.
func (s *Sequence) at16(l, pos int) (k, v []uint16) {
	s, l = s.layer(l)
	bs := s.c.blockSize
	k, v = s.c.kv16(l, s.blocks[pos/bs])
	off := (pos % bs) * s.c.kvDim
	return k[off:], v[off:]
}

// Store writes layer l's keys k and values v (kvDim floats each) of position pos, which a
// Reserve made room for, rounding them to binary16 in an f16 cache.
func (s *Sequence) Store(l, pos int, k, v []float32) {
	kv := s.c.kvDim
	if s.c.dtype == F16 {
		ck, cv := s.at16(l, pos)
		gemm.F16.Encode(ck[:kv], k[:kv])
		gemm.F16.Encode(cv[:kv], v[:kv])
		return
	}
	ck, cv := s.at(l, pos)
	copy(ck[:kv], k[:kv])
	copy(cv[:kv], v[:kv])
}

// Gather copies layer l's keys and values of positions [lo, hi), the hd elements from
// offset off of each position's kvDim, into K and V (rows of hd), widening an f16 cache's;
// whole rows (hd = kvDim) a block at a time.
func (s *Sequence) Gather(l, lo, hi, off, hd int, K, V []float32) {
	bs, kvDim := s.c.blockSize, s.c.kvDim
	for p0 := lo; p0 < hi; p0 = (p0/bs + 1) * bs {
		cnt := min((p0/bs+1)*bs, hi) - p0
		if hd == kvDim {
			dk, dv := K[(p0-lo)*hd:(p0-lo+cnt)*hd], V[(p0-lo)*hd:(p0-lo+cnt)*hd]
			if s.c.dtype == F16 {
				ck, cv := s.at16(l, p0)
				gemm.F16.Decode(dk, ck[:cnt*hd])
				gemm.F16.Decode(dv, cv[:cnt*hd])
			} else {
				ck, cv := s.at(l, p0)
				copy(dk, ck)
				copy(dv, cv)
			}
			continue
		}
		if s.c.dtype == F16 {
			ck, cv := s.at16(l, p0)
			for j := range cnt {
				p := p0 + j - lo
				gemm.F16.Decode(K[p*hd:(p+1)*hd], ck[j*kvDim+off:][:hd])
				gemm.F16.Decode(V[p*hd:(p+1)*hd], cv[j*kvDim+off:][:hd])
			}
			continue
		}
		ck, cv := s.at(l, p0)
		for j := range cnt {
			p := p0 + j - lo
			copy(K[p*hd:(p+1)*hd], ck[j*kvDim+off:][:hd])
			copy(V[p*hd:(p+1)*hd], cv[j*kvDim+off:][:hd])
		}
	}
}

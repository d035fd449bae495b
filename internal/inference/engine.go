// Package inference runs one model for many requests at once: a scheduler loop with
// continuous batching (requests join and leave the running batch between forward passes),
// chunked prefill under a per-step token budget, a bounded waiting queue with fcfs or
// priority order, cancellation, n parallel samples sharing the prompt's KV blocks, and
// per-request LoRA adapters. It knows nothing of HTTP.
//
//	eng := inference.New(m, inference.Options{})
//	defer eng.Close()
//	h, err := eng.Submit(ctx, &inference.Request{Prompt: ids, Params: sample.Defaults(), MaxTokens: 64})
//	for ev := range h.Events() { ... } // tokens and finish events per choice
//
// Admission reserves the KV blocks a request can need (prompt plus max tokens for every
// choice), so a running request is never preempted. The cache is bounded by a memory budget
// (Options.KVCacheBytes) and allocates its memory as sequences grow.
package inference

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
)

// DefaultKVCacheBytes is the KV cache budget of an engine when Options gives none: 1 GiB,
// which fits a laptop beside a small model's weights (for SmolLM2-135M, about 23k positions).
const DefaultKVCacheBytes int64 = 1 << 30

// Errors of Submit.
var (
	ErrQueueFull          = errors.New("inference: the waiting queue is full")
	ErrPriorityNotEnabled = errors.New("inference: priority scheduling is not enabled")
	ErrClosed             = errors.New("inference: engine closed")
	ErrTooLarge           = errors.New("inference: request needs more KV cache than the engine has")
	// ErrKeyQueueFull is ErrQueueFull for one key: its share of the waiting queue
	// (Options.MaxQueuePerKey) is taken by its own waiting sequences.
	ErrKeyQueueFull = fmt.Errorf("inference: the key's share of the waiting queue is full: %w", ErrQueueFull)
	// ErrTooManySequences is a submission of more sequences (prompts × choices) than a key
	// may have waiting: it can never be queued.
	ErrTooManySequences = errors.New("inference: the request asks for more sequences than a key may have waiting")
)

// Options configure an engine. Zero values take defaults.
type Options struct {
	MaxBatchTokens int // tokens per forward pass, prefill chunks and decodes together (512)
	MaxRunning     int // sequences in the running batch (64)
	MaxQueue       int // waiting requests (a text completion's prompts each) before ErrQueueFull (256)
	// MaxQueuePerKey, when set, is the most waiting sequences (n of each request) of one
	// non-empty Request.Key, so that one key's requests cannot fill the queue: more is
	// ErrKeyQueueFull, or ErrTooManySequences for a submission that can never fit. A single
	// request (one prompt) is let in whatever its n when its key has nothing waiting.
	MaxQueuePerKey int
	// KVCacheBytes is the most memory the KV cache may hold (DefaultKVCacheBytes); the
	// cache allocates it as sequences grow, not up front. KVBlocks, when set, gives the
	// number of blocks instead.
	KVCacheBytes int64
	KVBlocks     int // most KV cache blocks (default: as many as KVCacheBytes holds)
	BlockSize    int // positions per block (16)
	// KVCacheDType is the KV cache's element type; kvcache.Auto (the zero value) is the model's
	// Model.AutoKVDType: f16 for quantized matrices, else f32.
	KVCacheDType kvcache.DType
	Policy       Policy // PolicyFCFS (default) or PolicyPriority
	// NoPrefixCache turns off reuse of cached prompt blocks across requests.
	NoPrefixCache bool
	// NoWindowSplit keeps a model's sliding layers in the one KV cache of every layer
	// (kvcache.Options.NoWindowSplit), as before they had a window cache of their own:
	// for comparisons.
	NoWindowSplit bool
	Logger        *slog.Logger
	// Speculative, when set, speculates by prompt lookup for every request that does not
	// set its own (see Speculative).
	Speculative *Speculative
	// Observer, when set, is told each request's latencies (metrics; observe.go).
	Observer Observer
}

// Policy is the order in which waiting requests are admitted (Options.Policy).
type Policy string

// Scheduling policies.
const (
	// PolicyFCFS admits waiting requests in arrival order; Submit refuses a request with a
	// priority (ErrPriorityNotEnabled).
	PolicyFCFS Policy = "fcfs"
	// PolicyPriority admits the lowest Request.Priority first, in arrival order among equals.
	PolicyPriority Policy = "priority"
)

// ParsePolicy reads a policy by name: fcfs or priority.
func ParsePolicy(name string) (Policy, error) {
	switch p := Policy(name); p {
	case PolicyFCFS, PolicyPriority:
		return p, nil
	}
	return "", fmt.Errorf("unknown scheduling policy %q (fcfs or priority)", name)
}

// Engine schedules requests on one model.
type Engine struct {
	m    *model.Model
	opts Options
	kv   *kvcache.Cache
	// windowBlocks, for a model whose sliding layers have a cache of their own, is the most
	// blocks a sequence holds there (model.KVWindowBlocks); 0 otherwise.
	windowBlocks int
	log          *slog.Logger
	// logits is the loop's logits buffer (model.ForwardInto): a pass's logits are used up by
	// applyOutputs before the next pass, so each pass reuses it instead of leaving a
	// vocabulary-sized array a sequence behind. Kept up to keptLogits floats: a large batch's
	// is garbage, not held for the server's life.
	logits []float32

	submit chan *Handle
	mu     sync.Mutex
	queued int            // waiting requests
	perKey map[string]int // waiting sequences by Request.Key (MaxQueuePerKey)
	closed chan struct{}
	done   chan struct{}

	statsMu sync.Mutex
	stats   Stats

	closeKV sync.Once
}

// Stats are the engine's counters.
type Stats struct {
	Waiting, Running  int
	GeneratedTokens   int64
	PromptTokens      int64
	Steps             int64
	CompletedRequests int64
	// CachedPromptTokens counts prompt tokens served from the prefix cache.
	CachedPromptTokens int64
	// Spec counts speculative decoding (drafts, proposed and accepted tokens).
	Spec SpecStats
}

// New starts an engine for m.
func New(m *model.Model, opts Options) *Engine {
	if opts.MaxBatchTokens <= 0 {
		opts.MaxBatchTokens = 512
	}
	if opts.MaxRunning <= 0 {
		opts.MaxRunning = 64
	}
	if opts.MaxQueue <= 0 {
		opts.MaxQueue = 256
	}
	if opts.MaxQueuePerKey < 0 {
		opts.MaxQueuePerKey = 0
	}
	if opts.BlockSize <= 0 {
		opts.BlockSize = 16
	}
	if opts.KVCacheBytes <= 0 {
		opts.KVCacheBytes = DefaultKVCacheBytes
	}
	if opts.KVCacheDType == kvcache.Auto {
		opts.KVCacheDType = m.AutoKVDType()
	}
	perBlock := model.KVBytesPerBlock(&m.Config, opts.BlockSize, opts.KVCacheDType)
	kvOpts := kvcache.Options{BlockSize: opts.BlockSize, DType: opts.KVCacheDType}
	windowBlocks := 0
	if global, sliding := model.KVLayerSplit(&m.Config); global != nil && !opts.NoWindowSplit {
		// The sliding layers keep their window only, in a cache of their own
		// (model.NewKVCache). Their cache gets a window's blocks for each of MaxRunning
		// sequences and a parent (n > 1 forks the prompt's sequence), or the blocks a cache of every layer would have if fewer (short
		// sequences then fit as before); the global layers' cache takes the rest, so that
		// long sequences hold more positions. Each cache has its share for good: memory one
		// leaves unused is never the other's, and an admitted request always fits.
		perG := perBlock / int64(m.Config.NumLayers) * int64(len(global))
		perS := perBlock / int64(m.Config.NumLayers) * int64(len(sliding))
		windowBlocks = model.KVWindowBlocks(&m.Config, opts.BlockSize, opts.MaxBatchTokens)
		bytes := opts.KVCacheBytes
		if opts.KVBlocks > 0 {
			bytes = int64(opts.KVBlocks) * perBlock
		}
		kvOpts.WindowBlocks = int(min(int64((opts.MaxRunning+1)*windowBlocks), max(1, bytes/(perG+perS))))
		kvOpts.NumBlocks = int(max(1, (bytes-int64(kvOpts.WindowBlocks)*perS)/perG))
		// The longest sequence: its global layers' blocks, and a window cache (tiny budgets
		// only) that may hold fewer than a window's blocks.
		opts.KVBlocks = kvOpts.NumBlocks
		if kvOpts.WindowBlocks < windowBlocks {
			opts.KVBlocks = max(1, min(opts.KVBlocks, kvOpts.WindowBlocks-1))
		}
	} else {
		if opts.KVBlocks <= 0 {
			opts.KVBlocks = int(max(1, opts.KVCacheBytes/perBlock))
		}
		kvOpts.NumBlocks, kvOpts.NoWindowSplit = opts.KVBlocks, opts.NoWindowSplit
	}
	if opts.Policy == "" {
		opts.Policy = PolicyFCFS
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e := &Engine{m: m, opts: opts, log: opts.Logger, windowBlocks: windowBlocks,
		kv:     model.NewKVCache(&m.Config, kvOpts),
		submit: make(chan *Handle, opts.MaxQueue), closed: make(chan struct{}), done: make(chan struct{})}
	go e.loop()
	return e
}

// Model is the engine's model.
func (e *Engine) Model() *model.Model { return e.m }

// KVCacheInfo describes an engine's KV cache.
type KVCacheInfo struct {
	BlockSize     int           // positions per block
	Blocks        int           // most blocks the cache holds
	BytesPerBlock int64         // memory of one block
	MaxBytes      int64         // memory with every block in use (Blocks × BytesPerBlock, plus the sliding layers' cache of a model with one)
	HeldBytes     int64         // memory the cache holds now (grows with use up to MaxBytes)
	DType         kvcache.DType // KVF32 or KVF16
	// Window, for a model whose sliding layers have a cache of their own, is their window
	// (positions), and WindowSequences how many sequences' windows that cache holds at once.
	Window, WindowSequences int
}

// Tokens is how many positions the whole cache holds.
func (k KVCacheInfo) Tokens() int { return k.Blocks * k.BlockSize }

// QueueLimits are the most waiting requests of the engine, and sequences of one key (0: no
// share).
func (e *Engine) QueueLimits() (total, perKey int) { return e.opts.MaxQueue, e.opts.MaxQueuePerKey }

// KVCache describes the engine's KV cache.
// For a model whose sliding layers have a cache of their own, Blocks and BytesPerBlock are
// the global layers' cache's; MaxBytes and HeldBytes count both.
func (e *Engine) KVCache() KVCacheInfo {
	info := KVCacheInfo{BlockSize: e.kv.BlockSize(), Blocks: e.opts.KVBlocks, BytesPerBlock: e.kv.BytesPerBlock(),
		MaxBytes: e.kv.MaxBytes(), HeldBytes: e.kv.MemoryBytes(), DType: e.kv.DType()}
	if w := e.kv.Window(); w != nil {
		info.Window, info.WindowSequences = e.m.Config.SlidingWindow, w.NumBlocks()/e.windowBlocks
	}
	return info
}

// MaxSequenceLen is the longest sequence (prompt plus output tokens) a request of one choice
// can have: the model's context, or less when the KV cache holds fewer positions.
func (e *Engine) MaxSequenceLen() int {
	return min(e.m.Config.MaxPositionEmbeddings, e.opts.KVBlocks*e.opts.BlockSize)
}

// Stats returns a snapshot of the counters.
func (e *Engine) Stats() Stats {
	e.statsMu.Lock()
	defer e.statsMu.Unlock()
	return e.stats
}

// Close stops the engine: running and waiting requests finish with "abort".
func (e *Engine) Close() {
	select {
	case <-e.closed:
	default:
		close(e.closed)
	}
	<-e.done
	e.closeKV.Do(e.kv.Close)
}

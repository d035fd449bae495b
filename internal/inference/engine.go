// Package inference runs one model for many requests at once: a scheduler loop with
// continuous batching (requests join and leave the running batch between forward passes),
// chunked prefill under a per-step token budget, a bounded waiting queue with fcfs or
// priority order, cancellation, n parallel samples sharing the prompt's KV blocks, and
// per-request LoRA adapters. It knows nothing of HTTP.
//
//	eng := inference.New(m, inference.Options{})
//	defer eng.Close()
//	h, err := eng.Submit(ctx, &inference.Request{Prompt: ids, Params: p, MaxTokens: 64})
//	for ev := range h.Events() { ... } // tokens and finish events per choice
//
// Admission reserves the KV blocks a request can need (prompt plus max tokens for every
// choice), so a running request is never preempted. The cache is bounded by a memory budget
// (Options.KVCacheBytes) and allocates its memory as sequences grow.
package inference

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
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
	Policy       string // "fcfs" (default) or "priority"
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

// Request is one chat completion's generation work.
type Request struct {
	ID        string
	Prompt    []int
	Params    sample.Params
	N         int // parallel samples (default 1)
	MaxTokens int
	IgnoreEOS bool
	Adapter   *model.LoRA
	Priority  int
	// Key names who submitted it (an API key's id) for the per-key share of the waiting
	// queue (Options.MaxQueuePerKey); "" is a key of its own.
	Key string
	// Logprobs: report each sampled token's logprob and TopLogprobs alternatives.
	Logprobs    bool
	TopLogprobs int
	// PromptLogprobs >= 0 asks for the logprob of every prompt token and that many
	// alternatives (-1: none). Such a request computes its whole prompt (no prefix cache).
	PromptLogprobs int
	// CacheSalt keys the prefix cache: requests share cached prompt blocks only when their
	// salts (and adapters) are equal.
	CacheSalt string
	// Repetition, when set, finishes a choice with "repetition" once its output ends in a
	// pattern repeated often enough.
	Repetition *Repetition
	// Beam, when set, searches Beam.Width beams instead of sampling (N becomes the width).
	Beam *Beam
	// Guide, when set, constrains every choice's tokens (structured outputs): each choice
	// gets its own Guide from it.
	Guide GuideFactory
	// Output, when set, has the engine detokenise each choice and stop it at stop strings.
	Output *Output
	// Speculative, when set, speculates by prompt lookup for this request (overriding the
	// engine's Options.Speculative); NoSpeculative turns the engine's off for it. Beam
	// search never speculates.
	Speculative   *Speculative
	NoSpeculative bool
}

// Guide restricts the next token of one output.
type Guide interface {
	// Mask writes the allowed next tokens as a bitset (bit t of word t/64).
	Mask(dst []uint64)
	// Accept advances past the sampled token.
	Accept(tok int) error
	// MustEnd reports whether the output can only end now.
	MustEnd() bool
}

// GuideFactory makes a Guide per choice.
type GuideFactory interface {
	NewGuide() Guide
}

// Repetition is vLLM's repetition_detection: the output ends in a pattern of
// MinPattern..MaxPattern tokens (MinPattern 0 means 1) repeated MinCount times in a row.
// MaxPattern 0 or MinCount below 2 turns it off.
type Repetition struct {
	MaxPattern, MinPattern, MinCount int
}

// Repeats reports whether tokens end in such a pattern.
func (r *Repetition) Repeats(tokens []int) bool {
	lo := max(r.MinPattern, 1)
	if r.MaxPattern <= 0 || r.MinCount < 2 || lo > r.MaxPattern {
		return false
	}
	for size := lo; size <= r.MaxPattern; size++ {
		if size*r.MinCount > len(tokens) {
			return false
		}
		if repeatsWith(tokens, size, r.MinCount) {
			return true
		}
	}
	return false
}

// repeatsWith: the last size tokens equal each of the count-1 runs of size tokens before them.
func repeatsWith(tokens []int, size, count int) bool {
	end := len(tokens)
	for k := 1; k < count; k++ {
		for j := 1; j <= size; j++ {
			if tokens[end-j] != tokens[end-k*size-j] {
				return false
			}
		}
	}
	return true
}

// FinishError ends a choice whose logits were not finite (NaN or +Inf: broken weights).
const FinishError = "error"

// nonFiniteLogits counts the logits that are NaN or +Inf (-Inf is a masked token).
func nonFiniteLogits(raw []float32) int {
	n := 0
	for _, v := range raw {
		if v != v || v > math.MaxFloat32 {
			n++
		}
	}
	return n
}

// Event is something that happened to one choice of a request.
type Event struct {
	Choice int
	// Token is a new token (when Finish is "" or the finishing token itself was sampled).
	Token    int
	HasToken bool
	Logprob  float32
	Rank     int
	Top      []sample.TopLogprob
	// Finish is "", "stop", "length", "abort", "repetition" or "error" (FinishError); StopReason is the stop token
	// id (int) or nil.
	Finish     string
	StopReason any
	// PromptLogprobs is sent once, before the first token, when asked for.
	PromptLogprobs []PromptLogprob
	// Text is the text that became visible (Request.Output only).
	Text Text
}

// PromptLogprob is the logprob of one prompt token (the first has none).
type PromptLogprob struct {
	Token   int
	Logprob float32
	Rank    int
	Top     []sample.TopLogprob
}

// Handle follows a submitted request.
type Handle struct {
	req    *Request
	ctx    context.Context
	events chan Event
	stops  chan stopReq
	outs   []*outputState // per choice (Request.Output); the engine's goroutine only
	// Queued is when the request was submitted; FirstToken when its first token came.
	Queued, FirstToken time.Time
	// CachedTokens is how many prompt tokens came from the prefix cache; set before the
	// first event.
	CachedTokens int
	// Spec counts the request's speculative decoding; final once Events is closed.
	Spec SpecStats
}

type stopReq struct {
	choice int
	reason string
}

// Events delivers the request's events; it is closed when every choice has finished.
func (h *Handle) Events() <-chan Event { return h.events }

// Stop finishes a choice with finish reason "stop" and the given stop string (the caller
// found it in the detokenised text). Safe to call from any goroutine, more than once.
func (h *Handle) Stop(choice int, stopString string) {
	select {
	case h.stops <- stopReq{choice, stopString}:
	default:
	}
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
		opts.Policy = "fcfs"
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
	DType         kvcache.DType // F32 or F16
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

// Submit queues a request; ctx cancelled (the client went away) aborts it.
func (e *Engine) Submit(ctx context.Context, req *Request) (*Handle, error) {
	hs, err := e.SubmitAll(ctx, []*Request{req})
	if err != nil {
		return nil, err
	}
	return hs[0], nil
}

// SubmitAll queues several requests (a text completion's prompts) at once: all of them or,
// when one is refused or their sequences (n each) do not fit the waiting queue or their key's
// share of it, none. Every request of one call has the key of the first.
func (e *Engine) SubmitAll(ctx context.Context, reqs []*Request) ([]*Handle, error) {
	weight := 0
	for _, req := range reqs {
		if req.Beam != nil {
			req.Beam.Width = max(req.Beam.Width, 1)
			req.N = req.Beam.Width
		}
		if req.N <= 0 {
			req.N = 1
		}
		if req.Priority != 0 && e.opts.Policy != "priority" {
			return nil, ErrPriorityNotEnabled
		}
		if len(req.Prompt) == 0 {
			return nil, fmt.Errorf("inference: empty prompt")
		}
		if need, ok := e.admissionNeed(req); !ok || !e.fits(kvNeed{}, need) {
			return nil, ErrTooLarge
		}
		weight += req.N // each N ≤ the cache's blocks (admissionNeed): no wrap
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	key := reqs[0].Key
	share := e.opts.MaxQueuePerKey
	if key == "" {
		share = 0
	}
	if share > 0 && weight > share && len(reqs) > 1 {
		return nil, ErrTooManySequences
	}
	hs := make([]*Handle, len(reqs))
	for i, req := range reqs {
		req.Key = key
		hs[i] = &Handle{req: req, ctx: ctx, events: make(chan Event, req.N*(req.MaxTokens+2)+1), stops: make(chan stopReq, req.N*2), Queued: time.Now()}
	}
	e.mu.Lock()
	if e.queued+len(reqs) > e.opts.MaxQueue {
		e.mu.Unlock()
		return nil, ErrQueueFull
	}
	if share > 0 && e.perKey[key]+weight > share && (len(reqs) > 1 || e.perKey[key] > 0) {
		e.mu.Unlock()
		return nil, ErrKeyQueueFull
	}
	e.queued += len(reqs)
	if share > 0 {
		if e.perKey == nil {
			e.perKey = map[string]int{}
		}
		e.perKey[key] += weight
	}
	e.mu.Unlock()
	for i, h := range hs {
		select {
		case e.submit <- h:
		case <-e.closed:
			for _, h := range hs[i:] {
				e.dequeue(h)
			}
			return nil, ErrClosed
		}
	}
	return hs, nil
}

// kvNeed is a number of KV blocks: of the cache, and of its sliding layers' cache (a model
// mixing global and sliding-window layers; 0 otherwise).
type kvNeed struct{ main, window int }

func (a kvNeed) add(b kvNeed) kvNeed { return kvNeed{a.main + b.main, a.window + b.window} }
func (a kvNeed) sub(b kvNeed) kvNeed { return kvNeed{a.main - b.main, a.window - b.window} }

// fits reports whether need blocks fit beside the reserved ones, in each cache.
func (e *Engine) fits(reserved, need kvNeed) bool {
	t := reserved.add(need)
	if t.main > e.kv.NumBlocks() {
		return false
	}
	w := e.kv.Window()
	return w == nil || t.window <= w.NumBlocks()
}

// blocksFor is how many KV blocks admission reserves for req, which Submit accepted.
func (e *Engine) blocksFor(req *Request) kvNeed {
	need, _ := e.admissionNeed(req)
	return need
}

// admissionNeed is how many KV blocks admission reserves for req: all its choices may need
// at their longest; a sliding layers' cache holds at most a window's blocks per sequence.
// ok is false when the request cannot fit the cache whatever else runs, found before any
// product that could overflow (n and max_tokens come from the client).
func (e *Engine) admissionNeed(req *Request) (need kvNeed, ok bool) {
	window := -1
	if w := e.kv.Window(); w != nil {
		window = w.NumBlocks()
	}
	return blocksNeeded(len(req.Prompt), req.N, req.MaxTokens, req.Beam != nil, e.opts.BlockSize, e.kv.NumBlocks(), e.windowBlocks, window)
}

// blocksNeeded is admissionNeed's arithmetic: a prompt of promptLen tokens, n choices of up
// to maxTokens each (beam: n beams), blocks of bs positions, a cache of blocks blocks and,
// when windowBlocks > 0, windowBlocks at most per sequence in a sliding layers' cache of
// window blocks (window < 0: no such cache to fit). Every operand is compared with the cache's size before it is
// added or multiplied, so no value wraps and ok is false exactly when the need exceeds a
// cache.
func blocksNeeded(promptLen, n, maxTokens int, beam bool, bs, blocks, windowBlocks, window int) (need kvNeed, ok bool) {
	if promptLen < 0 || n < 1 || maxTokens < 0 || bs < 1 || blocks < 0 {
		return kvNeed{}, false
	}
	// A cache of blocks blocks holds blocks·bs positions (no wrap: blocks and bs are the
	// engine's, bounded by memory); a prompt or an output longer than that never fits.
	capacity := blocks
	if capacity > math.MaxInt/bs {
		capacity = math.MaxInt / bs
	}
	capacity *= bs
	if promptLen > capacity || maxTokens > capacity {
		return kvNeed{}, false
	}
	total := promptLen/bs + maxTokens/bs + (promptLen%bs+maxTokens%bs+bs-1)/bs // ceil((p+m)/bs), ≤ 2·blocks+1
	seqs := 1
	if n == 1 && !beam {
		// One sequence, never forked: its own blocks and the full cached prefix blocks it
		// starts from (never written, so never copied).
		need.main = total
	} else {
		if n > blocks {
			return kvNeed{}, false // each choice needs a block of its own
		}
		if beam {
			n *= 2 // old and new beams overlap while a step's beams are forked
		}
		per := maxTokens/bs + (maxTokens%bs+bs-1)/bs + 1 // ≤ blocks+2
		prompt := promptLen/bs + (promptLen%bs+bs-1)/bs  // ≤ blocks
		if n > (blocks-prompt)/per {
			return kvNeed{}, false
		}
		need.main = prompt + n*per
		seqs = n + 1
	}
	if need.main > blocks {
		return kvNeed{}, false
	}
	if windowBlocks > 0 {
		each := min(total+1, windowBlocks)
		if window >= 0 && seqs > window/each {
			return kvNeed{}, false
		}
		need.window = seqs * each
	}
	return need, true
}

// choice is one sequence being generated.
type choice struct {
	h        *Handle
	index    int
	seq      *kvcache.Sequence
	sampler  *sample.Sampler
	output   []int
	prefill  int // prompt tokens already in the cache (parent only)
	finished bool
	beam     *beamInfo // beam search only
	guide    Guide     // structured outputs only
	mask     []uint64
	spec     *Speculative // speculative decoding only
	// promptLPs gathers the prompt's logprobs over its prefill chunks (PromptLogprobs >= 0).
	promptLPs []PromptLogprob
	last      time.Time // when its last token came (Options.Observer only)
}

// running is one admitted request.
type running struct {
	h        *Handle
	choices  []*choice
	reserved kvNeed
	admitted time.Time
	hashes   []kvcache.BlockHash // the prompt's full blocks, for the prefix cache
	beams    *beamState          // beam search only
}

// sched is the scheduler loop's state: requests waiting for admission, the running ones,
// and the KV blocks reserved for them.
type sched struct {
	waiting  []*Handle
	active   []*running
	reserved kvNeed
	nRunning int // choices in the running batch
	lastLog  time.Time
	genSince int64
}

// batch is one forward pass: a step per choice that decodes or prefills.
type batch struct {
	steps     []model.Step
	owners    []*choice
	isPrefill []bool
	drafts    [][]int // speculative proposals fed after a decode step's token
}

// keptLogits is the largest logits buffer the loop keeps from one pass to the next (4 MiB:
// four sequences of Gemma 3's 262,144 tokens, twenty of SmolLM2's 49,152).
const keptLogits = 1 << 20

// loop runs the engine: each turn it takes new requests, admits what fits, ends cancelled
// and stopped choices, builds a batch, runs it and applies its outputs.
func (e *Engine) loop() {
	defer close(e.done)
	s := &sched{lastLog: time.Now()}
	for {
		if !e.collect(s) {
			return
		}
		e.admit(s)
		e.collectStops(s)
		s.active = e.retire(s.active, &s.reserved)
		if len(s.active) == 0 {
			continue
		}
		b := e.buildBatch(s.active)
		if len(b.steps) == 0 {
			continue
		}
		stepStart := time.Now()
		out, err := e.m.ForwardInto(b.steps, &e.logits)
		if err != nil {
			// Reservation makes this unreachable; fail the batch's requests rather than spin.
			e.log.Error("inference: forward pass failed", "err", err)
			for _, r := range s.active {
				e.finishAll(r, "abort")
			}
			s.active = e.retire(s.active, &s.reserved)
			continue
		}
		e.statsMu.Lock()
		e.stats.Steps++
		e.statsMu.Unlock()
		e.applyOutputs(s.active, b, out)
		e.observeStep(stepStart, b)
		if cap(e.logits) > keptLogits {
			e.logits = nil
		}
		s.active = e.retire(s.active, &s.reserved)
		e.report(s)
	}
}

// collect takes new submissions, blocking while the engine is idle, and drops cancelled
// waiting requests; false when the engine is closing (everything is then aborted).
func (e *Engine) collect(s *sched) bool {
	if len(s.active) == 0 && len(s.waiting) == 0 {
		select {
		case h := <-e.submit:
			s.waiting = append(s.waiting, h)
		case <-e.closed:
			return false
		}
	}
	for {
		select {
		case h := <-e.submit:
			s.waiting = append(s.waiting, h)
		case <-e.closed:
			for _, r := range s.active {
				e.finishAll(r, "abort")
			}
			for _, h := range s.waiting {
				e.dequeue(h)
				close(h.events)
			}
			return false
		default:
			s.waiting = slices.DeleteFunc(s.waiting, func(h *Handle) bool {
				if h.ctx.Err() != nil {
					e.dequeue(h)
					close(h.events)
					return true
				}
				return false
			})
			return true
		}
	}
}

// admit moves waiting requests into the running batch, in policy order, while their KV
// blocks can be reserved and batch slots allow.
func (e *Engine) admit(s *sched) {
	if e.opts.Policy == "priority" {
		slices.SortStableFunc(s.waiting, func(a, b *Handle) int { return a.req.Priority - b.req.Priority })
	}
	s.nRunning = 0
	for _, r := range s.active {
		s.nRunning += len(r.choices)
	}
	for len(s.waiting) > 0 {
		h := s.waiting[0]
		need := e.blocksFor(h.req)
		if !e.fits(s.reserved, need) || s.nRunning+h.req.N > e.opts.MaxRunning && s.nRunning > 0 {
			break
		}
		s.waiting = s.waiting[1:]
		e.dequeue(h)
		s.reserved = s.reserved.add(need)
		s.nRunning += h.req.N
		parent := &choice{h: h, index: 0, seq: e.kv.NewSequence(), sampler: sample.New(h.req.Params), spec: e.speculation(h.req)}
		if h.req.Guide != nil {
			parent.guide = h.req.Guide.NewGuide()
		}
		r := &running{h: h, choices: []*choice{parent}, reserved: need, admitted: time.Now()}
		if h.req.Beam != nil {
			r.beams = &beamState{}
			parent.beam = &beamInfo{}
		}
		e.usePrefixCache(r)
		s.active = append(s.active, r)
	}
}

// collectStops ends the choices of cancelled requests ("abort") and those a caller stopped
// (Handle.Stop).
func (e *Engine) collectStops(s *sched) {
	for _, r := range s.active {
		if r.h.ctx.Err() != nil {
			e.finishAll(r, "abort")
			continue
		}
	stops:
		for {
			select {
			case st := <-r.h.stops:
				for _, c := range r.choices {
					if c.index == st.choice && !c.finished {
						e.finish(c, "stop", st.reason)
					}
				}
			default:
				break stops
			}
		}
	}
}

// buildBatch puts decodes first, then prefill chunks within the token budget.
func (e *Engine) buildBatch(active []*running) batch {
	budget := e.opts.MaxBatchTokens
	var b batch
	for _, r := range active {
		if r.beams != nil {
			live := 0
			for _, c := range r.choices {
				if !c.finished && c.prefill >= len(r.h.req.Prompt) {
					live++
				}
			}
			if live > budget {
				continue // a beam step extends every beam at once
			}
		}
		for _, c := range r.choices {
			if c.finished || c.prefill < len(r.h.req.Prompt) || budget == 0 {
				continue
			}
			last := c.output[len(c.output)-1]
			if d := e.draft(c, budget); len(d) > 0 {
				b.add(model.Step{Seq: c.seq, Tokens: append([]int{last}, d...), LogitsAt: allIdx(len(d) + 1), Adapter: r.h.req.Adapter}, c, false)
				b.drafts[len(b.drafts)-1] = d
				budget -= len(d) + 1
				continue
			}
			b.add(model.Step{Seq: c.seq, Tokens: []int{last}, LogitsAt: []int{0}, Adapter: r.h.req.Adapter}, c, false)
			budget--
		}
	}
	for _, r := range active {
		c := r.choices[0]
		p := r.h.req.Prompt
		if c.finished || c.prefill >= len(p) || budget == 0 {
			continue
		}
		n := min(budget, len(p)-c.prefill)
		st := model.Step{Seq: c.seq, Tokens: p[c.prefill : c.prefill+n], Adapter: r.h.req.Adapter}
		if r.h.req.PromptLogprobs >= 0 {
			st.LogitsAt = allIdx(n)
		} else if c.prefill+n == len(p) {
			st.LogitsAt = []int{n - 1}
		}
		b.add(st, c, true)
		budget -= n
	}
	return b
}

func (b *batch) add(st model.Step, c *choice, prefill bool) {
	b.steps = append(b.steps, st)
	b.owners = append(b.owners, c)
	b.isPrefill = append(b.isPrefill, prefill)
	b.drafts = append(b.drafts, nil)
}

// applyOutputs takes a forward pass's logits: prefill progress (and prompt logprobs), the
// prompt's blocks into the prefix cache and the other choices forked when a prompt is done,
// then a sampled token for every choice (beams step together).
func (e *Engine) applyOutputs(active []*running, b batch, out [][][]float32) {
	beamLogits := map[*running]map[*choice][]float32{}
	for i, st := range b.steps {
		c := b.owners[i]
		req := c.h.req
		if b.isPrefill[i] {
			start := c.prefill
			c.prefill += len(st.Tokens)
			e.statsMu.Lock()
			e.stats.PromptTokens += int64(len(st.Tokens))
			e.statsMu.Unlock()
			if req.PromptLogprobs >= 0 {
				e.promptLogprobs(c, start, st.Tokens, out[i])
			}
			if c.prefill < len(req.Prompt) {
				continue
			}
			logits := out[i][len(out[i])-1]
			r := e.find(active, c.h)
			if r.hashes != nil {
				e.kv.InsertSequence(r.hashes, c.seq)
			}
			if r.beams != nil {
				beamLogits[r] = map[*choice][]float32{c: logits}
				continue
			}
			// Fork the other choices from the prompt's blocks, each with its own sampler.
			for k := 1; k < req.N; k++ {
				ch := &choice{h: c.h, index: k, seq: c.seq.Fork(), sampler: c.sampler.Fork(k), prefill: len(req.Prompt), spec: c.spec}
				if req.Guide != nil {
					ch.guide = req.Guide.NewGuide()
				}
				r.choices = append(r.choices, ch)
			}
			for _, ch := range r.choices {
				e.sampleNext(ch, append([]float32(nil), logits...))
			}
			continue
		}
		if c.beam != nil {
			r := e.find(active, c.h)
			if beamLogits[r] == nil {
				beamLogits[r] = map[*choice][]float32{}
			}
			beamLogits[r][c] = out[i][0]
			continue
		}
		if b.drafts[i] != nil {
			e.verify(c, out[i], b.drafts[i])
			continue
		}
		e.sampleNext(c, out[i][0])
	}
	for r, lg := range beamLogits {
		e.beamStep(r, lg)
	}
}

// report logs the engine's rates every 10 s and updates the counters.
func (e *Engine) report(s *sched) {
	if time.Since(s.lastLog) > 10*time.Second {
		st := e.Stats()
		attrs := []any{"running", s.nRunning, "waiting", len(s.waiting),
			"tokens_per_s", float64(st.GeneratedTokens-s.genSince) / time.Since(s.lastLog).Seconds(),
			"kv_cache_bytes", e.kv.MemoryBytes()}
		if st.Spec.Drafts > 0 {
			attrs = append(attrs, "spec_draft_tokens", st.Spec.DraftTokens, "spec_accepted_tokens", st.Spec.AcceptedTokens)
		}
		e.log.Info("inference", attrs...)
		s.lastLog, s.genSince = time.Now(), st.GeneratedTokens
	}
	e.statsMu.Lock()
	e.stats.Waiting, e.stats.Running = len(s.waiting), s.nRunning
	e.statsMu.Unlock()
}

// usePrefixCache starts r's sequence from the longest cached prefix of its prompt (at least
// one prompt token is always computed, for the logits of the first sample).
func (e *Engine) usePrefixCache(r *running) {
	req := r.h.req
	if e.opts.NoPrefixCache || req.PromptLogprobs >= 0 {
		return
	}
	salt := req.CacheSalt
	if req.Adapter != nil {
		salt += fmt.Sprintf("\x00lora:%d", req.Adapter.CacheID())
	}
	bs := e.opts.BlockSize
	r.hashes = kvcache.HashBlocks(req.Prompt, bs, salt)
	usable := r.hashes
	if n := (len(req.Prompt) - 1) / bs; n < len(usable) {
		usable = usable[:n]
	}
	p := e.kv.LookupPrefix(usable)
	if p.Blocks() == 0 {
		return
	}
	c := r.choices[0]
	c.seq = e.kv.NewSequenceFromPrefix(p, p.Blocks()*bs)
	c.prefill = p.Blocks() * bs
	r.h.CachedTokens = c.prefill
	e.statsMu.Lock()
	e.stats.CachedPromptTokens += int64(c.prefill)
	e.statsMu.Unlock()
}

func allIdx(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// dequeue takes a request out of the waiting queue's counts.
func (e *Engine) dequeue(h *Handle) {
	e.mu.Lock()
	e.queued--
	if n, ok := e.perKey[h.req.Key]; ok {
		if n -= h.req.N; n > 0 {
			e.perKey[h.req.Key] = n
		} else {
			delete(e.perKey, h.req.Key)
		}
	}
	e.mu.Unlock()
}

func (e *Engine) find(active []*running, h *Handle) *running {
	for _, r := range active {
		if r.h == h {
			return r
		}
	}
	return nil
}

// promptLogprobs gathers the logprob of each prompt token given the ones before it, a prefill
// chunk at a time, and sends them all in one event once the prompt's last chunk is done (a
// long prompt, or one sharing a step's token budget, takes several chunks).
func (e *Engine) promptLogprobs(c *choice, start int, tokens []int, logits [][]float32) {
	req := c.h.req
	lps := c.promptLPs
	if start == 0 {
		lps = append(lps[:0], PromptLogprob{Token: req.Prompt[0], Rank: 0})
	}
	for j := range tokens {
		pos := start + j + 1 // the token these logits predict
		if pos >= len(req.Prompt) {
			break
		}
		tok := req.Prompt[pos]
		lp, rank, top := sample.Logprobs(logits[j], tok, req.PromptLogprobs)
		lps = append(lps, PromptLogprob{Token: tok, Logprob: lp, Rank: rank, Top: top})
	}
	c.promptLPs = lps
	if start+len(tokens) >= len(req.Prompt) {
		e.emit(c.h, Event{Choice: -1, PromptLogprobs: lps})
		c.promptLPs = nil
	}
}

// sampleNext samples the next token of c from raw logits and checks stop conditions.
func (e *Engine) sampleNext(c *choice, raw []float32) { e.sampleAt(c, raw, c.seq.Len()) }

// sampleAt samples the token after seqLen cached positions of c (a speculative step caches
// more) and checks stop conditions; it returns the token (-1 when none was sampled).
func (e *Engine) sampleAt(c *choice, raw []float32, seqLen int) int {
	req := c.h.req
	if bad := nonFiniteLogits(raw); bad > 0 {
		// Broken weights (an adapter of training that diverged): nothing can be sampled
		// from NaN. The choice ends with "error", which the API answers as such.
		adapter := ""
		if req.Adapter != nil {
			adapter = req.Adapter.Name
		}
		e.log.Error("inference: non-finite logits; the choice ends with an error", "adapter", adapter,
			"non_finite", bad, "vocab", len(raw), "generated", len(c.output))
		e.finish(c, FinishError, nil)
		return -1
	}
	ev := Event{Choice: c.index, HasToken: true}
	var rawCopy []float32
	if req.Logprobs {
		rawCopy = append([]float32(nil), raw...)
	}
	c.sampler.Process(raw, req.Prompt, c.output)
	if c.guide != nil {
		words := (len(raw) + 63) / 64
		if len(c.mask) != words {
			c.mask = make([]uint64, words)
		}
		clear(c.mask)
		c.guide.Mask(c.mask)
		ninf := float32(math.Inf(-1))
		for i := range raw {
			if c.mask[i>>6]&(1<<(i&63)) == 0 {
				raw[i] = ninf
			}
		}
	}
	tok := c.sampler.Sample(raw)
	ev.Token = tok
	if req.Logprobs {
		ev.Logprob, ev.Rank, ev.Top = sample.Logprobs(rawCopy, tok, req.TopLogprobs)
	}
	c.output = append(c.output, tok)
	if c.h.FirstToken.IsZero() {
		c.h.FirstToken = time.Now()
	}
	e.observeToken(c)
	e.statsMu.Lock()
	e.stats.GeneratedTokens++
	e.statsMu.Unlock()
	switch {
	case !req.IgnoreEOS && slices.Contains(req.Params.EOS, tok):
		ev.Finish = "stop"
	case slices.Contains(req.Params.StopTokenIDs, tok):
		ev.Finish, ev.StopReason = "stop", tok
	case len(c.output) >= req.MaxTokens || seqLen+1 >= e.m.Config.MaxPositionEmbeddings:
		ev.Finish = "length"
	case req.Repetition != nil && len(c.output) >= req.Params.MinTokens && req.Repetition.Repeats(c.output):
		ev.Finish = "repetition"
	}
	if c.guide != nil && ev.Finish == "" {
		if err := c.guide.Accept(tok); err != nil || c.guide.MustEnd() {
			ev.Finish = "stop" // the constraint is complete (or, never expected, violated)
		}
	}
	ev, _ = e.emit(c.h, ev)
	if ev.Finish != "" {
		c.finished = true
		c.seq.Free()
	}
	return tok
}

func (e *Engine) finish(c *choice, reason string, stopReason any) {
	if c.finished {
		return
	}
	c.finished = true
	c.seq.Free()
	e.emit(c.h, Event{Choice: c.index, Finish: reason, StopReason: stopReason})
}

func (e *Engine) finishAll(r *running, reason string) {
	for _, c := range r.choices {
		e.finish(c, reason, nil)
	}
	// Choices not forked yet (still prefilling) finish too.
	for k := len(r.choices); k < r.h.req.N; k++ {
		e.emit(r.h, Event{Choice: k, Finish: reason})
	}
}

// retire removes requests whose choices have all finished, closing their event channels.
func (e *Engine) retire(active []*running, reserved *kvNeed) []*running {
	return slices.DeleteFunc(active, func(r *running) bool {
		forked := len(r.choices) == r.h.req.N
		for _, c := range r.choices {
			if !c.finished {
				return false
			}
		}
		if !forked && r.choices[0].prefill < len(r.h.req.Prompt) && !r.choices[0].finished {
			return false
		}
		*reserved = reserved.sub(r.reserved)
		e.observeDone(r)
		close(r.h.events)
		e.statsMu.Lock()
		e.stats.CompletedRequests++
		e.statsMu.Unlock()
		return true
	})
}

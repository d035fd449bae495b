package inference

import (
	"fmt"
	"slices"
	"time"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
)

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
	// promptLPs gathers the prompt's logprobs over its prefill chunks (Request.PromptLogprobs).
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
	if e.opts.Policy == PolicyPriority {
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
	for i, r := range active {
		c := r.choices[0]
		p := r.h.req.Prompt
		if c.finished || c.prefill >= len(p) || budget == 0 {
			continue
		}
		if e.waitsForPrefix(active[:i], r) {
			continue
		}
		n := min(budget, len(p)-c.prefill)
		st := model.Step{Seq: c.seq, Tokens: p[c.prefill : c.prefill+n], Adapter: r.h.req.Adapter}
		if r.h.req.PromptLogprobs {
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
			if req.PromptLogprobs {
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
	if e.opts.NoPrefixCache || req.PromptLogprobs {
		return
	}
	salt := req.CacheSalt
	if req.Adapter != nil {
		salt += fmt.Sprintf("\x00lora:%d", req.Adapter.CacheID())
	}
	bs := e.opts.BlockSize
	r.hashes = kvcache.HashBlocks(req.Prompt, bs, salt)
	p := e.kv.LookupPrefix(usableBlocks(r.hashes, len(req.Prompt), bs))
	if p.Blocks() > 0 {
		e.startFromPrefix(r, p)
	}
}

// waitsForPrefix decides, for a request whose prompt is not started (none of it computed
// beyond what it took from the prefix cache), whether its prefill waits a step: it does when
// a request admitted before it (earlier) is prefilling the same prompt blocks, more of them
// than the prefix cache holds now, and will be done within about a step (its prompt's rest
// fits a forward pass). That request puts its blocks into the prefix cache when its prompt is
// done; the waiting one then starts from them instead of computing them a second time
// (rollouts of one prompt, submitted together, compute it once). The first request of any
// group never waits, so every group makes progress. When r does not wait, it starts from
// whatever the prefix cache holds now (more than at its admission when another request put
// blocks there since).
func (e *Engine) waitsForPrefix(earlier []*running, r *running) bool {
	c := r.choices[0]
	if r.hashes == nil || c.prefill != r.h.CachedTokens {
		return false
	}
	bs := e.opts.BlockSize
	usable := usableBlocks(r.hashes, len(r.h.req.Prompt), bs)
	held := c.prefill / bs
	if len(usable) <= held {
		return false
	}
	p := e.kv.LookupPrefix(usable)
	for _, o := range earlier {
		oc := o.choices[0]
		if o.hashes == nil || oc.finished || oc.prefill >= len(o.h.req.Prompt) || len(o.h.req.Prompt)-oc.prefill > e.opts.MaxBatchTokens {
			continue
		}
		shared := 0
		for shared < len(usable) && shared < len(o.hashes) && usable[shared] == o.hashes[shared] {
			shared++
		}
		if shared > max(held, p.Blocks()) {
			return true
		}
	}
	if p.Blocks() > held {
		e.startFromPrefix(r, p)
	}
	return false
}

// startFromPrefix makes r's sequence start from the cached prefix p, more of the prompt than
// it holds (nothing of it computed yet beyond its cached blocks).
func (e *Engine) startFromPrefix(r *running, p kvcache.Prefix) {
	c := r.choices[0]
	bs := e.opts.BlockSize
	c.seq.Free()
	c.seq = e.kv.NewSequenceFromPrefix(p, p.Blocks()*bs)
	e.statsMu.Lock()
	e.stats.CachedPromptTokens += int64(p.Blocks()*bs - c.prefill)
	e.statsMu.Unlock()
	c.prefill = p.Blocks() * bs
	r.h.CachedTokens = c.prefill
}

// usableBlocks is the part of a prompt's full-block hashes a request may start from: at
// least one prompt token is always computed, for the logits of the first sample.
func usableBlocks(hashes []kvcache.BlockHash, promptLen, bs int) []kvcache.BlockHash {
	if n := (promptLen - 1) / bs; n < len(hashes) {
		return hashes[:n]
	}
	return hashes
}

func allIdx(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func (e *Engine) find(active []*running, h *Handle) *running {
	for _, r := range active {
		if r.h == h {
			return r
		}
	}
	return nil
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

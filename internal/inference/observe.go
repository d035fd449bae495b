package inference

import "time"

// Observer is told the latencies of an engine's requests, what vLLM's latency histograms
// hold: time to first token (from submission), the time between a choice's tokens, and each
// request's end-to-end latency with its prompt and generated tokens. Its methods run on the
// engine's goroutine and must be quick (a histogram's observation).
type Observer interface {
	FirstToken(ttft time.Duration)
	InterToken(d time.Duration)
	Finished(e2e time.Duration, promptTokens, generatedTokens int)
}

// observeToken reports a token of c: the request's first token, or the time since c's last.
func (e *Engine) observeToken(c *choice) {
	o := e.opts.Observer
	if o == nil {
		return
	}
	now := time.Now()
	switch {
	case !c.last.IsZero():
		o.InterToken(now.Sub(c.last))
	case c.index == 0:
		o.FirstToken(now.Sub(c.h.Queued))
	}
	c.last = now
}

// observeDone reports a request that finished.
func (e *Engine) observeDone(r *running) {
	o := e.opts.Observer
	if o == nil {
		return
	}
	gen := 0
	for _, c := range r.choices {
		gen += len(c.output)
	}
	o.Finished(time.Since(r.h.Queued), len(r.h.req.Prompt), gen)
}

// KVCacheUsage is the fraction of the KV cache's blocks in use by sequences (vLLM's
// kv_cache_usage_perc): blocks only the prefix cache holds count as free, as they do there.
func (e *Engine) KVCacheUsage() float64 {
	n := e.kv.NumBlocks()
	if n <= 0 {
		return 0
	}
	return 1 - float64(e.kv.FreeBlocks())/float64(n)
}

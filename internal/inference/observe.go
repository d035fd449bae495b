package inference

import (
	"context"
	"time"
)

// Observer is told the latencies of an engine's requests, what vLLM's latency histograms
// hold: time to first token (from submission), the time between a choice's tokens, and each
// request's end-to-end latency with its prompt and generated tokens. Its methods run on the
// engine's goroutine and must be quick (a histogram's observation).
type Observer interface {
	FirstToken(ttft time.Duration)
	InterToken(d time.Duration)
	Finished(e2e time.Duration, promptTokens, generatedTokens int)
}

// StepObserver is an Observer also told of each engine step (a forward pass and its
// sampling): when it started, how long it took, its sequences, the tokens it ran and how
// many of its sequences were prefilling.
type StepObserver interface {
	Step(start time.Time, d time.Duration, sequences, tokens, prefills int)
}

// RequestObserver is an Observer also told of each finished request in its context (the
// request's own: a trace's span there), with its times.
type RequestObserver interface {
	Request(ctx context.Context, t RequestTimes)
}

// RequestTimes are a finished request's times and sizes.
type RequestTimes struct {
	Queued, Admitted, FirstToken, Finished time.Time // FirstToken zero: none came
	PromptTokens, GeneratedTokens, Choices int
}

// Tee is an Observer telling each of obs (nil ones left out), and their step and request
// observers.
func Tee(obs ...Observer) Observer {
	var t tee
	for _, o := range obs {
		if o != nil {
			t = append(t, o)
		}
	}
	switch len(t) {
	case 0:
		return nil
	case 1:
		return t[0]
	}
	return t
}

type tee []Observer

func (t tee) FirstToken(d time.Duration) {
	for _, o := range t {
		o.FirstToken(d)
	}
}

func (t tee) InterToken(d time.Duration) {
	for _, o := range t {
		o.InterToken(d)
	}
}

func (t tee) Finished(e2e time.Duration, p, g int) {
	for _, o := range t {
		o.Finished(e2e, p, g)
	}
}

func (t tee) Step(start time.Time, d time.Duration, seqs, tokens, prefills int) {
	for _, o := range t {
		if so, ok := o.(StepObserver); ok {
			so.Step(start, d, seqs, tokens, prefills)
		}
	}
}

func (t tee) Request(ctx context.Context, rt RequestTimes) {
	for _, o := range t {
		if ro, ok := o.(RequestObserver); ok {
			ro.Request(ctx, rt)
		}
	}
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

// observeStep reports a step that started at start.
func (e *Engine) observeStep(start time.Time, b batch) {
	so, ok := e.opts.Observer.(StepObserver)
	if !ok {
		return
	}
	tokens, prefills := 0, 0
	for i, st := range b.steps {
		tokens += len(st.Tokens)
		if i < len(b.isPrefill) && b.isPrefill[i] {
			prefills++
		}
	}
	so.Step(start, time.Since(start), len(b.steps), tokens, prefills)
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
	now := time.Now()
	o.Finished(now.Sub(r.h.Queued), len(r.h.req.Prompt), gen)
	if ro, ok := o.(RequestObserver); ok {
		ro.Request(r.h.ctx, RequestTimes{Queued: r.h.Queued, Admitted: r.admitted, FirstToken: r.h.FirstToken, Finished: now,
			PromptTokens: len(r.h.req.Prompt), GeneratedTokens: gen, Choices: r.h.req.N})
	}
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

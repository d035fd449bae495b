package inference

import (
	"context"
	"fmt"
	"time"

	"github.com/honeai/hone/internal/sample"
)

// FinishError ends a choice whose logits were not finite (NaN or +Inf: broken weights).
const FinishError = "error"

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
		if req.Priority != 0 && e.opts.Policy != PolicyPriority {
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

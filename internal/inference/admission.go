package inference

import (
	"math"
)

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

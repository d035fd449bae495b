package inference

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/honeai/hone/internal/kvcache"
	"strings"
)

// Speculative configures speculative decoding by prompt lookup, vLLM's "ngram" method: no
// second model; for each running sequence the longest suffix n-gram of its prompt and output
// (PromptLookupMax tokens down to PromptLookupMin) that occurred earlier proposes the
// NumSpeculativeTokens tokens that followed it, and one forward pass of the sequence's last
// token and the proposals verifies them all.
//
// Verification samples each position from the target distribution (after every logits
// processor, penalties, temperature, top-k/top-p/min-p and any structured-output guide, with
// the tokens accepted before it in the context) and accepts the proposal while the sample
// equals it; the first sample that differs (or the one after the last proposal, the bonus
// token) is emitted and ends the step. With the draft a point mass on proposal x this is the
// speculative-sampling rule: x is accepted with probability p(x), and otherwise the sample
// is distributed as p with x removed and renormalised, so the output distribution is the
// target's. Each emitted token consumes the sampler's generator exactly as plain decoding
// does, so greedy and seeded requests produce the tokens plain decoding produces (up to the
// float rounding of a several-token forward pass, which the tests bound).
type Speculative struct {
	Method               string `json:"method"`
	NumSpeculativeTokens int    `json:"num_speculative_tokens"`
	PromptLookupMax      int    `json:"prompt_lookup_max"`
	PromptLookupMin      int    `json:"prompt_lookup_min"`
}

// Limits of a speculative configuration.
const (
	MaxSpeculativeTokens = kvcache.WindowRollback // a windowed model's KV keeps this much behind its window
	MaxPromptLookup      = 128
)

// SpecError is a bad speculative configuration; Field names the offending field.
type SpecError struct {
	Field string
	Msg   string
}

func (e *SpecError) Error() string { return e.Msg }

// ParseSpeculative reads a speculative configuration in vLLM's --speculative-config JSON
// form ({"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": N,
// "prompt_lookup_min": M}) with vLLM's defaults: without either bound both are 5, with one
// the other equals it. Errors are *SpecError.
func ParseSpeculative(raw []byte) (*Speculative, error) {
	var f struct {
		Method               *string `json:"method"`
		NumSpeculativeTokens *int    `json:"num_speculative_tokens"`
		PromptLookupMax      *int    `json:"prompt_lookup_max"`
		PromptLookupMin      *int    `json:"prompt_lookup_min"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		field := ""
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if _, name, ok := strings.Cut(msg, "unknown field "); ok {
			field = strings.Trim(name, `"`)
		} else if te, ok := err.(*json.UnmarshalTypeError); ok {
			field = te.Field
		}
		return nil, &SpecError{Field: field, Msg: "the speculative config must be an object with method, num_speculative_tokens, prompt_lookup_max and prompt_lookup_min: " + msg}
	}
	if dec.More() {
		return nil, &SpecError{Msg: "the speculative config must be one JSON object"}
	}
	s := &Speculative{}
	if f.Method == nil {
		return nil, &SpecError{Field: "method", Msg: `method is required: Hone speculates by prompt lookup, "ngram"`}
	}
	s.Method = *f.Method
	if s.Method == "[ngram]" {
		s.Method = "ngram"
	}
	if s.Method != "ngram" {
		return nil, &SpecError{Field: "method", Msg: fmt.Sprintf(`unsupported speculative method %q: Hone speculates by prompt lookup only ("ngram"); draft models, EAGLE, Medusa and MTP are not implemented`, *f.Method)}
	}
	if f.NumSpeculativeTokens == nil {
		return nil, &SpecError{Field: "num_speculative_tokens", Msg: "num_speculative_tokens is required for the ngram method"}
	}
	s.NumSpeculativeTokens = *f.NumSpeculativeTokens
	switch {
	case f.PromptLookupMax == nil && f.PromptLookupMin == nil:
		s.PromptLookupMax, s.PromptLookupMin = 5, 5
	case f.PromptLookupMin == nil:
		s.PromptLookupMax, s.PromptLookupMin = *f.PromptLookupMax, *f.PromptLookupMax
	case f.PromptLookupMax == nil:
		s.PromptLookupMax, s.PromptLookupMin = *f.PromptLookupMin, *f.PromptLookupMin
	default:
		s.PromptLookupMax, s.PromptLookupMin = *f.PromptLookupMax, *f.PromptLookupMin
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// Validate checks the ranges; the error is a *SpecError naming the field.
func (s *Speculative) Validate() error {
	switch {
	case s.Method != "ngram":
		return &SpecError{Field: "method", Msg: fmt.Sprintf(`unsupported speculative method %q: Hone speculates by prompt lookup only ("ngram")`, s.Method)}
	case s.NumSpeculativeTokens < 1 || s.NumSpeculativeTokens > MaxSpeculativeTokens:
		return &SpecError{Field: "num_speculative_tokens", Msg: fmt.Sprintf("num_speculative_tokens must be in [1, %d], got %d", MaxSpeculativeTokens, s.NumSpeculativeTokens)}
	case s.PromptLookupMax < 1 || s.PromptLookupMax > MaxPromptLookup:
		return &SpecError{Field: "prompt_lookup_max", Msg: fmt.Sprintf("prompt_lookup_max must be in [1, %d], got %d", MaxPromptLookup, s.PromptLookupMax)}
	case s.PromptLookupMin < 1 || s.PromptLookupMin > MaxPromptLookup:
		return &SpecError{Field: "prompt_lookup_min", Msg: fmt.Sprintf("prompt_lookup_min must be in [1, %d], got %d", MaxPromptLookup, s.PromptLookupMin)}
	case s.PromptLookupMin > s.PromptLookupMax:
		return &SpecError{Field: "prompt_lookup_min", Msg: fmt.Sprintf("prompt_lookup_min=%d must be <= prompt_lookup_max=%d", s.PromptLookupMin, s.PromptLookupMax)}
	}
	return nil
}

// SpecStats count speculative decoding's work, as vLLM's spec-decode metrics: steps that
// proposed tokens (drafts), tokens proposed, and proposed tokens accepted.
type SpecStats struct {
	Drafts, DraftTokens, AcceptedTokens int64
}

func (s *SpecStats) add(drafted, accepted int) {
	s.Drafts++
	s.DraftTokens += int64(drafted)
	s.AcceptedTokens += int64(accepted)
}

// speculation is the configuration that applies to r: the request's own, else the
// engine's; none for beam search (beams step together from one set of logits each).
func (e *Engine) speculation(req *Request) *Speculative {
	if req.Beam != nil || req.NoSpeculative {
		return nil
	}
	if req.Speculative != nil {
		return req.Speculative
	}
	return e.opts.Speculative
}

// ProposeNgram returns up to k tokens that followed an earlier occurrence of the longest
// suffix of prompt+output of between minN and maxN tokens (none when no such suffix occurred
// before): the most recent occurrence followed by k tokens, else the one followed by the
// most (in a run of one repeated token the latest occurrence is followed by one token only).
func ProposeNgram(prompt, output []int, minN, maxN, k int) []int {
	n := len(prompt) + len(output)
	at := func(i int) int {
		if i < len(prompt) {
			return prompt[i]
		}
		return output[i-len(prompt)]
	}
	if k <= 0 {
		return nil
	}
	for size := min(maxN, n-1); size >= minN; size-- {
		// The suffix is at [n-size, n); look for it at [i, i+size) with i+size < n,
		// latest first.
		best := -1
		for i := n - size - 1; i >= 0; i-- {
			match := true
			for j := size - 1; j >= 0; j-- {
				if at(i+j) != at(n-size+j) {
					match = false
					break
				}
			}
			if !match {
				continue
			}
			best = i
			if i+size+k <= n {
				break
			}
		}
		if best < 0 {
			continue
		}
		end := min(best+size+k, n)
		out := make([]int, 0, end-best-size)
		for p := best + size; p < end; p++ {
			out = append(out, at(p))
		}
		return out
	}
	return nil
}

// draft proposes c's speculative tokens for the next step: at most the configured number,
// leaving room for the bonus token within max_tokens, the model's context and the batch's
// token budget.
func (e *Engine) draft(c *choice, budget int) []int {
	sp := c.spec
	if sp == nil {
		return nil
	}
	req := c.h.req
	k := sp.NumSpeculativeTokens
	if req.MaxTokens > 0 {
		k = min(k, req.MaxTokens-len(c.output)-1)
	}
	// The step writes positions seq.Len() .. seq.Len()+k; the last token emitted must
	// still leave the length check of plain decoding to end the choice.
	k = min(k, e.m.Config.MaxPositionEmbeddings-c.seq.Len()-2, budget-1)
	if k <= 0 {
		return nil
	}
	return ProposeNgram(req.Prompt, c.output, sp.PromptLookupMin, sp.PromptLookupMax, k)
}

// verify takes the logits of a speculative step (the last token and the proposals) and
// emits the accepted proposals and the token after them, then rolls the cache back to the
// tokens kept.
func (e *Engine) verify(c *choice, logits [][]float32, proposals []int) {
	base := c.seq.Len() - len(proposals) - 1 // positions before this step
	accepted := 0
	for j := 0; j <= len(proposals); j++ {
		tok := e.sampleAt(c, logits[j], base+1+j)
		ok := j < len(proposals) && tok == proposals[j]
		if ok {
			accepted++
		}
		if c.finished || !ok {
			break
		}
	}
	if !c.finished {
		// Keep the step's first token and the accepted proposals; the last emitted token
		// is fed by the next step.
		c.seq.Truncate(base + 1 + accepted)
	}
	c.h.Spec.add(len(proposals), accepted)
	e.statsMu.Lock()
	e.stats.Spec.add(len(proposals), accepted)
	e.statsMu.Unlock()
}

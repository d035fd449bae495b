package inference

import (
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
)

// Request is one chat completion's generation work.
type Request struct {
	ID        string
	Prompt    []int
	Params    sample.Params
	N         int // parallel samples (default 1)
	MaxTokens int // most tokens of each choice (one is always sampled)
	IgnoreEOS bool
	Adapter   *model.LoRA
	Priority  int
	// Key names who submitted it (an API key's id) for the per-key share of the waiting
	// queue (Options.MaxQueuePerKey); "" is a key of its own.
	Key string
	// Logprobs: report each sampled token's logprob and TopLogprobs alternatives.
	Logprobs    bool
	TopLogprobs int
	// PromptLogprobs: report the logprob of every prompt token and PromptTopLogprobs
	// alternatives, in one event before the first token. Such a request computes its whole
	// prompt (no prefix cache).
	PromptLogprobs    bool
	PromptTopLogprobs int
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

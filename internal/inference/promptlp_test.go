package inference

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestPromptLogprobsOverChunks: a prompt prefilled in several chunks (a small step budget, and
// another request sharing it) gets its prompt logprobs in one event, for every prompt token,
// equal to those of a prompt prefilled at once; and with the events of both requests read one
// request after the other (as a slow client would), neither stalls the engine.
func TestPromptLogprobsOverChunks(t *testing.T) {
	m := tiny(t)
	prompt := make([]int, 45)
	for i := range prompt {
		prompt[i] = 3 + (i*7+7)%60
	}
	lps := func(e *Engine) [][]PromptLogprob {
		defer e.Close()
		var hs []*Handle
		for _, n := range []int{70, 30} {
			h, err := e.Submit(context.Background(), &Request{Prompt: prompt, Params: greedy(), MaxTokens: n, IgnoreEOS: true, PromptLogprobs: true, PromptTopLogprobs: 2})
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
		var out [][]PromptLogprob
		for i, h := range hs {
			events, tokens := 0, 0
			timeout := time.After(20 * time.Second)
		loop:
			for {
				select {
				case ev, ok := <-h.Events():
					if !ok {
						break loop
					}
					if ev.PromptLogprobs != nil {
						events++
						out = append(out, ev.PromptLogprobs)
					}
					if ev.HasToken {
						tokens++
					}
				case <-timeout:
					t.Fatalf("request %d stalled after %d tokens", i, tokens)
				}
			}
			if events != 1 {
				t.Fatalf("request %d: %d prompt-logprob events, want 1", i, events)
			}
		}
		return out
	}
	chunked := lps(New(m, Options{BlockSize: 4, MaxBatchTokens: 16, NoPrefixCache: true}))
	whole := lps(New(m, Options{BlockSize: 4, MaxBatchTokens: 512, NoPrefixCache: true}))
	for r := range chunked {
		if len(chunked[r]) != len(prompt) {
			t.Fatalf("request %d: %d prompt logprobs for %d prompt tokens", r, len(chunked[r]), len(prompt))
		}
		for i, lp := range chunked[r] {
			w := whole[r][i]
			if lp.Token != prompt[i] || lp.Token != w.Token || lp.Rank != w.Rank || math.Abs(float64(lp.Logprob-w.Logprob)) > 1e-4 {
				t.Fatalf("request %d, prompt token %d: %+v chunked, %+v at once", r, i, lp, w)
			}
		}
	}
}

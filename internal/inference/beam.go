package inference

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/honeai/hone/internal/sample"
)

// Beam asks for beam search (vLLM's use_beam_search): Width beams (the request's n), each
// step extending every live beam by its 2·Width most likely next tokens (raw log-softmax of
// the model's logits) and keeping the Width best; a beam that picks an end-of-sequence token
// completes. The best Width of all completed and live beams are the choices, ranked by
// cum_logprob / length^LengthPenalty, where length counts prompt and output tokens (not the
// end-of-sequence token). Nothing is streamed before the search ends.
type Beam struct {
	Width         int
	LengthPenalty float64
}

// beamSeq is a completed beam.
type beamSeq struct {
	tokens   []int
	logprobs []float32
	tops     [][]sample.TopLogprob
	cum      float64
	finish   string
}

type beamState struct {
	completed []beamSeq
}

// beam fields of a choice being searched: its cumulative logprob and per-token logprobs.
type beamInfo struct {
	cum      float64
	logprobs []float32
	tops     [][]sample.TopLogprob
}

func (e *Engine) beamScore(req *Request, outLen int, cum float64) float64 {
	return cum / math.Pow(float64(len(req.Prompt)+outLen), req.Beam.LengthPenalty)
}

// beamStep extends the live beams of r (the choices, with the logits each got this step) and
// keeps the best Width; it finishes the request when no beam is left to extend.
func (e *Engine) beamStep(r *running, logits map[*choice][]float32) {
	req := r.h.req
	w := req.Beam.Width
	type cand struct {
		parent *choice
		tok    int
		lp     float32
		top    []sample.TopLogprob
		cum    float64
		score  float64
	}
	for _, c := range r.choices {
		if raw, ok := logits[c]; ok && !c.finished {
			if bad := nonFiniteLogits(raw); bad > 0 {
				e.beamFail(r, bad, len(raw))
				return
			}
		}
	}
	var cands []cand
	for _, c := range r.choices {
		raw, ok := logits[c]
		if !ok || c.finished {
			continue
		}
		lps := logSoftmax(raw)
		idx := topK(lps, 2*w)
		for _, t := range idx {
			var top []sample.TopLogprob
			if req.Logprobs {
				_, _, top = sample.Logprobs(raw, t, req.TopLogprobs)
			}
			cum := c.beam.cum + float64(lps[t])
			if !req.IgnoreEOS && slices.Contains(req.Params.EOS, t) {
				r.beams.completed = append(r.beams.completed, beamSeq{tokens: slices.Clone(c.output), logprobs: slices.Clone(c.beam.logprobs),
					tops: slices.Clone(c.beam.tops), cum: cum, finish: "stop"})
				continue
			}
			cands = append(cands, cand{parent: c, tok: t, lp: lps[t], top: top, cum: cum, score: e.beamScore(req, len(c.output)+1, cum)})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].score > cands[j].score })
	if len(cands) > w {
		cands = cands[:w]
	}
	var next []*choice
	for i, cd := range cands {
		p := cd.parent
		nc := &choice{h: r.h, index: i, seq: p.seq.Fork(), prefill: len(req.Prompt),
			output: append(slices.Clone(p.output), cd.tok),
			beam:   &beamInfo{cum: cd.cum, logprobs: append(slices.Clone(p.beam.logprobs), cd.lp), tops: append(slices.Clone(p.beam.tops), cd.top)}}
		next = append(next, nc)
	}
	for _, c := range r.choices {
		if !c.finished {
			c.finished = true
			c.seq.Free()
		}
	}
	r.choices = next
	e.statsMu.Lock()
	e.stats.GeneratedTokens += int64(len(next))
	e.statsMu.Unlock()
	done := len(next) == 0
	for _, c := range next {
		if len(c.output) >= req.MaxTokens || c.seq.Len()+1 >= e.m.Config.MaxPositionEmbeddings {
			done = true
		}
	}
	if done {
		e.beamFinish(r)
	}
}

// beamFinish ranks completed and live beams and sends the best Width as the choices.
func (e *Engine) beamFinish(r *running) {
	req := r.h.req
	all := r.beams.completed
	for _, c := range r.choices {
		all = append(all, beamSeq{tokens: c.output, logprobs: c.beam.logprobs, tops: c.beam.tops, cum: c.beam.cum, finish: "length"})
		c.finished = true
		c.seq.Free()
	}
	sort.SliceStable(all, func(i, j int) bool {
		return e.beamScore(req, len(all[i].tokens), all[i].cum) > e.beamScore(req, len(all[j].tokens), all[j].cum)
	})
	if len(all) > req.Beam.Width {
		all = all[:req.Beam.Width]
	}
	if r.h.FirstToken.IsZero() {
		r.h.FirstToken = time.Now()
	}
	r.choices = nil
	for i, b := range all {
		for k, t := range b.tokens {
			ev := Event{Choice: i, Token: t, HasToken: true, Logprob: b.logprobs[k]}
			if req.Logprobs {
				ev.Top = b.tops[k]
			}
			e.emit(r.h, ev)
		}
		e.emit(r.h, Event{Choice: i, Finish: b.finish})
		r.choices = append(r.choices, &choice{h: r.h, index: i, finished: true, prefill: len(req.Prompt)})
	}
	// Fewer beams than choices (every candidate ended at once): the rest end empty.
	for i := len(all); i < req.N; i++ {
		e.emit(r.h, Event{Choice: i, Finish: "stop"})
		r.choices = append(r.choices, &choice{h: r.h, index: i, finished: true, prefill: len(req.Prompt)})
	}
}

// beamFail ends a search whose logits were not finite (broken weights: nothing can be ranked
// by NaN), as sampleAt ends a sampled choice: every choice ends with FinishError, no token.
func (e *Engine) beamFail(r *running, bad, vocab int) {
	req := r.h.req
	adapter := ""
	if req.Adapter != nil {
		adapter = req.Adapter.Name
	}
	e.log.Error("inference: non-finite logits in beam search; the request ends with an error", "adapter", adapter,
		"non_finite", bad, "vocab", vocab)
	for _, c := range r.choices {
		if !c.finished {
			c.finished = true
			c.seq.Free()
		}
	}
	r.choices = nil
	for i := 0; i < req.N; i++ {
		e.emit(r.h, Event{Choice: i, Finish: FinishError})
		r.choices = append(r.choices, &choice{h: r.h, index: i, finished: true, prefill: len(req.Prompt)})
	}
}

func logSoftmax(raw []float32) []float32 {
	mx := float32(math.Inf(-1))
	for _, v := range raw {
		mx = max(mx, v)
	}
	sum := 0.0
	for _, v := range raw {
		sum += math.Exp(float64(v - mx))
	}
	lse := float64(mx) + math.Log(sum)
	out := make([]float32, len(raw))
	for i, v := range raw {
		out[i] = float32(float64(v) - lse)
	}
	return out
}

// topK returns the indexes of the k largest values, largest first (ties: lower index first).
func topK(v []float32, k int) []int {
	k = min(k, len(v))
	idx := make([]int, 0, k+1)
	for i, x := range v {
		if len(idx) == k && x <= v[idx[k-1]] {
			continue
		}
		pos := sort.Search(len(idx), func(j int) bool { return v[idx[j]] < x })
		idx = slices.Insert(idx, pos, i)
		if len(idx) > k {
			idx = idx[:k]
		}
	}
	return idx
}

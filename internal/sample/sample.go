// Package sample turns a model's next-token logits into a token the way vLLM's V1 sampler
// does: logits processors in vLLM's order, then greedy or seeded random sampling, and log
// probabilities of the raw distribution for logprobs.
//
// Order (vllm-chat.md §3): allowed_token_ids → bad_words → min_tokens → logit_bias →
// repetition penalty (prompt ∪ output) → frequency and presence penalties (output) →
// temperature (0 = greedy) → min_p → top_k → top_p → sample.
package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"

	"github.com/honeai/hone/internal/kernels"
)

// Params are the sampling parameters of one sequence. The zero value samples greedily with
// every processor off; Validate checks the API's ranges, which refuse a zero TopP or
// RepetitionPenalty.
type Params struct {
	Temperature       float64 // 0 = greedy; (0, 0.01) is raised to 0.01
	TopP              float64 // (0, 1]; 0 or 1 = off
	TopK              int     // 0 or -1 = off
	MinP              float64 // [0, 1]; 0 = off
	RepetitionPenalty float64 // > 0; 0 or 1 = off
	FrequencyPenalty  float64 // [-2, 2]
	PresencePenalty   float64 // [-2, 2]
	LogitBias         map[int]float64
	AllowedTokenIDs   []int
	// BadWords are token sequences; the last token of one is banned when the output ends
	// with the rest of it.
	BadWords [][]int
	// MinTokens: EOS and StopTokenIDs are banned while the output is shorter.
	MinTokens    int
	EOS          []int
	StopTokenIDs []int
	// Seed makes sampling reproducible (same seed, same parameters: same tokens, whatever
	// else is in the batch). Nil: a random seed.
	Seed *int64
}

// Defaults returns OpenAI's defaults (temperature 1, everything else off).
func Defaults() Params {
	return Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}
}

// Validate checks ranges with vLLM's messages; the returned field names the parameter.
func (p *Params) Validate(vocab int) (field string, err error) {
	switch {
	case math.IsNaN(p.Temperature) || p.Temperature < 0:
		return "temperature", fmt.Errorf("temperature must be non-negative, got %v.", p.Temperature)
	case math.IsNaN(p.TopP) || p.TopP <= 0 || p.TopP > 1:
		return "top_p", fmt.Errorf("top_p must be in (0, 1], got %v.", p.TopP)
	case p.TopK < -1:
		return "top_k", fmt.Errorf("top_k must be 0 (disable), or at least 1, got %d.", p.TopK)
	case math.IsNaN(p.MinP) || p.MinP < 0 || p.MinP > 1:
		return "min_p", fmt.Errorf("min_p must be in [0, 1], got %v.", p.MinP)
	case math.IsNaN(p.RepetitionPenalty) || math.IsInf(p.RepetitionPenalty, 0) || p.RepetitionPenalty <= 0:
		return "repetition_penalty", fmt.Errorf("repetition_penalty must be greater than zero, got %v.", p.RepetitionPenalty)
	case math.IsNaN(p.FrequencyPenalty) || p.FrequencyPenalty < -2 || p.FrequencyPenalty > 2:
		return "frequency_penalty", fmt.Errorf("frequency_penalty must be in [-2, 2], got %v.", p.FrequencyPenalty)
	case math.IsNaN(p.PresencePenalty) || p.PresencePenalty < -2 || p.PresencePenalty > 2:
		return "presence_penalty", fmt.Errorf("presence_penalty must be in [-2, 2], got %v.", p.PresencePenalty)
	case p.MinTokens < 0:
		return "min_tokens", fmt.Errorf("min_tokens must be greater than or equal to 0, got %d.", p.MinTokens)
	}
	if p.AllowedTokenIDs != nil {
		if len(p.AllowedTokenIDs) == 0 {
			return "allowed_token_ids", fmt.Errorf("allowed_token_ids is not None and empty!")
		}
		for _, id := range p.AllowedTokenIDs {
			if id < 0 || id >= vocab {
				return "allowed_token_ids", fmt.Errorf("allowed_token_ids contains out-of-vocab token id!")
			}
		}
	}
	var bad []int
	for id := range p.LogitBias {
		if id < 0 || id >= vocab {
			bad = append(bad, id)
		}
	}
	if len(bad) > 0 {
		sort.Ints(bad)
		return "logit_bias", fmt.Errorf("token_id(s) %v in logit_bias contain out-of-vocab token ids. Vocabulary size: %d", bad, vocab)
	}
	for _, id := range p.StopTokenIDs {
		if id < 0 || id >= vocab {
			return "stop_token_ids", fmt.Errorf("token_id(s) [%d] in stop_token_ids contain out-of-vocab token ids. Vocabulary size: %d", id, vocab)
		}
	}
	return "", nil
}

// Greedy reports whether the parameters sample greedily.
func (p *Params) Greedy() bool { return p.Temperature < 1e-5 }

// Sampler samples one sequence's tokens; it keeps the sequence's random generator.
type Sampler struct {
	P   Params
	rng *rand.Rand
	// scratch
	idx []int
}

// New returns a sampler. A nil seed draws one at random.
func New(p Params) *Sampler {
	if p.TopP == 0 {
		p.TopP = 1
	}
	if p.RepetitionPenalty == 0 {
		p.RepetitionPenalty = 1
	}
	var seed uint64
	if p.Seed != nil {
		seed = uint64(*p.Seed)
	} else {
		seed = rand.Uint64()
	}
	return &Sampler{P: p, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
}

// Fork returns a sampler with the same parameters and a generator derived from this one's
// seed and i, for the i-th of n parallel samples.
func (s *Sampler) Fork(i int) *Sampler {
	c := *s
	c.rng = rand.New(rand.NewPCG(s.rng.Uint64()+uint64(i)*0x632be59bd9b4e019, uint64(i)+1))
	c.idx = nil
	return &c
}

// Process applies the logits processors in place (logits is the model's vocabulary row;
// it is modified). prompt and output are the sequence's tokens so far.
func (s *Sampler) Process(logits []float32, prompt, output []int) {
	p := &s.P
	neg := float32(math.Inf(-1))
	if p.AllowedTokenIDs != nil {
		keep := make([]float32, len(p.AllowedTokenIDs))
		for i, id := range p.AllowedTokenIDs {
			keep[i] = logits[id]
		}
		for i := range logits {
			logits[i] = neg
		}
		for i, id := range p.AllowedTokenIDs {
			logits[id] = keep[i]
		}
	}
	for _, w := range p.BadWords {
		if len(w) == 0 {
			continue
		}
		prefix := w[:len(w)-1]
		if len(prefix) <= len(output) && equal(output[len(output)-len(prefix):], prefix) {
			logits[w[len(w)-1]] = neg
		}
	}
	if len(output) < p.MinTokens {
		for _, id := range p.EOS {
			if id < len(logits) {
				logits[id] = neg
			}
		}
		for _, id := range p.StopTokenIDs {
			logits[id] = neg
		}
	}
	for id, b := range p.LogitBias {
		logits[id] += float32(max(-100, min(100, b)))
	}
	if p.RepetitionPenalty != 1 {
		rp := float32(p.RepetitionPenalty)
		seen := map[int]bool{}
		for _, l := range [][]int{prompt, output} {
			for _, id := range l {
				if seen[id] {
					continue
				}
				seen[id] = true
				if logits[id] > 0 {
					logits[id] /= rp
				} else {
					logits[id] *= rp
				}
			}
		}
	}
	if p.FrequencyPenalty != 0 || p.PresencePenalty != 0 {
		counts := map[int]int{}
		for _, id := range output {
			counts[id]++
		}
		for id, n := range counts {
			logits[id] -= float32(p.FrequencyPenalty)*float32(n) + float32(p.PresencePenalty)
		}
	}
}

// expBufs holds vocabulary-sized scratch for Sample's exponentials (one per token sampled:
// not allocated each time).
var expBufs = sync.Pool{New: func() any { return new([]float32) }}

// probBufs holds Sample's vocabulary-sized probabilities likewise (Gemma 3's 262,144: 2 MB of
// garbage a token otherwise, a collection every few tokens over a small live heap).
var probBufs = sync.Pool{New: func() any { return new([]float64) }}

// Sample picks the next token from processed logits.
func (s *Sampler) Sample(logits []float32) int {
	p := &s.P
	if p.Greedy() {
		return argmax(logits)
	}
	t := max(p.Temperature, 0.01)
	// Probabilities after temperature.
	mx := logits[argmax(logits)]
	if math.IsInf(float64(mx), -1) {
		return 0 // everything masked; callers prevent this
	}
	pbuf := probBufs.Get().(*[]float64)
	defer probBufs.Put(pbuf)
	if cap(*pbuf) < len(logits) {
		*pbuf = make([]float64, len(logits))
	}
	probs := (*pbuf)[:len(logits)] // every element is set below
	buf := expBufs.Get().(*[]float32)
	if cap(*buf) < len(logits) {
		*buf = make([]float32, len(logits))
	}
	ex := (*buf)[:len(logits)]
	kernels.ExpAffine(ex, logits, float32(1/t), float32(-float64(mx)/t)) // e^((l−mx)/t); masked (−Inf) logits give 0
	sum := 0.0
	for i, e := range ex {
		probs[i] = float64(e)
		sum += float64(e)
	}
	expBufs.Put(buf)
	for i := range probs {
		probs[i] /= sum
	}
	// min_p: drop tokens below min_p × the top probability.
	if p.MinP > 0 {
		top := 0.0
		for _, q := range probs {
			top = max(top, q)
		}
		for i, q := range probs {
			if q < p.MinP*top {
				probs[i] = 0
			}
		}
	}
	// Without top-k or top-p, draw from the distribution in id order: no sort.
	if (p.TopK <= 0 || p.TopK >= len(probs)) && p.TopP >= 1 {
		total := 0.0
		for _, q := range probs {
			total += q
		}
		r := s.rng.Float64() * total
		last := 0
		for i, q := range probs {
			if q <= 0 {
				continue
			}
			last = i
			r -= q
			if r <= 0 {
				return i
			}
		}
		return last
	}
	// Candidates sorted by probability (descending, ties by id) for top-k and top-p. Only the
	// candidates that can survive are sorted: the k best for top-k, and for top-p those at or
	// above a threshold whose mass already reaches top_p (every token of the nucleus is).
	idx := s.idx[:0]
	total := 0.0
	for i, q := range probs {
		if q > 0 {
			idx = append(idx, i)
			total += q
		}
	}
	better := func(a, b int) bool {
		if probs[a] != probs[b] {
			return probs[a] > probs[b]
		}
		return a < b
	}
	if p.TopK > 0 && len(idx) > p.TopK {
		idx = selectBest(idx, p.TopK, better)
		total = 0
		for _, i := range idx {
			total += probs[i]
		}
	} else if p.TopP < 1 {
		top := 0.0
		for _, i := range idx {
			top = max(top, probs[i])
		}
		for theta := top / 2; theta > 0; theta /= 4 {
			mass, n := 0.0, 0
			for _, i := range idx {
				if probs[i] >= theta {
					mass += probs[i]
					n++
				}
			}
			if mass >= p.TopP*total {
				kept := idx[:0]
				for _, i := range idx {
					if probs[i] >= theta {
						kept = append(kept, i)
					}
				}
				idx = kept
				break
			}
			if n == len(idx) {
				break
			}
		}
	}
	sort.Slice(idx, func(a, b int) bool { return better(idx[a], idx[b]) })
	if p.TopP < 1 {
		cum := 0.0
		for k, i := range idx {
			cum += probs[i] / total
			if cum >= p.TopP {
				idx = idx[:k+1]
				break
			}
		}
	}
	s.idx = idx
	sum = 0.0
	for _, i := range idx {
		sum += probs[i]
	}
	r := s.rng.Float64() * sum
	for _, i := range idx {
		r -= probs[i]
		if r <= 0 {
			return i
		}
	}
	return idx[len(idx)-1]
}

// selectBest keeps the k best of idx (in no particular order) by partial quickselect.
func selectBest(idx []int, k int, better func(a, b int) bool) []int {
	lo, hi := 0, len(idx)-1
	for lo < hi {
		// Median of three as the pivot.
		mid := lo + (hi-lo)/2
		if better(idx[mid], idx[lo]) {
			idx[mid], idx[lo] = idx[lo], idx[mid]
		}
		if better(idx[hi], idx[lo]) {
			idx[hi], idx[lo] = idx[lo], idx[hi]
		}
		if better(idx[hi], idx[mid]) {
			idx[hi], idx[mid] = idx[mid], idx[hi]
		}
		pivot := idx[mid]
		i, j := lo, hi
		for i <= j {
			for better(idx[i], pivot) {
				i++
			}
			for better(pivot, idx[j]) {
				j--
			}
			if i <= j {
				idx[i], idx[j] = idx[j], idx[i]
				i++
				j--
			}
		}
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return idx[:k]
		}
	}
	return idx[:k]
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TopLogprob is one entry of a top-k list.
type TopLogprob struct {
	Token   int
	Logprob float32
}

// Logprobs computes log-softmax of raw logits and returns the logprob and 1-based rank of
// token and the k most likely tokens (k may be 0; -1 = the whole vocabulary).
func Logprobs(raw []float32, token, k int) (lp float32, rank int, top []TopLogprob) {
	mx := raw[argmax(raw)]
	sum := 0.0
	for _, v := range raw {
		sum += math.Exp(float64(v - mx))
	}
	lse := float64(mx) + math.Log(sum)
	lp = float32(float64(raw[token]) - lse)
	rank = 1
	for i, v := range raw {
		if v > raw[token] || (v == raw[token] && i < token) {
			rank++
		}
	}
	if k < 0 || k > len(raw) {
		k = len(raw)
	}
	if k > 0 {
		idx := make([]int, len(raw))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool {
			if raw[idx[a]] != raw[idx[b]] {
				return raw[idx[a]] > raw[idx[b]]
			}
			return idx[a] < idx[b]
		})
		for _, i := range idx[:k] {
			top = append(top, TopLogprob{Token: i, Logprob: float32(float64(raw[i]) - lse)})
		}
	}
	return lp, rank, top
}

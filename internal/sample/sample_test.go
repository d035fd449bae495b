package sample

import (
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"sort"
	"testing"
)

func logitsOf(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * 2)
	}
	return out
}

func TestProcessorsInOrder(t *testing.T) {
	base := []float32{1, -2, 3, 0.5, -1, 2, 0, 0, 0, 0}
	p := Defaults()
	p.AllowedTokenIDs = []int{0, 1, 2, 3, 4}
	p.BadWords = [][]int{{9, 3}, {4}}
	p.MinTokens = 5
	p.EOS = []int{2}
	p.LogitBias = map[int]float64{1: 500}
	p.RepetitionPenalty = 2
	p.FrequencyPenalty = 0.5
	p.PresencePenalty = 0.25
	s := New(p)
	l := append([]float32(nil), base...)
	s.Process(l, []int{0}, []int{9, 1, 1})
	inf := float32(math.Inf(-1))
	// 5: not allowed; 4: banned word; 3: banned after 9? output ends with 1, so no; 2: EOS
	// under min_tokens; 1: bias clamped to +100 then repetition (positive ÷2) then
	// frequency 2×0.5 and presence 0.25; 0: in the prompt, positive ÷2.
	want := []float32{0.5, (-2+100)/2 - 1 - 0.25, inf, 0.5, inf, inf, inf, inf, inf, inf}
	for i := range want {
		if l[i] != want[i] {
			t.Fatalf("token %d: got %v want %v (all %v)", i, l[i], want[i], l)
		}
	}
	l = append([]float32(nil), base...)
	s.Process(l, nil, []int{9})
	if !math.IsInf(float64(l[3]), -1) {
		t.Fatal("bad word prefix matched but its last token was not banned")
	}
}

// TestZeroParams: the zero Params samples greedily with nothing else on (a zero
// repetition penalty would divide the seen tokens' logits by zero).
func TestZeroParams(t *testing.T) {
	l := []float32{0.5, 2, 3, -1}
	s := New(Params{})
	got := append([]float32(nil), l...)
	s.Process(got, []int{1, 3}, []int{0})
	for i := range l {
		if got[i] != l[i] {
			t.Fatalf("processed %v, want %v", got, l)
		}
	}
	if tok := s.Sample(got); tok != 2 {
		t.Fatalf("sampled %d, want 2", tok)
	}
	s = New(Params{Temperature: 1, TopK: 2})
	seen := map[int]bool{}
	for range 200 {
		seen[s.Sample(append([]float32(nil), l...))] = true
	}
	if len(seen) != 2 || !seen[1] || !seen[2] {
		t.Fatalf("top_k 2 with a zero top_p sampled %v, want tokens 1 and 2", seen)
	}
}

func TestGreedyAndTruncation(t *testing.T) {
	l := logitsOf(100, 1)
	want := argmax(l)
	for _, p := range []Params{{Temperature: 0, TopP: 1, RepetitionPenalty: 1}, {Temperature: 1, TopP: 1, TopK: 1, RepetitionPenalty: 1}, {Temperature: 0.7, TopP: 1e-9, RepetitionPenalty: 1}, {Temperature: 1, TopP: 1, MinP: 1, RepetitionPenalty: 1}} {
		s := New(p)
		for i := 0; i < 20; i++ {
			if got := s.Sample(append([]float32(nil), l...)); got != want {
				t.Fatalf("%+v: got %d want %d", p, got, want)
			}
		}
	}
}

func TestSeedReproducibleAndDistribution(t *testing.T) {
	l := []float32{0, float32(math.Log(3))} // p = 0.25, 0.75
	seed := int64(42)
	p := Defaults()
	p.Seed = &seed
	a, b := New(p), New(p)
	counts := [2]int{}
	for i := 0; i < 4000; i++ {
		x, y := a.Sample(l), b.Sample(l)
		if x != y {
			t.Fatal("same seed, different samples")
		}
		counts[x]++
	}
	if frac := float64(counts[1]) / 4000; math.Abs(frac-0.75) > 0.03 {
		t.Fatalf("sampled token 1 with frequency %.3f, want 0.75", frac)
	}
	// top_k=2 over three tokens never samples the third.
	p.TopK = 2
	s := New(p)
	for i := 0; i < 500; i++ {
		if s.Sample([]float32{1, 2, 0}) == 2 {
			t.Fatal("top_k let the least likely token through")
		}
	}
}

func TestLogprobs(t *testing.T) {
	raw := []float32{1, 3, 2, 3}
	lp, rank, top := Logprobs(raw, 2, 3)
	lse := math.Log(math.Exp(1) + 2*math.Exp(3) + math.Exp(2))
	if math.Abs(float64(lp)-(2-lse)) > 1e-6 || rank != 3 || len(top) != 3 || top[0].Token != 1 || top[1].Token != 3 || top[2].Token != 2 {
		t.Fatalf("lp %v rank %d top %+v", lp, rank, top)
	}
	_, _, all := Logprobs(raw, 0, -1)
	if len(all) != 4 {
		t.Fatalf("-1 gave %d entries", len(all))
	}
}

func TestValidate(t *testing.T) {
	for field, p := range map[string]Params{
		"temperature":        {Temperature: -1, TopP: 1, RepetitionPenalty: 1},
		"top_p":              {Temperature: 1, TopP: 0, RepetitionPenalty: 1},
		"top_k":              {Temperature: 1, TopP: 1, TopK: -2, RepetitionPenalty: 1},
		"min_p":              {Temperature: 1, TopP: 1, MinP: 2, RepetitionPenalty: 1},
		"repetition_penalty": {Temperature: 1, TopP: 1},
		"frequency_penalty":  {Temperature: 1, TopP: 1, RepetitionPenalty: 1, FrequencyPenalty: 3},
		"presence_penalty":   {Temperature: 1, TopP: 1, RepetitionPenalty: 1, PresencePenalty: -3},
		"logit_bias":         {Temperature: 1, TopP: 1, RepetitionPenalty: 1, LogitBias: map[int]float64{99: 1}},
		"allowed_token_ids":  {Temperature: 1, TopP: 1, RepetitionPenalty: 1, AllowedTokenIDs: []int{}},
		"stop_token_ids":     {Temperature: 1, TopP: 1, RepetitionPenalty: 1, StopTokenIDs: []int{10}},
	} {
		got, err := p.Validate(10)
		if err == nil || got != field {
			t.Errorf("%s: field %q err %v", field, got, err)
		}
	}
	d := Defaults()
	if f, err := d.Validate(10); err != nil {
		t.Fatalf("defaults invalid: %s %v", f, err)
	}
}

// refSample is the sampling step written plainly (every candidate sorted), to check the
// pruned selection against.
func refSample(p Params, logits []float32, u float64) int {
	t := max(p.Temperature, 0.01)
	mx := logits[argmax(logits)]
	probs := make([]float64, len(logits))
	sum := 0.0
	for i, l := range logits {
		if !math.IsInf(float64(l), -1) {
			probs[i] = math.Exp(float64(l-mx) / t)
			sum += probs[i]
		}
	}
	for i := range probs {
		probs[i] /= sum
	}
	var idx []int
	for i, q := range probs {
		if q > 0 {
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(a, b int) bool {
		if probs[idx[a]] != probs[idx[b]] {
			return probs[idx[a]] > probs[idx[b]]
		}
		return idx[a] < idx[b]
	})
	if p.TopK > 0 && len(idx) > p.TopK {
		idx = idx[:p.TopK]
	}
	if p.TopP < 1 {
		total := 0.0
		for _, i := range idx {
			total += probs[i]
		}
		cum := 0.0
		for k, i := range idx {
			cum += probs[i] / total
			if cum >= p.TopP {
				idx = idx[:k+1]
				break
			}
		}
	}
	total := 0.0
	for _, i := range idx {
		total += probs[i]
	}
	r := u * total
	for _, i := range idx {
		r -= probs[i]
		if r <= 0 {
			return i
		}
	}
	return idx[len(idx)-1]
}

// TestPrunedTopKTopPMatchesFullSort: selecting only the candidates that can survive top-k
// and top-p gives exactly the token a full sort gives, for the same random draw.
func TestPrunedTopKTopPMatchesFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 400; trial++ {
		n := 1 + rng.IntN(3000)
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * (0.5 + 3*rng.Float64()))
			if rng.IntN(50) == 0 {
				logits[i] = float32(math.Inf(-1))
			}
			if rng.IntN(20) == 0 && i > 0 {
				logits[i] = logits[i-1] // ties
			}
		}
		logits[rng.IntN(n)] = 1
		p := Defaults()
		p.Temperature = 0.3 + rng.Float64()
		switch trial % 3 {
		case 0:
			p.TopK = 1 + rng.IntN(60)
		case 1:
			p.TopP = 0.05 + 0.9*rng.Float64()
		default:
			p.TopK, p.TopP = 1+rng.IntN(200), 0.1+0.85*rng.Float64()
		}
		if (p.TopK <= 0 || p.TopK >= n) && p.TopP >= 1 {
			continue // plain sampling in id order: nothing to prune
		}
		seed := int64(trial)
		p.Seed = &seed
		s := New(p)
		got := s.Sample(append([]float32(nil), logits...))
		u := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15)).Float64()
		if want := refSample(p, logits, u); got != want {
			t.Fatalf("trial %d (n %d, top_k %d, top_p %.3f): %d, full sort %d", trial, n, p.TopK, p.TopP, got, want)
		}
	}
}

// TestSampleNoVocabularyGarbage: sampling with temperature (plain, top-k, top-p) takes its
// vocabulary-sized scratch from pools: over a 262,144-token vocabulary (Gemma 3's) 20 calls
// allocate at most a pool's refill (4 MB), where each used to leave 2 MB of probabilities
// behind.
func TestSampleNoVocabularyGarbage(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled items at random")
	}
	l := logitsOf(262144, 3)
	// No collection during the measurement: a collection empties the pools (by design), which
	// would count their refills.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for _, c := range []struct {
		k int
		p float64
	}{{0, 1}, {40, 1}, {0, 0.9}} {
		p := Defaults()
		p.Temperature, p.TopK, p.TopP = 0.8, c.k, c.p
		s := New(p)
		for range 3 { // the pools' first buffers (a pool's buffer is per P, which may change)
			s.Sample(l)
		}
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		const n = 20
		for range n {
			s.Sample(l)
		}
		runtime.ReadMemStats(&b)
		// A pool's buffers are per P: a call on another P may make one more (1 or 2 MB).
		if per := (b.TotalAlloc - a.TotalAlloc) / n; per > 4<<20/n {
			t.Errorf("top_k %d top_p %v: %d bytes allocated a call", c.k, c.p, per)
		}
	}
}

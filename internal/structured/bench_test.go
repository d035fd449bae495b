package structured

import (
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/honeai/hone/internal/tokenizer"
)

var (
	qwenOnce  sync.Once
	qwenVocab Vocab
)

// qwen3Vocab is the vocabulary of the Qwen3 tokenizer (151,669 tokens) committed for the
// tokenizer tests.
func qwen3Vocab(b testing.TB) Vocab {
	qwenOnce.Do(func() {
		tok, err := tokenizer.Load("../tokenizer/testdata/qwen3")
		if err != nil {
			b.Fatal(err)
		}
		v := Vocab{Tokens: make([][]byte, tok.VocabSize())}
		for id := range v.Tokens {
			if !tok.IsSpecial(id) {
				v.Tokens[id] = tok.TokenBytes(id)
			}
		}
		if eos, ok := tok.EOS(); ok {
			v.EOS = []int{eos}
		}
		qwenVocab = v
	})
	return qwenVocab
}

const benchSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"type":"string"},"maxItems":5},"address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"[0-9]{5}"}},"required":["city"]}},"required":["name","age"]}`

const benchTreeSchema = `{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string","maxLength":20},"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":3}},"required":["name"]}},"$ref":"#/$defs/node"}`

// BenchmarkMask: per-token mask time on the Qwen3 vocabulary along random walks through
// typical constraints: the median over tokens after warm-up and the median cost of a mask
// that was not cached (a new DFA state or pushdown configuration). Also the time to build
// the index. Sub-benchmarks: a flat schema (DFA), a recursive schema and json_object (both
// pushdown: recursion and free-form values at any depth).
func BenchmarkMask(b *testing.B) {
	v := qwen3Vocab(b)
	t0 := time.Now()
	ix := NewIndex(v)
	indexMs := float64(time.Since(t0).Microseconds()) / 1000
	for _, bc := range []struct {
		name string
		spec *Spec
	}{
		{"schema", &Spec{Kind: "json", Schema: json.RawMessage(benchSchema)}},
		{"recursive", &Spec{Kind: "json", Schema: json.RawMessage(benchTreeSchema)}},
		{"json_object", &Spec{Kind: "json_object"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchMask(b, ix, v, bc.spec)
			b.ReportMetric(indexMs, "index-build-ms")
		})
	}
}

func benchMask(b *testing.B, ix *Index, v Vocab, spec *Spec) {
	c, err := NewCompiler(ix).Compile(spec)
	if err != nil {
		b.Fatal(err)
	}
	mask := make([]uint64, ix.Words())
	var fresh []time.Duration // background computations of new states' masks
	walk := func(rng *rand.Rand, timings *[]time.Duration, cold *[]time.Duration) {
		m := c.NewMatcher()
		for step := 0; step < 200 && !m.Done(); step++ {
			c.mu.Lock()
			_, cached := c.masks[m.state]
			c.mu.Unlock()
			start := time.Now()
			m.Mask(mask)
			d := time.Since(start)
			if cached {
				*timings = append(*timings, d)
			} else {
				*cold = append(*cold, d)
			}
			var allowed []int
			for w, word := range mask {
				for word != 0 {
					bt := bits.TrailingZeros64(word)
					allowed = append(allowed, w*64+bt)
					word &^= 1 << bt
				}
			}
			pick := allowed[rng.IntN(len(allowed))]
			if m.Accepting() && rng.IntN(4) == 0 {
				pick = v.EOS[0]
			}
			t0 := time.Now()
			m.Accept(pick, v.Tokens[pick])
			// The engine runs its forward pass meanwhile; let the background mask of the new
			// state finish as it would then, and time it.
			c.mu.Lock()
			ch := c.inflight[m.state]
			c.mu.Unlock()
			if ch != nil {
				<-ch
				fresh = append(fresh, time.Since(t0))
			}
		}
	}
	var warm, cold []time.Duration
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 20; i++ { // warm-up
		walk(rng, &warm, &cold)
	}
	warm, cold, fresh = warm[:0], cold[:0], fresh[:0]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		walk(rng, &warm, &cold)
	}
	b.StopTimer()
	sort.Slice(warm, func(i, j int) bool { return warm[i] < warm[j] })
	sort.Slice(cold, func(i, j int) bool { return cold[i] < cold[j] })
	if len(warm) > 0 {
		b.ReportMetric(float64(warm[len(warm)/2].Nanoseconds())/1000, "median-mask-µs")
	}
	if len(cold) > 0 {
		b.ReportMetric(float64(cold[len(cold)/2].Nanoseconds())/1e6, "median-uncached-mask-ms")
	}
	b.ReportMetric(float64(len(cold))/float64(len(cold)+len(warm)), "uncached-fraction")
	if c.dfa != nil {
		b.ReportMetric(float64(c.dfa.States()), "dfa-states")
	}
	if len(fresh) > 0 {
		sort.Slice(fresh, func(i, j int) bool { return fresh[i] < fresh[j] })
		b.ReportMetric(float64(fresh[len(fresh)/2].Nanoseconds())/1e6, "median-new-state-ms")
		b.ReportMetric(float64(fresh[len(fresh)*9/10].Nanoseconds())/1e6, "p90-new-state-ms")
		b.ReportMetric(float64(len(fresh))/float64(len(cold)+len(warm)), "new-state-fraction")
	}
}

// BenchmarkCompile: the time to compile typical constraints to their automata (the first
// masks are built lazily, measured by BenchmarkMask).
func BenchmarkCompile(b *testing.B) {
	specs := map[string]*Spec{
		"schema": {Kind: "json", Schema: json.RawMessage(benchSchema)},
		"choice": {Kind: "choice", Choices: []string{"positive", "negative", "neutral"}},
		"regex":  {Kind: "regex", Regex: `\d{3}-\d{3}-\d{4}`},
		"object": {Kind: "json_object"},
	}
	for name, s := range specs {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rs, err := s.Rules()
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := compileRules(rs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

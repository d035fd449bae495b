package train

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/honeai/hone/internal/cputime"
	"github.com/honeai/hone/internal/gguf"
)

// rlBenchSeqs is an ART-shaped RL step's tokenised trajectories: groups × samples, each a
// prompt of prompt tokens shared by its group (a chat template's system and user turns and
// the generation prompt), sampled tokens with their sampling logprobs, and two tokens of
// end-of-turn text as context; rewards differ within each group.
func rlBenchSeqs(vocab, groups, samples, prompt, sampled int) []*rlSeq {
	rng := rand.New(rand.NewPCG(2, 2))
	var seqs []*rlSeq
	for g := range groups {
		p := make([]int, prompt)
		for i := range p {
			p[i] = rng.IntN(vocab)
		}
		for i := range samples {
			T := prompt + sampled + 2
			s := &rlSeq{seq: Seq{Tokens: append(append([]int{}, p...), make([]int, T-prompt)...)},
				sampled: make([]bool, T), oldLogp: make([]float64, T), traj: g*samples + i,
				advantage: float64(i) - float64(samples-1)/2}
			for t := range T {
				s.oldLogp[t] = math.NaN()
				if t >= prompt {
					s.seq.Tokens[t] = rng.IntN(vocab)
				}
				if t >= prompt && t < prompt+sampled {
					s.sampled[t], s.oldLogp[t] = true, -1-rng.Float64()
				}
			}
			seqs = append(seqs, s)
		}
	}
	return seqs
}

// BenchmarkRLStepGroups: the passes and update of an RL step as ART's default step sends
// it (6 prompts × 8 samples; prompts of 50 tokens, 8 sampled tokens and 2 of end-of-turn
// text: 60 tokens a trajectory, as SmolLM2's template makes them), LoRA rank 8 on all seven
// modules (Hone's default for new models), the SmolLM2-135M shape in f32. Metrics: the
// trajectories' tokens per second, seconds and CPU seconds (all threads) per step.
func BenchmarkRLStepGroups(b *testing.B) {
	m := benchModelQ(b, "smollm2-135m", "f32", gguf.F32)
	a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 8, Alpha: 16, Seed: 1})
	e, _ := NewTrainer(m, a)
	o := NewAdamW(0)
	cfg := RLConfig{}
	if err := cfg.defaults(); err != nil {
		b.Fatal(err)
	}
	tokens := 0
	b.ResetTimer()
	start, cpu0 := time.Now(), cputime.Seconds()
	for i := 0; i < b.N; i++ {
		seqs := rlBenchSeqs(m.Config.VocabSize, 6, 8, 50, 8)
		w := rlWeights(seqs)
		var met RLMetrics
		n, err := e.rlPasses(b.Context(), seqs, &cfg, w, &met)
		if err != nil {
			b.Fatal(err)
		}
		tokens += n
		e.G.Clip(cfg.MaxGradNorm)
		o.UpdateRates(e.A, e.G, cfg.LearningRate, e.tokenLR(cfg.LearningRate))
	}
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(tokens)/el, "tokens/s")
	b.ReportMetric(el/float64(b.N), "s/step")
	b.ReportMetric((cputime.Seconds()-cpu0)/float64(b.N), "cpu-s/step")
}

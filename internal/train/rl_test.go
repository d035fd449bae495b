package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
	"github.com/honeai/hone/internal/trainingdata"
)

func reward(v float64) float64 { return v }

// choiceJSON builds an OpenAI choice as Hone's chat API returns it with logprobs and
// return_token_ids.
func choiceJSON(c *trainingdata.ChatTokenizer, ids []int, lps []float32) json.RawMessage {
	var content []map[string]any
	for i, id := range ids {
		content = append(content, map[string]any{"token": fmt.Sprintf("token_id:%d", id), "logprob": lps[i], "bytes": []int{}})
	}
	b, _ := json.Marshal(map[string]any{"index": 0, "finish_reason": "length", "token_ids": ids,
		"message": map[string]any{"role": "assistant", "content": c.Tok.Decode(ids, true)}, "logprobs": map[string]any{"content": content}})
	return b
}

// TestRLStepErrors: groups whose rewards are all equal train nothing, and say so; an unknown
// loss is refused.
func TestRLStepErrors(t *testing.T) {
	dir := tinyDir(t, "llama", 0.02)
	c, err := trainingdata.LoadChat(dir)
	if err != nil {
		t.Fatal(err)
	}
	user := json.RawMessage(`{"role":"user","content":"Say something"}`)
	ids := []int{100, 101, 102}
	m, _ := model.Load(dir, model.LoadOptions{})
	a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 2})
	e, _ := NewTrainer(m, a)
	g := trainingdata.TrajectoryGroup{Trajectories: []trainingdata.Trajectory{
		{MessagesAndChoices: []json.RawMessage{user, choiceJSON(c, ids, []float32{-1, -2, -3})}, Reward: reward(1)},
		{MessagesAndChoices: []json.RawMessage{user, choiceJSON(c, ids, []float32{-1, -2, -3})}, Reward: reward(1)},
	}}
	if _, _, err := RLStep(context.Background(), e, c, []trainingdata.TrajectoryGroup{g}, RLConfig{}, nil); !errors.Is(err, ErrNothingToTrain) {
		t.Fatalf("err = %v", err)
	}
	if _, _, err := RLStep(context.Background(), e, c, []trainingdata.TrajectoryGroup{g}, RLConfig{Loss: "dpo"}, nil); err == nil {
		t.Fatal("unknown loss accepted")
	}
}

// TestRLLearnsTargetTokens: RL through Hone's own engine raises the mean reward of a task with
// a programmatic reward — answer with one of a set of 1/8 of the vocabulary — from chance to
// above 0.9, with each loss.
func TestRLLearnsTargetTokens(t *testing.T) {
	for _, loss := range []string{"cispo", "ppo"} {
		t.Run(loss, func(t *testing.T) {
			dir := tinyDir(t, "llama", 0.2)
			m, err := model.Load(dir, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := trainingdata.LoadChat(dir)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 8, Alpha: 16, Seed: 2})
			e, _ := NewTrainer(m, a)
			eng := inference.New(m, inference.Options{})
			defer eng.Close()
			target := func(id int) bool { return id%8 == 3 }
			prompts := []string{"Pick a word.", "Say one word.", "Any word?", "Word please."}
			var o *AdamW
			first, last := -1.0, 0.0
			for step := 0; step < 60; step++ {
				var groups []trainingdata.TrajectoryGroup
				total, hits := 0, 0
				for pi, p := range prompts {
					msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": p}})
					text, err := c.Template.Render(chattemplateInput(msgs, c))
					if err != nil {
						t.Fatal(err)
					}
					seed := int64(step*100 + pi)
					params := sample.Defaults()
					params.Seed = &seed
					h, err := eng.Submit(context.Background(), &inference.Request{Prompt: c.Tok.Encode(text, false), Params: params, N: 8,
						MaxTokens: 1, IgnoreEOS: true, Adapter: a, Logprobs: true})
					if err != nil {
						t.Fatal(err)
					}
					toks := map[int][]int{}
					lps := map[int][]float32{}
					for ev := range h.Events() {
						if ev.HasToken {
							toks[ev.Choice] = append(toks[ev.Choice], ev.Token)
							lps[ev.Choice] = append(lps[ev.Choice], ev.Logprob)
						}
					}
					var g trainingdata.TrajectoryGroup
					for k := 0; k < 8; k++ {
						r := 0.0
						if target(toks[k][0]) {
							r, hits = 1, hits+1
						}
						total++
						g.Trajectories = append(g.Trajectories, trainingdata.Trajectory{Reward: reward(r),
							MessagesAndChoices: []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"role":"user","content":%q}`, p)), choiceJSON(c, toks[k], lps[k])}})
					}
					groups = append(groups, g)
				}
				mean := float64(hits) / float64(total)
				if first < 0 {
					first = mean
				}
				last = mean
				if step >= 5 && mean > 0.95 {
					break
				}
				met, o2, err := RLStep(context.Background(), e, c, groups, RLConfig{Loss: loss, LearningRate: 2e-2, ScaleRewards: true}, o)
				if err != nil && !errors.Is(err, ErrNothingToTrain) {
					t.Fatal(err)
				}
				o = o2
				if testing.Verbose() {
					t.Logf("step %d reward %.2f loss %.4f entropy %.3f grad %.3f trajectories %d", step, mean, met.Loss, met.Entropy, met.GradNorm, met.NumTrajectories)
				}
			}
			t.Logf("%s: mean reward %.2f -> %.2f", loss, first, last)
			if first > 0.4 || last <= 0.9 {
				t.Fatalf("mean reward %.2f -> %.2f", first, last)
			}
		})
	}
}

func chattemplateInput(msgs []byte, c *trainingdata.ChatTokenizer) chattemplate.Input {
	return chattemplate.Input{Messages: msgs, AddGenerationPrompt: true, SpecialTokens: c.Special}
}

// TestRLLossGradient checks the coefficients of ppo at every importance-sampling level (the
// sequence-level ratio couples the tokens) against central differences of the loss in the
// log-probabilities, and those of cispo (whose ratio is not differentiated) against
// −clip(ρ)·A·w.
func TestRLLossGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	T := 12
	s := &rlSeq{seq: Seq{Tokens: make([]int, T)}, sampled: make([]bool, T), advantage: 0.7}
	st := TokenStats{Logp: make([]float32, T), Entropy: make([]float32, T)}
	old := make([]float64, T)
	for i := 0; i < T; i++ {
		s.sampled[i] = i >= 4 && i != 8
		st.Logp[i] = float32(-0.2 - rng.Float64())
		old[i] = float64(st.Logp[i]) + 0.3*(rng.Float64()-0.5)
	}
	for _, loss := range []string{"ppo", "cispo"} {
		for _, level := range []string{"token", "sequence", "average", "geometric_average"} {
			for _, adv := range []float64{0.7, -0.4} {
				cfg := RLConfig{Loss: loss, ImportanceSampling: level, Epsilon: 0.5, EpsilonHigh: 0.6, MaxNegativeAdvantageIS: 5}
				if err := cfg.defaults(); err != nil {
					t.Fatal(err)
				}
				s.advantage = adv
				var l rlLoss
				l.compute(&cfg, s, st, old, TokenStats{}, 0.1)
				if loss == "cispo" {
					logR, n := 0.0, 0.0
					for p := 0; p+1 < T; p++ {
						if s.sampled[p+1] {
							logR += float64(st.Logp[p]) - old[p]
							n++
						}
					}
					R := math.Exp(logR / n)
					for p := 0; p+1 < T; p++ {
						want := 0.0
						if s.sampled[p+1] {
							r := math.Exp(float64(st.Logp[p]) - old[p])
							rho := map[string]float64{"token": r, "sequence": R, "average": (r + R) / 2, "geometric_average": math.Sqrt(r * R)}[level]
							if adv < 0 {
								rho = min(rho, 5)
							}
							want = -math.Max(0.5, math.Min(1.6, rho)) * adv * 0.1
						}
						if math.Abs(float64(l.g[p])-want) > 1e-6 {
							t.Errorf("cispo/%s A=%v position %d: %v, want %v", level, adv, p, l.g[p], want)
						}
					}
					continue
				}
				for p := 0; p+1 < T; p++ {
					const h = 1e-3
					at := func(d float32) float64 {
						st2 := TokenStats{Logp: append([]float32(nil), st.Logp...), Entropy: st.Entropy}
						st2.Logp[p] += d
						var l2 rlLoss
						return l2.compute(&cfg, s, st2, old, TokenStats{}, 0.1)
					}
					num := (at(h) - at(-h)) / (2 * h)
					if math.Abs(num-float64(l.g[p])) > 1e-4+1e-2*math.Abs(num) {
						t.Errorf("%s/%s A=%v position %d: analytic %.6g, numeric %.6g", loss, level, adv, p, l.g[p], num)
					}
				}
			}
		}
	}
}

// TestRLLossOptions: advantage adjustments and masks change the coefficients as ART's loss
// does.
func TestRLLossOptions(t *testing.T) {
	T := 4
	s := &rlSeq{seq: Seq{Tokens: make([]int, T)}, sampled: []bool{false, true, true, true}, advantage: 1}
	st := TokenStats{Logp: []float32{-1, -2, -0.5, 0}, Entropy: make([]float32, T)}
	old := []float64{-1, -1.5, -0.5, 0} // ratios 1, e^-0.5 = 0.61, 1 at positions 0, 1, 2
	ref := TokenStats{Logp: []float32{-1.5, -0.5, -0.5, 0}}
	g := func(cfg RLConfig) []float32 {
		if err := cfg.defaults(); err != nil {
			t.Fatal(err)
		}
		var l rlLoss
		l.compute(&cfg, s, st, old, ref, 1)
		return l.g
	}
	// cispo: −clip(ρ)·A per token.
	base := g(RLConfig{Loss: "cispo", Epsilon: 0.2, EpsilonHigh: 0.2})
	if base[0] != -1 || math.Abs(float64(base[1])+0.8) > 1e-6 || base[3] != 0 {
		t.Fatalf("cispo coefficients %v", base)
	}
	// mask_prob_ratio: the ratio of position 1 (0.61) is outside (0.8, 1.2) and masked to 0:
	// ppo gets no gradient there.
	if m := g(RLConfig{Loss: "ppo", Epsilon: 0.2, MaskProbRatio: true}); m[1] != 0 || m[0] != -1 {
		t.Fatalf("ppo with mask_prob_ratio %v", m)
	}
	// kimi_k2_tau: A − τ·(logπ − old) = 1 − 0.5·(−0.5) at position 1.
	if k := g(RLConfig{Loss: "cispo", Epsilon: 0.5, EpsilonHigh: 0.5, KimiK2Tau: 0.5}); math.Abs(float64(k[1])+0.6065*1.25) > 1e-3 {
		t.Fatalf("kimi_k2_tau %v", k)
	}
	// KL adjustment: kl = logπ − ref = (0.5, −1.5, 0) at positions 0..2, mean −1/3.
	klCfg := RLConfig{Loss: "cispo", Epsilon: 0.5, EpsilonHigh: 0.5, KLPenaltyCoef: 1, RefAdapter: &model.LoRA{}}
	kl := g(klCfg)
	if want := -(1 + (-1.0/3 - 0.5)); math.Abs(float64(kl[0])-want) > 1e-5 {
		t.Fatalf("KL-adjusted coefficient %v, want %v", kl[1], want)
	}
	// kl_penalty_source "sample": kl = old − ref = (0.5, −1, 0), mean −1/6.
	klCfg.KLPenaltySource = "sample"
	if got, want := g(klCfg)[0], -(1 + (-1.0/6 - 0.5)); math.Abs(float64(got)-want) > 1e-5 {
		t.Fatalf("KL from the samples %v, want %v", got, want)
	}
	// truncated importance sampling multiplies by min(ρ, bound).
	if tis := g(RLConfig{Loss: "cispo", Epsilon: 0.5, EpsilonHigh: 0.5, TruncatedIS: 0.5}); math.Abs(float64(tis[0])+0.5) > 1e-6 {
		t.Fatalf("truncated IS %v", tis)
	}
	for _, bad := range []RLConfig{{AdvantageBalance: 2}, {ImportanceSampling: "mean"}, {KimiK2Tau: -1}, {KLPenaltyCoef: 1}, {KLPenaltySource: "ref"}, {LRMultiplier: -1}} {
		if err := bad.defaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestRLWeightsAsARTPacks: each sampled token's coefficient A·w (weight times scaled
// advantage) equals ART's packed one: per-trajectory weights 1/n normalised to mean 1 over the
// step's tokens, advantages divided by the mean of |A|·weight, the loss averaged over the
// tokens; a trajectory's additional history shares its weight.
func TestRLWeightsAsARTPacks(t *testing.T) {
	mk := func(traj int, adv float64, sampled ...bool) *rlSeq {
		return &rlSeq{traj: traj, advantage: adv, sampled: sampled}
	}
	// Trajectory 0: 3 sampled tokens in its conversation, 1 in an additional history;
	// trajectory 1: 2; trajectory 2: none sampled (context only).
	seqs := []*rlSeq{mk(0, 1, false, true, true, true), mk(0, 1, true, false), mk(1, -3, true, true), mk(2, 5, false)}
	type tok struct {
		traj int
		adv  float64
	}
	var toks []tok
	n := map[int]int{}
	for _, s := range seqs {
		for _, sm := range s.sampled {
			if sm {
				toks = append(toks, tok{s.traj, s.advantage})
				n[s.traj]++
			}
		}
	}
	// ART: weights 1/n normalised to mean 1, then advantages over mean(|A|·w), loss / N.
	wsum := 0.0
	for _, k := range toks {
		wsum += 1 / float64(n[k.traj])
	}
	wmean := wsum / float64(len(toks))
	norm := 0.0
	for _, k := range toks {
		norm += math.Abs(k.adv) * (1 / float64(n[k.traj]) / wmean)
	}
	norm /= float64(len(toks))
	want := map[int]float64{}
	for _, k := range toks {
		w := 1 / float64(n[k.traj]) / wmean
		want[k.traj] = k.adv / norm * w / float64(len(toks))
	}
	w := rlWeights(seqs)
	for _, s := range seqs[:3] {
		if got := s.advantage * w[s.traj]; math.Abs(got-want[s.traj]) > 1e-12 {
			t.Errorf("trajectory %d: coefficient %v, ART's %v", s.traj, got, want[s.traj])
		}
	}
	if _, ok := w[2]; ok || len(w) != 2 {
		t.Fatalf("weights %v", w)
	}
}

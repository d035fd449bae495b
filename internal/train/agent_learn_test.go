package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
	"github.com/honeai/hone/internal/trainingdata"
)

// forcedGuide lets each output step take one of a fixed set of tokens and ends the output
// after the last step: the tool-call text with a choice of key.
type forcedGuide struct {
	steps [][]int
	i     int
}

func (g *forcedGuide) Mask(dst []uint64) {
	if g.i < len(g.steps) {
		for _, id := range g.steps[g.i] {
			dst[id/64] |= 1 << (id % 64)
		}
	}
}
func (g *forcedGuide) Accept(int) error { g.i++; return nil }
func (g *forcedGuide) MustEnd() bool    { return g.i >= len(g.steps) }

type forcedSteps [][]int

func (f forcedSteps) NewGuide() inference.Guide { return &forcedGuide{steps: f} }

// sampleOnce runs one request on the engine and returns each choice's tokens and logprobs.
func sampleOnce(t *testing.T, eng *inference.Engine, req *inference.Request) ([][]int, [][]float32) {
	t.Helper()
	h, err := eng.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	toks := make([][]int, max(req.N, 1))
	lps := make([][]float32, max(req.N, 1))
	for ev := range h.Events() {
		if ev.HasToken {
			toks[ev.Choice] = append(toks[ev.Choice], ev.Token)
			lps[ev.Choice] = append(lps[ev.Choice], ev.Logprob)
		}
	}
	return toks, lps
}

// plainLogprobs are a plain OpenAI client's logprobs entries for sampled ids and logprobs.
func plainLogprobs(c *trainingdata.ChatTokenizer, ids []int, lps []float32) map[string]any {
	entries := plainEntries(c, ids)
	for i := range entries {
		entries[i]["logprob"] = lps[i]
	}
	return map[string]any{"content": entries}
}

// TestRLLearnsToolCall: RL on agent trajectories sampled through Hone's own engine raises the
// mean reward of a tool-using task: the model answers each prompt with a call to the lookup
// tool (the call's text fixed, its key one of four words: chance about 0.25), gets the tool's
// result, then answers; the reward is 1 when the call's key is the right one.
// The trajectories are what a plain OpenAI client records — a tool-call choice (arguments a
// JSON string, content null) with logprobs entries and no token ids, the tool message, the
// answer's choice — so the ids come from the entries. Seeded: the same run every time.
func TestRLLearnsToolCall(t *testing.T) {
	dir := tinyDir(t, "llama", 0.2)
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := trainingdata.LoadChat(dir)
	if err != nil {
		t.Fatal(err)
	}
	c.Vocab = m.Config.VocabSize
	a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 8, Alpha: 16, Seed: 3})
	e, _ := NewTrainer(m, a)
	eng := inference.New(m, inference.Options{})
	defer eng.Close()

	// Four keys, each a word that is one token of the vocabulary.
	var keys []string
	var keyIDs []int
	for id := 0; id < c.Tok.VocabSize() && len(keys) < 4; id++ {
		w := c.Tok.Decode([]int{id}, false)
		if len(w) < 4 || strings.IndexFunc(w, func(r rune) bool { return !unicode.IsLower(r) }) >= 0 {
			continue
		}
		keys, keyIDs = append(keys, w), append(keyIDs, id)
	}
	if len(keys) < 4 {
		t.Fatalf("keys %v", keys)
	}
	prefix := c.Tok.Encode(`<tool_call>{"name": "lookup", "arguments": {"key": "`, false)
	suffix := c.Tok.Encode(`"}}</tool_call>`, false)
	var steps forcedSteps
	for _, id := range prefix {
		steps = append(steps, []int{id})
	}
	steps = append(steps, keyIDs)
	for _, id := range suffix {
		steps = append(steps, []int{id})
	}
	tools := json.RawMessage(lookupTools)
	prompts := []string{"What is the value?", "Look it up.", "Which value is stored?", "Find the value."}
	render := func(msgs []json.RawMessage) []int {
		b, _ := json.Marshal(msgs)
		in := chattemplateInput(b, c)
		in.Tools = tools
		text, err := c.Template.Render(in)
		if err != nil {
			t.Fatal(err)
		}
		return c.Tok.Encode(text, false)
	}
	const samples, target = 8, 0
	var o *AdamW
	var rewards []float64
	for step := 0; step < 12; step++ {
		var groups []trainingdata.TrajectoryGroup
		hits, total := 0, 0
		for pi, p := range prompts {
			user := json.RawMessage(fmt.Sprintf(`{"role":"user","content":%q}`, p))
			seed := int64(step*100 + pi)
			params := sample.Defaults()
			params.Seed = &seed
			calls, callLps := sampleOnce(t, eng, &inference.Request{Prompt: render([]json.RawMessage{user}), Params: params, N: samples,
				MaxTokens: len(steps), IgnoreEOS: true, Adapter: a, Logprobs: true, Guide: steps})
			var g trainingdata.TrajectoryGroup
			for k := 0; k < samples; k++ {
				key := c.Tok.Decode(calls[k][len(prefix):len(prefix)+1], false)
				args, _ := json.Marshal(map[string]string{"key": key})
				id := fmt.Sprintf("call_%d_%d", pi, k)
				callChoice, _ := json.Marshal(map[string]any{"index": k, "finish_reason": "tool_calls",
					"message":  map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "lookup", "arguments": string(args)}}}},
					"logprobs": plainLogprobs(c, calls[k], callLps[k])})
				result := json.RawMessage(fmt.Sprintf(`{"role":"tool","tool_call_id":%q,"content":"value of %s"}`, id, key))
				// The call sent back, its content "" as the template gets a tool-call message
				// (trainingdata renders a null content so).
				callMsg := json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":"","tool_calls":[{"id":%q,"type":"function","function":{"name":"lookup","arguments":%q}}]}`, id, args))
				// The answer after the tool's result.
				aseed := seed*samples + int64(k)
				aparams := sample.Defaults()
				aparams.Seed = &aseed
				ans, ansLps := sampleOnce(t, eng, &inference.Request{Prompt: render([]json.RawMessage{user, callMsg, result}), Params: aparams, N: 1,
					MaxTokens: 2, IgnoreEOS: true, Adapter: a, Logprobs: true})
				ansChoice, _ := json.Marshal(map[string]any{"index": 0, "finish_reason": "length",
					"message":  map[string]any{"role": "assistant", "content": c.Tok.Decode(ans[0], true)},
					"logprobs": plainLogprobs(c, ans[0], ansLps[0])})
				r := 0.0
				if key == keys[target] {
					r, hits = 1, hits+1
				}
				total++
				g.Trajectories = append(g.Trajectories, trainingdata.Trajectory{Reward: r, Tools: tools,
					MessagesAndChoices: []json.RawMessage{user, callChoice, result, ansChoice}})
			}
			groups = append(groups, g)
		}
		mean := float64(hits) / float64(total)
		rewards = append(rewards, mean)
		if step >= 4 && mean >= 0.9 {
			break
		}
		if err := c.CheckGroups(groups, false); err != nil {
			t.Fatal(err)
		}
		met, o2, err := RLStep(context.Background(), e, c, groups, RLConfig{LearningRate: 5e-3, ScaleRewards: true}, o)
		if err != nil && !errors.Is(err, ErrNothingToTrain) {
			t.Fatal(err)
		}
		o = o2
		t.Logf("step %d reward %.2f loss %.4f trajectories %d trainable tokens %d unknown %d", step, mean, met.Loss, met.NumTrajectories, met.NumTrainableTokens, met.NumUnknownTokens)
	}
	n := len(rewards)
	first, last := rewards[0], (rewards[n-1]+rewards[n-2])/2
	t.Logf("keys %q, mean reward per step %.2f", keys, rewards)
	if first > 0.45 || last < first+0.35 {
		t.Fatalf("mean reward %.2f -> %.2f (%.2f)", first, last, rewards)
	}
}

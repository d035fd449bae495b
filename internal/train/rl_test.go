package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
)

func reward(v float64) *float64 { return &v }

// choiceJSON builds an OpenAI choice as Hone's chat API returns it with logprobs and
// return_token_ids.
func choiceJSON(c *Chat, ids []int, lps []float32) json.RawMessage {
	var content []map[string]any
	for i, id := range ids {
		content = append(content, map[string]any{"token": fmt.Sprintf("token_id:%d", id), "logprob": lps[i], "bytes": []int{}})
	}
	b, _ := json.Marshal(map[string]any{"index": 0, "finish_reason": "length", "token_ids": ids,
		"message": map[string]any{"role": "assistant", "content": c.Tok.Decode(ids, true)}, "logprobs": map[string]any{"content": content}})
	return b
}

func TestRLTokenizeAndErrors(t *testing.T) {
	dir := tinyDir(t, "llama", 0.02)
	c, err := LoadChat(dir)
	if err != nil {
		t.Fatal(err)
	}
	user := json.RawMessage(`{"role":"user","content":"Say something"}`)
	ids := []int{100, 101, 102}
	s, err := c.tokenizeTrajectory([]json.RawMessage{user, choiceJSON(c, ids, []float32{-1, -2, -3})}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var sampled []int
	var lps []float64
	for i, sm := range s.sampled {
		if sm {
			sampled = append(sampled, s.seq.Tokens[i])
			lps = append(lps, s.oldLogp[i])
		}
	}
	if fmt.Sprint(sampled) != "[100 101 102]" || fmt.Sprint(lps) != "[-1 -2 -3]" {
		t.Fatalf("sampled %v logprobs %v", sampled, lps)
	}
	// The rendered text around the choice is kept: the sequence decodes to the template's text.
	if txt := c.Tok.Decode(s.seq.Tokens, false); !strings.Contains(txt, "Say something") || !strings.Contains(txt, "<|im_end|>") {
		t.Fatalf("text %q", txt)
	}
	// No logprobs: an error unless allowed.
	noLP := json.RawMessage(`{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hello"}}`)
	if _, err := c.tokenizeTrajectory([]json.RawMessage{user, noLP}, nil, false); err == nil || !strings.Contains(err.Error(), "allow_training_without_logprobs") {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.tokenizeTrajectory([]json.RawMessage{user, noLP}, nil, true); err != nil {
		t.Fatal(err)
	}
	// Groups whose rewards are all equal train nothing, and say so.
	m, _ := model.Load(dir, model.LoadOptions{})
	a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 2})
	e, _ := NewEngine(m, a)
	g := TrajectoryGroup{Trajectories: []Trajectory{
		{MessagesAndChoices: []json.RawMessage{user, choiceJSON(c, ids, []float32{-1, -2, -3})}, Reward: reward(1)},
		{MessagesAndChoices: []json.RawMessage{user, choiceJSON(c, ids, []float32{-1, -2, -3})}, Reward: reward(1)},
	}}
	if _, _, err := RLStep(context.Background(), e, c, []TrajectoryGroup{g}, RLConfig{}, nil); !errors.Is(err, ErrNothingToTrain) {
		t.Fatalf("err = %v", err)
	}
	if _, _, err := RLStep(context.Background(), e, c, []TrajectoryGroup{g}, RLConfig{Loss: "dpo"}, nil); err == nil {
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
			c, err := LoadChat(dir)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 8, Alpha: 16, Seed: 2})
			e, _ := NewEngine(m, a)
			eng := inference.New(m, inference.Options{})
			defer eng.Close()
			target := func(id int) bool { return id%8 == 3 }
			prompts := []string{"Pick a word.", "Say one word.", "Any word?", "Word please."}
			var o *AdamW
			first, last := -1.0, 0.0
			for step := 0; step < 60; step++ {
				var groups []TrajectoryGroup
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
						MaxTokens: 1, IgnoreEOS: true, Adapter: a, Logprobs: true, PromptLogprobs: -1})
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
					var g TrajectoryGroup
					for k := 0; k < 8; k++ {
						r := 0.0
						if target(toks[k][0]) {
							r, hits = 1, hits+1
						}
						total++
						g.Trajectories = append(g.Trajectories, Trajectory{Reward: reward(r),
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

func chattemplateInput(msgs []byte, c *Chat) chattemplate.Input {
	return chattemplate.Input{Messages: msgs, AddGenerationPrompt: true, SpecialTokens: c.Special}
}

package train

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/trainingdata"
)

// lookupTools, plainEntries and plainToolChoice are as in internal/trainingdata's tests: a
// tool, and the logprobs entries and tool-call choices a plain OpenAI client gets.
const lookupTools = `[{"type":"function","function":{"name":"lookup","description":"Look a key up.","parameters":{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}}}]`

// plainEntries are the logprobs entries a plain OpenAI client gets for ids (token strings
// and bytes, no ids).
func plainEntries(c *trainingdata.ChatTokenizer, ids []int) []map[string]any {
	var out []map[string]any
	for i, id := range ids {
		tok := c.Tok.Decode([]int{id}, false)
		bs := []int{}
		for _, b := range []byte(tok) {
			bs = append(bs, int(b))
		}
		out = append(out, map[string]any{"token": tok, "logprob": -0.5 - float64(i%3), "bytes": bs, "top_logprobs": []any{}})
	}
	return out
}

// plainToolChoice is a tool-call choice as a plain OpenAI client gets it: the message with
// tool_calls (arguments a JSON string, content null) and logprobs over the generated text.
func plainToolChoice(c *trainingdata.ChatTokenizer, id, key, generated string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"index": 0, "finish_reason": "tool_calls",
		"message":  map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "lookup", "arguments": fmt.Sprintf(`{"key": %q}`, key)}}}},
		"logprobs": map[string]any{"content": plainEntries(c, c.Tok.Encode(generated, false))}})
	return b
}

// TestAdditionalHistoriesTrainAsSequences: each additional history of a trajectory (a
// sub-agent's conversation, with its own tools) is trained as its own sequence with the
// trajectory's advantage, and an error in one names it.
func TestAdditionalHistoriesTrainAsSequences(t *testing.T) {
	dir := tinyDir(t, "llama", 0.02)
	c, err := trainingdata.LoadChat(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := model.Load(dir, model.LoadOptions{})
	a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 2})
	e, _ := NewTrainer(m, a)
	user := json.RawMessage(`{"role":"user","content":"Find it."}`)
	traj := func(r float64, ids ...int) trainingdata.Trajectory {
		call := plainToolChoice(c, "c1", "x", `<tool_call>{"name": "lookup", "arguments": {"key": "x"}}</tool_call>`)
		return trainingdata.Trajectory{Reward: r, Tools: json.RawMessage(lookupTools),
			MessagesAndChoices: []json.RawMessage{user, choiceJSON(c, ids, []float32{-1, -1})},
			AdditionalHistories: []trainingdata.History{{Tools: json.RawMessage(lookupTools),
				MessagesAndChoices: []json.RawMessage{user, call, json.RawMessage(`{"role":"tool","tool_call_id":"c1","content":"found"}`), choiceJSON(c, ids, []float32{-2, -2})}}}}
	}
	g := trainingdata.TrajectoryGroup{Trajectories: []trainingdata.Trajectory{traj(1, 100, 101), traj(0, 102, 103)}}
	met, _, err := RLStep(context.Background(), e, c, []trainingdata.TrajectoryGroup{g}, RLConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Per trajectory: its own choice (2 tokens), and in the additional history the call
	// (which ended on its turn's end: that token is trained too) and the final choice (2).
	calls := len(c.Tok.Encode(`<tool_call>{"name": "lookup", "arguments": {"key": "x"}}</tool_call>`, false)) + 1
	if met.NumTrajectories != 4 || met.NumTrainableTokens != 2*(2+calls+2) {
		t.Fatalf("%d sequences, %d trainable tokens (want 4, %d)", met.NumTrajectories, met.NumTrainableTokens, 2*(2+calls+2))
	}
	bad := traj(0, 102, 103)
	bad.AdditionalHistories[0].MessagesAndChoices[1] = json.RawMessage(`{"index":0,"message":{"role":"assistant","content":"x"}}`)
	g.Trajectories[1] = bad
	err = c.CheckGroups([]trainingdata.TrajectoryGroup{g}, false)
	if err == nil || err.Error() != "trajectory_groups[0].trajectories[1].additional_histories[0] messages_and_choices[1]: the choice has no logprobs; sample with logprobs=true or set allow_training_without_logprobs" {
		t.Fatalf("err = %v", err)
	}
}

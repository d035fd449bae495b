package training

import (
	"encoding/json"
	"testing"

	"github.com/honeai/hone/internal/trace"
)

// TestExampleOfCallShapes reads a Hone-traced completion and one the weave SDK's OpenAI
// integration records (serialized ChatCompletion with _type keys, null refusal and tool_calls),
// and says why a call gives no example.
func TestExampleOfCallShapes(t *testing.T) {
	end := "2026-01-01T00:00:01Z"
	call := func(inputs, output string) trace.CallSchema {
		return trace.CallSchema{Inputs: json.RawMessage(inputs), Output: json.RawMessage(output), EndedAt: &end}
	}
	hone := call(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"tools":[{"type":"function","function":{"name":"f"}}]}`,
		`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop","logprobs":{"content":[]}}]}`)
	ex, reason := exampleOf(hone)
	if reason != "" || string(ex.reply) != `{"role":"assistant","content":"hello"}` || len(ex.tools) != 1 || !ex.logprobs {
		t.Fatalf("hone call: %q %s %v", reason, ex.reply, ex.logprobs)
	}
	sdk := call(`{"self":"weave:///e/p/object/OpenAI:x","messages":[{"role":"system","content":"s","_type":"x"},{"role":"user","content":"q"}],"model":"gpt-4o"}`,
		`{"_type":"ChatCompletion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"a","refusal":null,"tool_calls":null,"_type":"ChatCompletionMessage"}}]}`)
	ex, reason = exampleOf(sdk)
	if reason != "" || len(ex.messages) != 2 || string(ex.messages[0]) != `{"role":"system","content":"s"}` || string(ex.reply) != `{"role":"assistant","content":"a"}` || ex.logprobs {
		t.Fatalf("sdk call: %q %s %s", reason, ex.messages, ex.reply)
	}
	exc := "boom"
	failed := hone
	failed.Exception = &exc
	for name, c := range map[string]trace.CallSchema{
		"the call failed (exception)":                    failed,
		"no inputs.messages":                             call(`{"prompt":"x"}`, `{"choices":[]}`),
		"no output.choices":                              call(`{"messages":[{"role":"user","content":"q"}]}`, `null`),
		"the reply is empty or not an assistant message": call(`{"messages":[{"role":"user","content":"q"}]}`, `{"choices":[{"message":{"role":"assistant","content":""}}]}`),
	} {
		if _, reason := exampleOf(c); reason != name {
			t.Errorf("%s: reason %q", name, reason)
		}
	}
}

// TestRewardOf: the latest feedback that gives a reward wins: a 👍/👎 reaction (1/0), a
// numeric or boolean reward or score in the payload, or a scorer's output.
func TestRewardOf(t *testing.T) {
	fb := func(typ, payload string) feedback { return feedback{Type: typ, Payload: json.RawMessage(payload)} }
	for _, c := range []struct {
		name string
		fb   []feedback
		want float64
		ok   bool
	}{
		{"thumbs up", []feedback{fb("wandb.reaction.1", `{"emoji":"👍"}`)}, 1, true},
		{"thumbs down, skin tone", []feedback{fb("wandb.reaction.1", `{"emoji":"👎🏽"}`)}, 0, true},
		{"other emoji", []feedback{fb("wandb.reaction.1", `{"emoji":"🎉"}`)}, 0, false},
		{"note", []feedback{fb("wandb.note.1", `{"note":"good"}`)}, 0, false},
		{"reward field", []feedback{fb("reward", `{"reward":0.7}`)}, 0.7, true},
		{"score bool", []feedback{fb("judge", `{"score":true}`)}, 1, true},
		{"scorer number", []feedback{fb("wandb.runnable.exact", `{"output":0.25}`)}, 0.25, true},
		{"scorer object", []feedback{fb("wandb.runnable.exact", `{"output":{"correct":true,"score":0.5}}`)}, 0.5, true},
		{"latest wins", []feedback{fb("reward", `{"reward":0.7}`), fb("wandb.reaction.1", `{"emoji":"👎"}`)}, 0, true},
	} {
		got, ok := rewardOf(c.fb)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

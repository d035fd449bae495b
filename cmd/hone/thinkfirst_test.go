package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestRequiredToolCallAfterThinking: on a thinking template, a required tool call asked with
// enable_thinking true lets the model think first (the constraint starts after </think>): with
// <think> and </think> favoured by logit_bias the answer is an empty think block, then the
// call. Without enable_thinking (or with it false) the constraint holds from the first token:
// no <think> can be sampled.
func TestRequiredToolCallAfterThinking(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	id := func(text string) int {
		code, _, b := do(t, "POST", s.url+"/tokenize", bearer, fmt.Sprintf(`{"model":"demo","prompt":%q,"add_special_tokens":false}`, text))
		var r struct {
			Tokens []int `json:"tokens"`
		}
		if code != 200 || json.Unmarshal(b, &r) != nil || len(r.Tokens) != 1 {
			t.Fatalf("%s is not one token: %d %s", text, code, b)
		}
		return r.Tokens[0]
	}
	think, unthink := id("<think>"), id("</think>")
	ask := func(kwargs string) ([]int, []any) {
		t.Helper()
		body := fmt.Sprintf(`{"model":"demo","messages":[{"role":"user","content":"Weather in Paris?"}],
			"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Rome"]}},"required":["city"]}}}],
			"tool_choice":"required","parallel_tool_calls":false,"max_tokens":200,"return_token_ids":true,
			"logit_bias":{"%d":50,"%d":100}%s}`, think, unthink, kwargs)
		code, _, b := do(t, "POST", s.url+"/v1/chat/completions", bearer, body)
		r := jsonOf(t, code, b, 200)
		ch := r["choices"].([]any)[0].(map[string]any)
		var ids []int
		for _, x := range ch["token_ids"].([]any) {
			ids = append(ids, int(x.(float64)))
		}
		calls, _ := ch["message"].(map[string]any)["tool_calls"].([]any)
		return ids, calls
	}
	ids, calls := ask(`,"chat_template_kwargs":{"enable_thinking":true}`)
	if len(ids) < 3 || ids[0] != think || ids[1] != unthink || len(calls) != 1 {
		t.Fatalf("thinking first: tokens %v, calls %v", ids, calls)
	}
	for _, kw := range []string{``, `,"chat_template_kwargs":{"enable_thinking":false}`} {
		ids, calls := ask(kw)
		if ids[0] == think || len(calls) != 1 {
			t.Fatalf("%q: tokens %v, calls %v", kw, ids, calls)
		}
	}
}

// TestConstrainedAnswerIsNoReasoning: on a template that thinks (the demo model's), a JSON
// answer constrained from its first token (no thinking asked) is all content, even when a
// string in it holds "</think>" (the random-weight model writes one under some seeds): no
// reasoning is split off, and a finished answer is the JSON.
func TestConstrainedAnswerIsNoReasoning(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	split := 0
	for seed := 1; seed <= 30; seed++ {
		body := fmt.Sprintf(`{"model":"demo","messages":[{"role":"user","content":"Weather?"}],"max_tokens":64,"temperature":1,"seed":%d,
			"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object","properties":{"t":{"type":"string"}},"required":["t"]}}}}`, seed)
		code, _, b := do(t, "POST", s.url+"/v1/chat/completions", bearer, body)
		var r struct {
			Choices []struct {
				Message struct {
					Content   *string `json:"content"`
					Reasoning *string `json:"reasoning"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if json.Unmarshal(b, &r) != nil || code != 200 {
			t.Fatalf("seed %d: %d %s", seed, code, b)
		}
		c := r.Choices[0]
		if c.Message.Reasoning != nil {
			t.Fatalf("seed %d: reasoning split off a constrained answer: %s", seed, b)
		}
		if c.Message.Content != nil && strings.Contains(*c.Message.Content, "</think>") {
			split++
		}
		if v := map[string]any{}; c.FinishReason == "stop" && json.Unmarshal([]byte(*c.Message.Content), &v) != nil {
			t.Fatalf("seed %d: the finished answer is not the JSON: %s", seed, b)
		}
	}
	t.Logf("%d of 30 answers hold </think> in a string", split)
}

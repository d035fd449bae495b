package trainingdata

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// choiceJSON builds an OpenAI choice as Hone's chat API returns it with logprobs and
// return_token_ids.
func choiceJSON(c *ChatTokenizer, ids []int, lps []float32) json.RawMessage {
	var content []map[string]any
	for i, id := range ids {
		content = append(content, map[string]any{"token": fmt.Sprintf("token_id:%d", id), "logprob": lps[i], "bytes": []int{}})
	}
	b, _ := json.Marshal(map[string]any{"index": 0, "finish_reason": "length", "token_ids": ids,
		"message": map[string]any{"role": "assistant", "content": c.Tok.Decode(ids, true)}, "logprobs": map[string]any{"content": content}})
	return b
}

// TestTokenizeTrajectory: a choice's sampled ids and logprobs are its tokens and theirs, the
// template's text around it is context, and a choice without logprobs is an error unless
// allowed.
func TestTokenizeTrajectory(t *testing.T) {
	dir := tinyDir(t, "llama", 0.02)
	c, err := LoadChat(dir)
	if err != nil {
		t.Fatal(err)
	}
	user := json.RawMessage(`{"role":"user","content":"Say something"}`)
	ids := []int{100, 101, 102}
	s, err := c.TokenizeTrajectory([]json.RawMessage{user, choiceJSON(c, ids, []float32{-1, -2, -3})}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var sampled []int
	var lps []float64
	for i, sm := range s.Sampled {
		if sm {
			sampled = append(sampled, s.Tokens[i])
			lps = append(lps, s.OldLogp[i])
		}
	}
	if fmt.Sprint(sampled) != "[100 101 102]" || fmt.Sprint(lps) != "[-1 -2 -3]" {
		t.Fatalf("sampled %v logprobs %v", sampled, lps)
	}
	// The rendered text around the choice is kept: the sequence decodes to the template's text.
	if txt := c.Tok.Decode(s.Tokens, false); !strings.Contains(txt, "Say something") || !strings.Contains(txt, "<|im_end|>") {
		t.Fatalf("text %q", txt)
	}
	// No logprobs: an error unless allowed.
	noLP := json.RawMessage(`{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hello"}}`)
	if _, err := c.TokenizeTrajectory([]json.RawMessage{user, noLP}, nil, false); err == nil || !strings.Contains(err.Error(), "allow_training_without_logprobs") {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.TokenizeTrajectory([]json.RawMessage{user, noLP}, nil, true); err != nil {
		t.Fatal(err)
	}
}

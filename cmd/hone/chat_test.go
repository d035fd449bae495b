package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestChatEndToEnd drives the chat routes of a started server on its demo model over HTTP.
func TestChatEndToEnd(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	url := s.url + "/v1/chat/completions"

	code, _, body := do(t, "GET", s.url+"/v1/models", bearer, "")
	if code != 200 || !strings.Contains(string(body), `"id":"demo"`) {
		t.Fatalf("models: %d %s", code, body)
	}
	type resp struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
			Logprobs     *struct {
				Content []struct {
					Token       string            `json:"token"`
					TopLogprobs []json.RawMessage `json:"top_logprobs"`
				} `json:"content"`
			} `json:"logprobs"`
			TokenIDs []int `json:"token_ids"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
		PromptTokenIDs []int `json:"prompt_token_ids"`
	}
	req := `{"messages":[{"role":"user","content":"Hello!"}],"max_tokens":8,"seed":11,"temperature":0.9,"n":2,"logprobs":true,"top_logprobs":3,"return_token_ids":true}`
	code, _, body = do(t, "POST", url, bearer, req)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var r1 resp
	json.Unmarshal(body, &r1)
	if len(r1.Choices) != 2 || r1.Usage.TotalTokens != r1.Usage.PromptTokens+r1.Usage.CompletionTokens || len(r1.PromptTokenIDs) != r1.Usage.PromptTokens {
		t.Fatalf("response %s", body)
	}
	completion := 0
	for _, c := range r1.Choices {
		completion += len(c.TokenIDs)
		if c.FinishReason == "length" && len(c.TokenIDs) != 8 {
			t.Fatalf("finish length with %d tokens", len(c.TokenIDs))
		}
		if len(c.Logprobs.Content) != len(c.TokenIDs) || len(c.Logprobs.Content[0].TopLogprobs) != 3 {
			t.Fatalf("logprobs %s", body)
		}
	}
	if completion != r1.Usage.CompletionTokens {
		t.Fatalf("usage %d, tokens %d", r1.Usage.CompletionTokens, completion)
	}
	// Same seed, same output.
	_, _, body2 := do(t, "POST", url, bearer, req)
	var r2 resp
	json.Unmarshal(body2, &r2)
	for i := range r1.Choices {
		if r1.Choices[i].Message.Content != r2.Choices[i].Message.Content {
			t.Fatalf("seeded outputs differ: %q vs %q", r1.Choices[i].Message.Content, r2.Choices[i].Message.Content)
		}
	}
	// Streaming gives the same text as non-streaming under the same seed.
	one := `{"messages":[{"role":"user","content":"Hello!"}],"max_tokens":10,"seed":5,"ignore_eos":true%s}`
	_, _, body = do(t, "POST", url, bearer, strings.Replace(one, "%s", "", 1))
	var plain resp
	json.Unmarshal(body, &plain)
	code, hdr, body := do(t, "POST", url, bearer, strings.Replace(one, "%s", `,"stream":true,"stream_options":{"include_usage":true}`, 1))
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", code, body)
	}
	var streamed strings.Builder
	sawUsage, sawDone, finish := false, false, ""
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			sawDone = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("bad chunk %q", data)
		}
		for _, ch := range c.Choices {
			streamed.WriteString(ch.Delta.Content)
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil && len(c.Choices) == 0 {
			sawUsage = c.Usage.CompletionTokens == 10
		}
	}
	if streamed.String() != plain.Choices[0].Message.Content || !sawUsage || !sawDone || finish != "length" {
		t.Fatalf("stream %q (usage %v done %v finish %q) vs %q", streamed.String(), sawUsage, sawDone, finish, plain.Choices[0].Message.Content)
	}
	// A stop string cuts the text where it starts.
	if text := plain.Choices[0].Message.Content; len(text) > 4 && utf8.ValidString(text[2:4]) && !strings.Contains(text, "\uFFFD") {
		stop := text[2:4]
		b, _ := json.Marshal(stop)
		_, _, body = do(t, "POST", url, bearer, strings.Replace(one, "%s", `,"stop":[`+string(b)+`]`, 1))
		var st resp
		json.Unmarshal(body, &st)
		want := text[:strings.Index(text, stop)]
		if st.Choices[0].Message.Content != want || st.Choices[0].FinishReason != "stop" || !strings.Contains(string(body), `"stop_reason":`+string(b)) {
			t.Fatalf("stop %q: %s (want content %q)", stop, body, want)
		}
	}
	// Render.
	code, _, body = do(t, "POST", url+"/render", bearer, `{"messages":[{"role":"user","content":"Hi"}]}`)
	if code != 200 || !strings.Contains(string(body), `<|im_start|>assistant\n`) {
		t.Fatalf("render %d %s", code, body)
	}
	// Errors, each in the envelope and naming the field.
	for _, c := range []struct {
		body, param string
		status      int
		msg         string
	}{
		{`{"model":"nope","messages":[{"role":"user","content":"x"}]}`, "model", 404, "The model `nope` does not exist."},
		{`{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}`, "top_logprobs", 400, "Requested sample logprobs of 21, which is greater than max allowed: 20"},
		{`{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}`, "top_logprobs", 400, "`logprobs` must be set to true"},
		{`{"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}`, "stream_options", 400, "Stream options can only be defined when `stream=True`."},
		{`{"messages":[{"role":"assistant","content":"x"}],"continue_final_message":true}`, "continue_final_message", 400, "Cannot set both"},
		{`{"messages":[{"role":"user","content":"x"}],"priority":3}`, "priority", 400, "Priority scheduling is not enabled"},
		{`{"messages":[{"role":"user","content":"x"}],"temperature":-1}`, "temperature", 400, "temperature must be non-negative"},
		{`{"messages":[{"role":"user","content":"x"}],"n":2,"temperature":0}`, "n", 400, "n must be 1 when using greedy sampling"},
		// Overflow in admission (issue 33 item 4): n and max_tokens past any product's range.
		{`{"messages":[{"role":"user","content":"x"}],"n":4611686018427387904,"max_tokens":1}`, "n", 400, "n must be at most 16384, got 4611686018427387904."},
		{`{"messages":[{"role":"user","content":"x"}],"n":9223372036854775807,"max_tokens":9223372036854775807}`, "n", 400, "n must be at most 16384"},
		{`{"messages":[{"role":"user","content":"x"}],"n":2,"max_tokens":9223372036854775807}`, "max_tokens", 400, "cannot be greater than max_model_len"},
		{`{"messages":[{"role":"user","content":"x"}],"n":9223372036854775808}`, "n", 400, "n"},
		{`{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"function","function":{"name":"g"}},"tools":[{"type":"function","function":{"name":"f"}}]}`, "tool_choice", 400, "does not match any of the specified `tools`"},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":100000}`, "max_tokens", 400, "cannot be greater than max_model_len"},
		{`{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}`, "temperature", 400, "temperature"},
		{`{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"tokenize":true}}`, "chat_template_kwargs", 400, "Found unexpected chat template kwargs"},
		// An image (or audio, video, file) for a text-only model, as vLLM refuses it.
		{`{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`, "messages[1].content[1]", 400, "is not a multimodal model"},
		{`{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, "messages[0].content[0]", 400, "is not a multimodal model"},
	} {
		code, _, body := do(t, "POST", url, bearer, c.body)
		if code != c.status {
			t.Errorf("%s: status %d %s", c.body, code, body)
			continue
		}
		e := envelope(t, body)
		if e.Param == nil || *e.Param != c.param || !strings.Contains(e.Message, c.msg) || e.Code != c.status {
			t.Errorf("%s: %+v (param %v)", c.body, e, e.Param)
		}
	}
	code, _, _ = do(t, "POST", url, "", `{"messages":[]}`)
	if code != 401 {
		t.Fatalf("no key: %d", code)
	}
	code, _, body = do(t, "POST", url+"/bogus", bearer, `{}`)
	if code != 404 || !strings.Contains(string(body), "render") {
		t.Fatalf("unknown segment: %d %s", code, body)
	}
}

// TestPromptLogprobsLongPrompt: prompt_logprobs over HTTP for a prompt that takes several
// prefill chunks (--max-batch-tokens 8): one entry per prompt token, the first null and
// every other one holding the token itself.
func TestPromptLogprobsLongPrompt(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--max-batch-tokens", "8")
	bearer := "Bearer " + initialKey(t, dir)
	req := `{"model":"demo","messages":[{"role":"user","content":"Tell me about the sea, the wind, the long grey waves and the gulls above the harbour."}],"max_tokens":2,"prompt_logprobs":1,"return_token_ids":true}`
	code, _, body := do(t, "POST", s.url+"/v1/chat/completions", bearer, req)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var r struct {
		PromptLogprobs []map[string]json.RawMessage `json:"prompt_logprobs"`
		PromptTokenIDs []int                        `json:"prompt_token_ids"`
		Usage          struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if r.Usage.PromptTokens <= 16 || len(r.PromptLogprobs) != r.Usage.PromptTokens || r.PromptLogprobs[0] != nil {
		t.Fatalf("%d prompt tokens, %d prompt_logprobs (first %v): %s", r.Usage.PromptTokens, len(r.PromptLogprobs), r.PromptLogprobs[0], body)
	}
	for i := 1; i < len(r.PromptLogprobs); i++ {
		if _, ok := r.PromptLogprobs[i][strconv.Itoa(r.PromptTokenIDs[i])]; !ok {
			t.Fatalf("prompt_logprobs[%d] lacks prompt token %d: %v", i, r.PromptTokenIDs[i], r.PromptLogprobs[i])
		}
	}
}

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func postWithHeader(t *testing.T, url, authz, header, value, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", authz)
	req.Header.Set("Content-Type", "application/json")
	if header != "" {
		req.Header.Set(header, value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestChatTracing: completions that name a trace project are recorded there as calls with the
// request as inputs, the response as output and the usage under the model, which the usage
// routes roll up; another entity's project is a 403 and records nothing.
func TestChatTracing(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	key := initialKey(t, dir)
	url := s.url + "/v1/chat/completions"
	const hdr = "X-Hone-Trace-Project"
	req := `{"messages":[{"role":"user","content":"Trace me"}],"max_tokens":5,"ignore_eos":true,"seed":3%s}`
	code, body := postWithHeader(t, url, "Bearer "+key, hdr, "local/chats", strings.Replace(req, "%s", "", 1))
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var plain struct {
		ID      string `json:"id"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	json.Unmarshal(body, &plain)
	if code, body = postWithHeader(t, url, "Bearer "+key, hdr, "local/chats", strings.Replace(req, "%s", `,"stream":true`, 1)); code != 200 {
		t.Fatalf("stream: %d %s", code, body)
	}
	// Not traced: no header. Refused: another entity's project, or a malformed one.
	postWithHeader(t, url, "Bearer "+key, "", "", strings.Replace(req, "%s", "", 1))
	if code, body = postWithHeader(t, url, "Bearer "+key, hdr, "other/chats", strings.Replace(req, "%s", "", 1)); code != 403 || !strings.Contains(string(body), hdr) {
		t.Fatalf("other entity: %d %s", code, body)
	}
	if code, _ = postWithHeader(t, url, "Bearer "+key, hdr, "no-slash", strings.Replace(req, "%s", "", 1)); code != 400 {
		t.Fatalf("malformed project: %d", code)
	}

	code, _, body = do(t, "POST", s.url+"/calls/stream_query", basic("api", key), `{"project_id":"local/chats","sort_by":[{"field":"started_at","direction":"asc"}]}`)
	if code != 200 {
		t.Fatalf("stream_query: %d %s", code, body)
	}
	type call struct {
		ID      string `json:"id"`
		OpName  string `json:"op_name"`
		Inputs  map[string]any
		Output  map[string]any
		Summary struct {
			Usage map[string]map[string]float64 `json:"usage"`
		}
		Exception *string
	}
	var calls []call
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		var c call
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		calls = append(calls, c)
	}
	if len(calls) != 2 {
		t.Fatalf("%d calls traced, want 2: %s", len(calls), body)
	}
	for i, c := range calls {
		u := c.Summary.Usage["demo"]
		if c.OpName != "openai.chat.completions.create" || c.Exception != nil || u["requests"] != 1 ||
			u["prompt_tokens"] != float64(plain.Usage.PromptTokens) || u["completion_tokens"] != 5 || u["total_tokens"] != float64(plain.Usage.PromptTokens+5) {
			t.Fatalf("call %d: %+v", i, c)
		}
		msgs, _ := c.Inputs["messages"].([]any)
		if len(msgs) != 1 || c.Inputs["max_tokens"] != float64(5) {
			t.Fatalf("call %d inputs %v", i, c.Inputs)
		}
		choices, _ := c.Output["choices"].([]any)
		content := choices[0].(map[string]any)["message"].(map[string]any)["content"]
		if content != plain.Choices[0].Message.Content {
			t.Fatalf("call %d output content %q, response %q", i, content, plain.Choices[0].Message.Content)
		}
	}
	if calls[0].Output["id"] != plain.ID {
		t.Fatalf("traced output id %v, response id %s", calls[0].Output["id"], plain.ID)
	}
	var usage struct {
		CallUsage map[string]map[string]map[string]float64 `json:"call_usage"`
	}
	post(t, s, key, "/calls/usage", map[string]any{"project_id": "local/chats", "call_ids": []string{calls[0].ID, calls[1].ID}}, &usage)
	if got := usage.CallUsage[calls[1].ID]["demo"]["completion_tokens"]; got != 5 {
		t.Fatalf("calls/usage %v", usage.CallUsage)
	}
}

// TestResponsesTracing: a Responses API request with the trace header is recorded as Weave's
// OpenAI integration records one (op openai.responses.create, the request as inputs, the
// response object as output, the usage under the model), plain and streamed alike.
func TestResponsesTracing(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	key := initialKey(t, dir)
	url := s.url + "/v1/responses"
	var ids []string
	for _, stream := range []string{"false", "true"} {
		code, body := postWithHeader(t, url, "Bearer "+key, "X-Hone-Trace-Project", "local/agents",
			`{"model":"demo","input":"Trace me","max_output_tokens":4,"stream":`+stream+`}`)
		if code != 200 {
			t.Fatalf("stream %s: %d %s", stream, code, body)
		}
		if stream == "false" {
			var r map[string]any
			json.Unmarshal(body, &r)
			ids = append(ids, r["id"].(string))
		} else {
			i := strings.Index(string(body), `"id":"resp_`)
			ids = append(ids, string(body[i+6:i+6+len(ids[0])]))
		}
	}
	code, _, body := do(t, "POST", s.url+"/calls/stream_query", basic("api", key), `{"project_id":"local/agents","sort_by":[{"field":"started_at","direction":"asc"}]}`)
	if code != 200 {
		t.Fatalf("stream_query: %d %s", code, body)
	}
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d calls: %s", len(lines), body)
	}
	for i, line := range lines {
		var c struct {
			OpName  string         `json:"op_name"`
			Inputs  map[string]any `json:"inputs"`
			Output  map[string]any `json:"output"`
			Summary map[string]any `json:"summary"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(c.OpName, "openai.responses.create") || c.Inputs["input"] != "Trace me" || c.Output["object"] != "response" ||
			c.Output["id"] != ids[i] || c.Summary["usage"].(map[string]any)["demo"] == nil {
			t.Fatalf("call %d: %s", i, line)
		}
	}
}

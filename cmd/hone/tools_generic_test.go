package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smolTemplate is SmolLM2's chat template (ChatML with no tool syntax), as a JSON string.
func smolTemplate(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../internal/chattemplate/testdata/templates/smollm2.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(fx.ChatTemplate)
	return string(b)
}

type streamedCall struct{ Name, Arguments string }

// readChatStream adds up a chat completion stream: the content, the calls (each header
// delta's name, then its argument deltas) and the finish reason. It checks the deltas' shape
// as OpenAI sends it: a header with the id, type "function", the name and empty arguments;
// argument deltas without a name; one finish_reason.
func readChatStream(t *testing.T, b []byte) (content string, calls []streamedCall, finish string) {
	t.Helper()
	finishes := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		if line == "" || line == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index    int     `json:"index"`
						ID       *string `json:"id"`
						Type     *string `json:"type"`
						Function struct {
							Name      *string `json:"name"`
							Arguments *string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatalf("chunk %s: %v", line, err)
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				content += *c.Delta.Content
			}
			for _, tc := range c.Delta.ToolCalls {
				switch {
				case tc.ID != nil:
					if tc.Index != len(calls) || tc.Type == nil || *tc.Type != "function" || tc.Function.Name == nil || *tc.Function.Name == "" ||
						tc.Function.Arguments == nil || *tc.Function.Arguments != "" {
						t.Fatalf("header delta after %d calls: %s", len(calls), line)
					}
					calls = append(calls, streamedCall{Name: *tc.Function.Name})
				case tc.Function.Name != nil || tc.Function.Arguments == nil || tc.Index >= len(calls):
					t.Fatalf("argument delta: %s", line)
				default:
					calls[tc.Index].Arguments += *tc.Function.Arguments
				}
			}
			if c.FinishReason != nil {
				finishes++
				finish = *c.FinishReason
			}
		}
	}
	if finishes != 1 {
		t.Fatalf("%d finish reasons in the stream", finishes)
	}
	return content, calls, finish
}

// TestToolCallsGenericFormat: on a template with no tool syntax (SmolLM2's, given per
// request), tool_choice required, named and auto are answered in Hone's generic format: the
// tools described in a system preamble, calls that parse and match the tools' schemas, one
// call with parallel_tool_calls false; earlier calls and results are written into the
// conversation. Cut short by max_tokens at any point, the answer holds the complete calls
// only, never call markup in its content, and the stream adds up to the same answer.
func TestToolCallsGenericFormat(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	url := s.url + "/v1/chat/completions"
	base := `{"chat_template":` + smolTemplate(t) + `,"messages":[{"role":"user","content":"Weather in Paris for 3 days?"}],"tools":` + weatherTools

	code, _, b := do(t, "POST", url+"/render", bearer, base+`,"tool_choice":"required"}`)
	var rr struct{ Prompt string }
	json.Unmarshal(b, &rr)
	if code != 200 || !strings.HasPrefix(rr.Prompt, "<|im_start|>system\nYou can call functions") ||
		!strings.Contains(rr.Prompt, `"name": "get_weather"`) || !strings.Contains(rr.Prompt, `"name": "get_time"`) || !strings.Contains(rr.Prompt, "<tool_call></tool_call>") {
		t.Fatalf("render: %d %s", code, b)
	}

	for seed := 1; seed <= 3; seed++ {
		code, _, b := do(t, "POST", url, bearer, base+fmt.Sprintf(`,"tool_choice":"required","max_tokens":120,"temperature":1,"seed":%d}`, seed))
		var r toolResp
		json.Unmarshal(b, &r)
		if code != 200 || len(r.Choices[0].Message.ToolCalls) == 0 || r.Choices[0].Message.Content != nil {
			t.Fatalf("required: %d %s", code, b)
		}
		for _, tc := range r.Choices[0].Message.ToolCalls {
			checkWeatherArgs(t, tc.Function.Name, tc.Function.Arguments)
		}
	}
	code, _, b = do(t, "POST", url, bearer, base+`,"tool_choice":"required","parallel_tool_calls":false,"max_tokens":120,"seed":5}`)
	var one toolResp
	json.Unmarshal(b, &one)
	if code != 200 || len(one.Choices[0].Message.ToolCalls) != 1 || one.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("parallel false: %d %s", code, b)
	}
	code, _, b = do(t, "POST", url, bearer, base+`,"tool_choice":{"type":"function","function":{"name":"get_time"}},"max_tokens":120,"seed":3}`)
	var named toolResp
	json.Unmarshal(b, &named)
	if code != 200 || len(named.Choices[0].Message.ToolCalls) != 1 || named.Choices[0].Message.ToolCalls[0].Function.Name != "get_time" {
		t.Fatalf("named: %d %s", code, b)
	}
	if code, _, b = do(t, "POST", url, bearer, base+`,"tool_choice":"auto","max_tokens":40,"seed":2}`); code != 200 {
		t.Fatalf("auto: %d %s", code, b)
	}

	// Cut short anywhere: find a seed whose answer makes two calls or more, then cut that
	// answer at token counts throughout it; streamed and not, the same answer, complete calls
	// only.
	seed, total := 0, 0
	for sd := 1; sd <= 12 && seed == 0; sd++ {
		code, _, b := do(t, "POST", url, bearer, base+fmt.Sprintf(`,"tool_choice":"required","max_tokens":300,"temperature":1,"seed":%d}`, sd))
		var r struct {
			toolResp
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		json.Unmarshal(b, &r)
		if code == 200 && len(r.Choices[0].Message.ToolCalls) >= 2 {
			seed, total = sd, r.Usage.CompletionTokens
		}
	}
	if seed == 0 {
		t.Fatal("no seed gave two calls")
	}
	cuts := 0
	for n := 1; n <= total; n += max(1, total/23) {
		body := base + fmt.Sprintf(`,"tool_choice":"required","max_tokens":%d,"temperature":1,"seed":%d`, n, seed)
		code, _, b := do(t, "POST", url, bearer, body+`}`)
		var r toolResp
		json.Unmarshal(b, &r)
		if code != 200 {
			t.Fatalf("max_tokens %d: %d %s", n, code, b)
		}
		c := r.Choices[0]
		content := ""
		if c.Message.Content != nil {
			content = *c.Message.Content
		}
		if strings.Contains(content, "<tool_call") || strings.Contains(content, `{"name"`) {
			t.Fatalf("max_tokens %d: call markup in the content: %s", n, b)
		}
		if c.FinishReason == "length" && len(c.Message.ToolCalls) > 0 {
			cuts++
		}
		for _, tc := range c.Message.ToolCalls {
			checkWeatherArgs(t, tc.Function.Name, tc.Function.Arguments)
		}
		code, _, sb := do(t, "POST", url, bearer, body+`,"stream":true}`)
		scontent, scalls, sfinish := readChatStream(t, sb)
		if code != 200 || scontent != content || sfinish != c.FinishReason || len(scalls) != len(c.Message.ToolCalls) {
			t.Fatalf("max_tokens %d: stream %q %v %s, non-streamed %s", n, scontent, scalls, sfinish, b)
		}
		for i, sc := range scalls {
			if tc := c.Message.ToolCalls[i]; sc.Name != tc.Function.Name || sc.Arguments != tc.Function.Arguments {
				t.Fatalf("max_tokens %d: streamed call %d %+v, non-streamed %+v", n, i, sc, tc.Function)
			}
		}
	}
	t.Logf("seed %d: %d tokens, %d cuts after a complete call", seed, total, cuts)
	if cuts == 0 {
		t.Fatalf("seed %d (%d tokens): no cut fell after a complete call", seed, total)
	}

	// A follow-up turn: the assistant's call is written in the generic format, the results as
	// the template renders a tool turn.
	follow := `{"chat_template":` + smolTemplate(t) + `,"messages":[{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"days\": 1}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"sunny, 21 C"}],"tools":` + weatherTools + `,"max_tokens":5}`
	code, _, b = do(t, "POST", url+"/render", bearer, follow)
	json.Unmarshal(b, &rr)
	if code != 200 || !strings.Contains(rr.Prompt, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 1}}\n</tool_call><|im_end|>") ||
		!strings.Contains(rr.Prompt, "<|im_start|>tool\nsunny, 21 C<|im_end|>") {
		t.Fatalf("render follow-up: %d %s", code, b)
	}
}

// smolGGUF is the real SmolLM2-135M-Instruct GGUF (scripts/test-setup.sh), or a skip.
func smolGGUF(t *testing.T) string {
	t.Helper()
	path := os.Getenv("HONE_SMOLLM2_GGUF")
	if path == "" {
		if requireConformance() {
			t.Fatal("HONE_SMOLLM2_GGUF is not set but HONE_REQUIRE_CONFORMANCE=1: scripts/test-setup.sh did not fetch the SmolLM2 GGUF")
		}
		t.Skip("HONE_SMOLLM2_GGUF is not set (scripts/test-setup.sh fetches the real SmolLM2-135M-Instruct GGUF)")
	}
	return path
}

// readResponsesStream adds up a Responses API stream: the output text, and the function
// calls as their items were done.
func readResponsesStream(t *testing.T, b []byte) (text string, calls []streamedCall, status string) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type     string                                 `json:"type"`
			Delta    string                                 `json:"delta"`
			Item     struct{ Type, Name, Arguments string } `json:"item"`
			Response struct{ Status string }                `json:"response"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event %s: %v", line, err)
		}
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.output_item.done":
			if ev.Item.Type == "function_call" {
				calls = append(calls, streamedCall{ev.Item.Name, ev.Item.Arguments})
			}
		case "response.completed", "response.incomplete":
			status = ev.Response.Status
		}
	}
	return text, calls, status
}

// TestToolCallsRealSmolLM2: the first try of the issue that found it, on the real SmolLM2
// GGUF (ChatML with no tool syntax): tool_choice required with two tools (one of them a
// pydantic-ai style final_result) is answered with calls; cut by max_tokens anywhere, chat
// completions and the Responses API each give the same complete calls streamed and not, and
// never call markup as text.
func TestToolCallsRealSmolLM2(t *testing.T) {
	gguf := smolGGUF(t)
	dir := t.TempDir()
	s := startServer(t, dir, "--model", "smol="+gguf, "--no-demo-model")
	bearer := "Bearer " + initialKey(t, dir)
	tools := `[{"type":"function","function":{"name":"get_weather","description":"Get the weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
		{"type":"function","function":{"name":"final_result","description":"The final response which ends this conversation","parameters":{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}}}]`
	rtools := `[{"type":"function","name":"get_weather","description":"Get the weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
		{"type":"function","name":"final_result","description":"The final response which ends this conversation","parameters":{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}}]`
	question := "What is the weather in Paris? Give the final result."
	checkArgs := func(name, args string) {
		var a map[string]string
		if err := json.Unmarshal([]byte(args), &a); err != nil || (name == "get_weather") == (a["city"] == "") && name != "final_result" || name == "final_result" && len(a) != 1 {
			t.Fatalf("call %s(%s): %v", name, args, err)
		}
	}
	for _, n := range []int{8, 30, 60, 160} {
		body := fmt.Sprintf(`{"model":"smol","messages":[{"role":"user","content":%q}],"tools":%s,"tool_choice":"required","max_tokens":%d,"temperature":0.7,"seed":1`, question, tools, n)
		code, _, b := do(t, "POST", s.url+"/v1/chat/completions", bearer, body+`}`)
		var r toolResp
		if json.Unmarshal(b, &r) != nil || code != 200 {
			t.Fatalf("max_tokens %d: %d %s", n, code, b)
		}
		c := r.Choices[0]
		content := ""
		if c.Message.Content != nil {
			content = *c.Message.Content
		}
		if strings.Contains(content, "tool_call") || strings.Contains(content, `"name"`) {
			t.Fatalf("max_tokens %d: markup in the content: %s", n, b)
		}
		for _, tc := range c.Message.ToolCalls {
			checkArgs(tc.Function.Name, tc.Function.Arguments)
		}
		t.Logf("max_tokens %d: finish %s, %d calls", n, c.FinishReason, len(c.Message.ToolCalls))
		if n == 160 && len(c.Message.ToolCalls) == 0 {
			t.Fatalf("max_tokens %d: no call: %s", n, b)
		}
		code, _, sb := do(t, "POST", s.url+"/v1/chat/completions", bearer, body+`,"stream":true}`)
		scontent, scalls, sfinish := readChatStream(t, sb)
		if code != 200 || scontent != content || sfinish != c.FinishReason || len(scalls) != len(c.Message.ToolCalls) {
			t.Fatalf("max_tokens %d: stream %q %v %s, non-streamed %s", n, scontent, scalls, sfinish, b)
		}
		for i, sc := range scalls {
			if tc := c.Message.ToolCalls[i]; sc.Name != tc.Function.Name || sc.Arguments != tc.Function.Arguments {
				t.Fatalf("max_tokens %d: streamed call %+v, non-streamed %+v", n, sc, tc.Function)
			}
		}

		rbody := fmt.Sprintf(`{"model":"smol","input":%q,"tools":%s,"tool_choice":"required","max_output_tokens":%d,"temperature":0.7,"seed":1`, question, rtools, n)
		code, _, b = do(t, "POST", s.url+"/v1/responses", bearer, rbody+`}`)
		var rr struct {
			Status string
			Output []struct {
				Type, Name, Arguments string
				Content               []struct{ Text string }
			}
		}
		if json.Unmarshal(b, &rr) != nil || code != 200 {
			t.Fatalf("responses max_output_tokens %d: %d %s", n, code, b)
		}
		var text string
		var calls []streamedCall
		for _, o := range rr.Output {
			switch o.Type {
			case "function_call":
				checkArgs(o.Name, o.Arguments)
				calls = append(calls, streamedCall{o.Name, o.Arguments})
			case "message":
				for _, p := range o.Content {
					text += p.Text
				}
			}
		}
		if strings.Contains(text, "tool_call") || strings.Contains(text, `"name"`) {
			t.Fatalf("responses max_output_tokens %d: markup in the text: %s", n, b)
		}
		code, _, sb = do(t, "POST", s.url+"/v1/responses", bearer, rbody+`,"stream":true}`)
		stext, scalls2, status := readResponsesStream(t, sb)
		if code != 200 || stext != text || status != rr.Status || fmt.Sprint(scalls2) != fmt.Sprint(calls) {
			t.Fatalf("responses max_output_tokens %d: stream %q %v %s, non-streamed %s", n, stext, scalls2, status, b)
		}
	}
}

// TestSFTGenericToolCalls: a model served with a template that has no tool syntax
// (--chat-template with SmolLM2's) trains on agent conversations, its calls written into
// the turns as chat writes them in the generic format; the checkpoint then answers
// tool_choice required with a call.
func TestSFTGenericToolCalls(t *testing.T) {
	dir := t.TempDir()
	var src string
	if err := json.Unmarshal([]byte(smolTemplate(t)), &src); err != nil {
		t.Fatal(err)
	}
	tplFile := filepath.Join(t.TempDir(), "smollm2.jinja")
	if err := os.WriteFile(tplFile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, dir, "--chat-template", "demo="+tplFile)
	var data strings.Builder
	for _, city := range []string{"Paris", "Rome", "Oslo", "Paris"} {
		line, _ := json.Marshal(map[string]any{
			"tools": json.RawMessage(weatherTools),
			"messages": []any{
				map[string]any{"role": "user", "content": "Weather in " + city + " for 2 days?"},
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
					"function": map[string]any{"name": "get_weather", "arguments": `{"city": "` + city + `", "days": 2}`}}}},
				map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
				map[string]any{"role": "assistant", "content": "Sunny in " + city + "."},
			}})
		data.Write(line)
		data.WriteByte('\n')
	}
	file := filepath.Join(t.TempDir(), "agent.jsonl")
	if err := os.WriteFile(file, []byte(data.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runTrain(context.Background(), []string{"sft", "--url", s.url, "--data", dir, "--model", "local/demo/tools", "--file", file, "--epochs", "2"}, &out, &errb); code != 0 {
		t.Fatalf("hone train sft: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	code, _, b := do(t, "POST", s.url+"/v1/chat/completions", "Bearer "+initialKey(t, dir),
		`{"model":"local/demo/tools:latest","messages":[{"role":"user","content":"Weather in Rome for 2 days?"}],"tools":`+weatherTools+`,"tool_choice":"required","max_tokens":80,"seed":1}`)
	var r toolResp
	if json.Unmarshal(b, &r) != nil || code != 200 || len(r.Choices[0].Message.ToolCalls) == 0 {
		t.Fatalf("the checkpoint: %d %s", code, b)
	}
	checkWeatherArgs(t, r.Choices[0].Message.ToolCalls[0].Function.Name, r.Choices[0].Message.ToolCalls[0].Function.Arguments)
}

// TestToolsBesideResponseFormat: a JSON response_format beside tools, as Pydantic AI's
// NativeOutput and DSPy's JSONAdapter send them: under tool_choice auto the model either calls
// or answers in the format (both happen), on a template with tool syntax and on one without;
// under required or a named function the answer is the call (OpenAI's behaviour; the format
// has no text to shape), while structured_outputs beside a forced call stays vLLM's 400.
func TestToolsBesideResponseFormat(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	url := s.url + "/v1/chat/completions"
	format := `"response_format":{"type":"json_schema","json_schema":{"name":"answer","strict":true,"schema":{"type":"object","properties":{"city":{"enum":["Paris","Rome"]},"sunny":{"type":"boolean"}},"required":["city","sunny"],"additionalProperties":false}}}`
	for _, tpl := range []string{"", `"chat_template":` + smolTemplate(t) + `,`} {
		base := `{` + tpl + `"messages":[{"role":"user","content":"Weather in Paris for 3 days?"}],"tools":` + weatherTools + `,` + format
		calls, answers := 0, 0
		for seed := 1; seed <= 40 && (calls == 0 || answers == 0); seed++ {
			code, _, b := do(t, "POST", url, bearer, base+fmt.Sprintf(`,"tool_choice":"auto","max_tokens":120,"temperature":1,"seed":%d}`, seed))
			var r toolResp
			if json.Unmarshal(b, &r) != nil || code != 200 {
				t.Fatalf("auto: %d %s", code, b)
			}
			c := r.Choices[0]
			if len(c.Message.ToolCalls) > 0 {
				for _, tc := range c.Message.ToolCalls {
					checkWeatherArgs(t, tc.Function.Name, tc.Function.Arguments)
				}
				calls++
				continue
			}
			if c.FinishReason == "length" {
				continue
			}
			var a struct {
				City  string `json:"city"`
				Sunny *bool  `json:"sunny"`
			}
			dec := json.NewDecoder(strings.NewReader(*c.Message.Content))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&a); err != nil || a.City == "" || a.Sunny == nil {
				t.Fatalf("auto (template %q): the answer is neither calls nor the format: %s", tpl, b)
			}
			answers++
		}
		if calls == 0 || answers == 0 {
			t.Fatalf("template %q: %d calls and %d answers in the format: both must be possible", tpl, calls, answers)
		}
		for _, choice := range []string{`"required"`, `{"type":"function","function":{"name":"get_time"}}`} {
			code, _, b := do(t, "POST", url, bearer, base+`,"tool_choice":`+choice+`,"max_tokens":120,"seed":2}`)
			var r toolResp
			if json.Unmarshal(b, &r) != nil || code != 200 || len(r.Choices[0].Message.ToolCalls) == 0 {
				t.Fatalf("%s with a response_format: %d %s", choice, code, b)
			}
			checkWeatherArgs(t, r.Choices[0].Message.ToolCalls[0].Function.Name, r.Choices[0].Message.ToolCalls[0].Function.Arguments)
		}
	}
}

package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const weatherTools = `[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"enum":["Paris","Rome","Oslo"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}}},
{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"enum":["UTC","CET"]}},"required":["zone"],"additionalProperties":false}}}]`

type toolResp struct {
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

// checkWeatherArgs checks arguments against the tools' schemas.
func checkWeatherArgs(t *testing.T, name, args string) {
	t.Helper()
	var a map[string]any
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatalf("arguments %q: %v", args, err)
	}
	switch name {
	case "get_weather":
		city, _ := a["city"].(string)
		days, _ := a["days"].(float64)
		if !strings.Contains("Paris Rome Oslo", city) || city == "" || days < 1 || days > 7 || days != float64(int(days)) || len(a) != 2 {
			t.Fatalf("get_weather arguments %s", args)
		}
	case "get_time":
		if z, _ := a["zone"].(string); (z != "UTC" && z != "CET") || len(a) != 1 {
			t.Fatalf("get_time arguments %s", args)
		}
	default:
		t.Fatalf("unknown function %q", name)
	}
}

// TestToolCallsEndToEnd: with tool_choice required or a named function, the demo model (random
// weights, a hermes-style template) still answers with calls that parse and match the tools'
// schemas, non-streamed and streamed; tool results render in a follow-up turn; the validation
// errors are vLLM's.
func TestToolCallsEndToEnd(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	url := s.url + "/v1/chat/completions"
	msgs := `[{"role":"user","content":"Weather in Paris for 3 days?"}]`

	// required, several seeds; parallel calls allowed.
	for seed := 1; seed <= 4; seed++ {
		body := `{"messages":` + msgs + `,"tools":` + weatherTools + `,"tool_choice":"required","max_tokens":120,"temperature":1,"seed":` + string(rune('0'+seed)) + `}`
		code, _, b := do(t, "POST", url, bearer, body)
		if code != 200 {
			t.Fatalf("%d %s", code, b)
		}
		var r toolResp
		json.Unmarshal(b, &r)
		c := r.Choices[0]
		if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) == 0 || c.Message.Content != nil {
			t.Fatalf("required: %s", b)
		}
		for _, tc := range c.Message.ToolCalls {
			if !strings.HasPrefix(tc.ID, "call_") || len(tc.ID) != 29 || tc.Type != "function" {
				t.Fatalf("call %+v", tc)
			}
			checkWeatherArgs(t, tc.Function.Name, tc.Function.Arguments)
		}
	}
	// parallel_tool_calls false: exactly one call.
	code, _, b := do(t, "POST", url, bearer, `{"messages":`+msgs+`,"tools":`+weatherTools+`,"tool_choice":"required","parallel_tool_calls":false,"max_tokens":120,"seed":9}`)
	var one toolResp
	json.Unmarshal(b, &one)
	if code != 200 || len(one.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("parallel false: %d %s", code, b)
	}
	// Named function: that function, finish_reason stop (as OpenAI and vLLM).
	named := `{"messages":` + msgs + `,"tools":` + weatherTools + `,"tool_choice":{"type":"function","function":{"name":"get_time"}},"max_tokens":120,"seed":3`
	code, _, b = do(t, "POST", url, bearer, named+`}`)
	var nr toolResp
	json.Unmarshal(b, &nr)
	if code != 200 || len(nr.Choices[0].Message.ToolCalls) != 1 || nr.Choices[0].Message.ToolCalls[0].Function.Name != "get_time" || nr.Choices[0].FinishReason != "stop" {
		t.Fatalf("named: %d %s", code, b)
	}
	checkWeatherArgs(t, "get_time", nr.Choices[0].Message.ToolCalls[0].Function.Arguments)
	nonStreamedArgs := nr.Choices[0].Message.ToolCalls[0].Function.Arguments

	// Streamed, same seed: a header delta (id, type, name, empty arguments), the arguments,
	// no content, one finish_reason; the arguments are the non-streamed ones.
	code, _, b = do(t, "POST", url, bearer, named+`,"stream":true}`)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	content, calls, finish := readChatStream(t, b)
	if len(calls) != 1 || calls[0].Name != "get_time" || finish != "stop" || content != "" || calls[0].Arguments != nonStreamedArgs {
		t.Fatalf("stream: %q %+v %q (non-streamed arguments %q)\n%s", content, calls, finish, nonStreamedArgs, b)
	}

	// max_tokens 1 under required: no crash, finish length, no call.
	code, _, b = do(t, "POST", url, bearer, `{"messages":`+msgs+`,"tools":`+weatherTools+`,"tool_choice":"required","max_tokens":1}`)
	if code != 200 || !strings.Contains(string(b), `"finish_reason":"length"`) {
		t.Fatalf("max_tokens 1: %d %s", code, b)
	}
	// auto: 200, a call or text.
	code, _, b = do(t, "POST", url, bearer, `{"messages":`+msgs+`,"tools":`+weatherTools+`,"max_tokens":30,"seed":1}`)
	if code != 200 {
		t.Fatalf("auto: %d %s", code, b)
	}

	// Tool results in a follow-up turn: the assistant's call (arguments a JSON string) and
	// the tool's answer render through the template.
	follow := `{"messages":[{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"days\": 1}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"sunny, 21 C"}],"tools":` + weatherTools + `,"max_tokens":5`
	code, _, b = do(t, "POST", url+"/render", bearer, follow+`}`)
	if code != 200 || !strings.Contains(string(b), `\"arguments\": {\"city\": \"Paris\", \"days\": 1}`) || !strings.Contains(string(b), "sunny, 21 C") {
		t.Fatalf("render follow-up: %d %s", code, b)
	}
	if code, _, b = do(t, "POST", url, bearer, follow+`}`); code != 200 {
		t.Fatalf("follow-up: %d %s", code, b)
	}

	// Errors, 400 naming the field, in vLLM's words.
	for _, c := range []struct{ body, param, msg string }{
		{`"tool_choice":"required"`, "tool_choice", "When using `tool_choice`, `tools` must be set."},
		{`"tools":` + weatherTools + `,"tool_choice":{"type":"function","function":{"name":"nope"}}`, "tool_choice", "The tool specified in `tool_choice` does not match any of the specified `tools`"},
		{`"tools":` + weatherTools + `,"tool_choice":"sometimes"`, "tool_choice", "Invalid value for `tool_choice`: sometimes!"},
		{`"tools":` + weatherTools + `,"tool_choice":{}`, "tool_choice", "in `tool_choice`!"},
		{`"tools":` + weatherTools + `,"tool_choice":{"type":"function","function":{}}`, "tool_choice", "Expected field `name` in `function` in `tool_choice`!"},
		{`"tools":[]`, "tools", "`tools` must not be an empty array."},
		{`"tools":` + weatherTools + `,"tool_choice":"required","structured_outputs":{"regex":"a"}`, "tool_choice", "You can only either use constraints for structured outputs or tools, not both."},
	} {
		code, _, b := do(t, "POST", url, bearer, `{"messages":`+msgs+`,`+c.body+`}`)
		var e struct {
			Error struct {
				Message, Param string
				Code           int
			}
		}
		json.Unmarshal(b, &e)
		if code != 400 || e.Error.Param != c.param || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: %d %s", c.body, code, b)
		}
	}
	// none: tools rendered, no parsing.
	if code, _, b := do(t, "POST", url, bearer, `{"messages":`+msgs+`,"tools":`+weatherTools+`,"tool_choice":"none","max_tokens":5}`); code != 200 || strings.Contains(string(b), `"tool_calls":[`) {
		t.Fatalf("none: %d %s", code, b)
	}
}

// TestToolCallParserFlag: --tool-call-parser none turns parsing off for the model (required is
// then vLLM's 400); a parser for a model not served, or an unknown parser, stops the start.
func TestToolCallParserFlag(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--tool-call-parser", "demo=none")
	bearer := "Bearer " + initialKey(t, dir)
	code, _, b := do(t, "POST", s.url+"/v1/chat/completions", bearer, `{"messages":[{"role":"user","content":"x"}],"tools":`+weatherTools+`,"tool_choice":"required","max_tokens":4}`)
	if code != 400 || !strings.Contains(string(b), "--tool-call-parser none") {
		t.Fatalf("%d %s", code, b)
	}
	// tools without tool_choice: rendered, answered as text.
	code, _, b = do(t, "POST", s.url+"/v1/chat/completions", bearer, `{"messages":[{"role":"user","content":"x"}],"tools":`+weatherTools+`,"max_tokens":4}`)
	if code != 200 || strings.Contains(string(b), `"tool_calls":[`) {
		t.Fatalf("%d %s", code, b)
	}
	if _, err := toolParsers([]string{"bogus"}); err == nil {
		t.Fatal("unknown parser accepted")
	}
}

package chatapi

import (
	"encoding/json"
	"testing"

	"github.com/honeai/hone/internal/apierror"
)

// FuzzResponsesRequest: turning a Responses request into a chat request never panics; it
// answers messages that are a JSON list, or a 400 naming a field.
func FuzzResponsesRequest(f *testing.F) {
	for _, s := range []string{
		`{"input":"hi"}`,
		`{"input":[{"role":"user","content":[{"type":"input_text","text":"a"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}]}`,
		`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call","call_id":"d","name":"g","arguments":"{}"}]}`,
		`{"input":"x","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"f"}}`,
		`{"input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"}}}}`,
		`{"input":[{"type":"reasoning"},{"role":"developer","content":"d"}]}`,
		`{"input":[{"role":1}]}`, `{"input":[null]}`, `{"input":3}`, `{}`, `{"input":"x","conversation":"c"}`,
		`{"input":[{"type":"function_call_output","output":[{"type":"input_text","text":"t"}]}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var rr ResponsesRequest
		if json.Unmarshal([]byte(raw), &rr) != nil {
			return
		}
		req, _, err := rr.chatRequest(nil)
		if err != nil {
			if ae, ok := apierror.As(err); !ok || ae.Status != 400 || ae.Param == "" {
				t.Fatalf("%s: %v", raw, err)
			}
			return
		}
		var msgs []map[string]any
		if err := json.Unmarshal(req.Messages, &msgs); err != nil {
			t.Fatalf("%s: messages %s: %v", raw, req.Messages, err)
		}
	})
}

// TestResponsesJSON: the typed messages and output items are written as they were when they
// were maps (keys in the order of their names): stored conversations and responses, the
// prompts templates render from the messages, and clients' byte comparisons stay the same.
func TestResponsesJSON(t *testing.T) {
	var rr ResponsesRequest
	json.Unmarshal([]byte(`{"instructions":"Be brief.","input":[{"role":"user","content":"a<b"},
		{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"g","arguments":""},
		{"type":"function_call_output","call_id":"c1","output":"ok"}]}`), &rr)
	history := []chatMessage{{Role: "user", Content: "earlier"}}
	req, input, err := rr.chatRequest(history)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"content":"Be brief.","role":"system"},{"content":"earlier","role":"user"},{"content":"a\u003cb","role":"user"},` +
		`{"content":null,"role":"assistant","tool_calls":[{"function":{"arguments":"{}","name":"f"},"id":"c1","type":"function"},{"function":{"arguments":"","name":"g"},"id":"c2","type":"function"}]},` +
		`{"content":"ok","role":"tool","tool_call_id":"c1"}]`
	if string(req.Messages) != want {
		t.Errorf("messages:\n got %s\nwant %s", req.Messages, want)
	}
	if len(input) != 3 {
		t.Errorf("input: %d messages", len(input))
	}

	rs := &responseState{id: "resp_abc"}
	lps := &Logprobs{Content: []TokenLogprob{{Token: "x", Logprob: -0.5, Bytes: []int{120}, TopLogprobs: []TopLogprobJS{{Token: "x", Logprob: -0.5, Bytes: []int{120}}}}}}
	o := &ResponseObject{Output: OutputItems{rs.reasoningItem("hmm"), rs.messageItem("Hi", lps, "completed"), rs.messageItem("", nil, "in_progress"),
		rs.callItem(0, "call_1", "f", `{"a":1}`, "completed")}}
	b, _ := json.Marshal(o.Output)
	want = `[{"content":[{"text":"hmm","type":"reasoning_text"}],"id":"rs_abc","status":"completed","summary":[],"type":"reasoning"},` +
		`{"content":[{"annotations":[],"logprobs":[{"bytes":[120],"logprob":-0.5,"token":"x","top_logprobs":[{"bytes":[120],"logprob":-0.5,"token":"x"}]}],"text":"Hi","type":"output_text"}],"id":"msg_abc","role":"assistant","status":"completed","type":"message"},` +
		`{"content":[],"id":"msg_abc","role":"assistant","status":"in_progress","type":"message"},` +
		`{"arguments":"{\"a\":1}","call_id":"call_1","id":"fc_abc_0","name":"f","status":"completed","type":"function_call"}]`
	if string(b) != want {
		t.Errorf("output:\n got %s\nwant %s", b, want)
	}
	// The conversation a stored response keeps ends with its output as one assistant message.
	b, _ = json.Marshal(outputMessages(o))
	if want := `[{"content":"Hi","role":"assistant","tool_calls":[{"function":{"arguments":"{\"a\":1}","name":"f"},"id":"call_1","type":"function"}]}]`; string(b) != want {
		t.Errorf("output messages:\n got %s\nwant %s", b, want)
	}
}

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

package toolcall

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/chattemplate"
)

// TestGenericPrepareTemplates: on every real template without tool syntax of its own, a tool
// conversation (tools, an assistant's call, the tool's result, a new question) renders with
// the tools described, the call written in the Generic format (which parses back) and the
// result shown; on templates that render all of it themselves, Prepare changes nothing.
func TestGenericPrepareTemplates(t *testing.T) {
	tools := `[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	msgs := `[{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call00001","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"call00001","content":"sunny"},
		{"role":"tool","tool_call_id":"call00002","content":"warm"},
		{"role":"user","content":"And Rome?"}]`
	call := GenericCall("get_weather", json.RawMessage(`"{\"city\": \"Paris\"}"`))
	for _, name := range []string{"smollm2", "gemma2", "gemma3", "phi3_5", "phi3_mini", "phi4_mini"} {
		src, bos, eos := loadTemplate(t, name)
		if Detect(src) != None {
			t.Fatalf("%s: detected %s", name, Detect(src))
		}
		tpl, err := chattemplate.Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		special := map[string]string{"bos_token": bos, "eos_token": eos}
		caps := tpl.Caps(special)
		in := chattemplate.Input{Messages: []byte(msgs), Tools: []byte(tools), AddGenerationPrompt: true, SpecialTokens: special}
		prepared, err := Prepare(in, caps, true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out, err := tpl.Render(prepared)
		if err != nil {
			t.Fatalf("%s (caps %+v): %v", name, caps, err)
		}
		for _, want := range []string{`"name": "get_weather"`, `"description": "Weather"`, call, "sunny", "warm", "<tool_call></tool_call>", "And Rome?"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: rendered %q lacks %q", name, out, want)
			}
		}
		content, calls, ok := Parse(Generic, call, Options{})
		if !ok || content != "" || len(calls) != 1 || calls[0].Arguments != `{"city": "Paris"}` {
			t.Fatalf("%q parsed as %q %v %v", call, content, calls, ok)
		}
		undescribed, err := Prepare(in, caps, false)
		if err != nil {
			t.Fatal(err)
		}
		if out, _ := tpl.Render(undescribed); strings.Contains(out, "<tool_call></tool_call>") || !strings.Contains(out, call) {
			t.Errorf("%s: without describe rendered %q", name, out)
		}
	}
	for _, name := range []string{"qwen2_5", "llama3_2", "synth"} {
		src, bos, eos := loadTemplate(t, name)
		tpl, _ := chattemplate.Compile(src)
		caps := tpl.Caps(map[string]string{"bos_token": bos, "eos_token": eos})
		in := chattemplate.Input{Messages: []byte(msgs), Tools: []byte(tools)}
		if out, err := Prepare(in, caps, false); err != nil || string(out.Messages) != msgs {
			t.Errorf("%s (caps %+v): Prepare changed the messages: %s %v", name, caps, out.Messages, err)
		}
	}
}

// TestGenericPrepareSystem: the description joins a system message, as text or as parts, or
// becomes the first message; a template without system messages gets it in the first user
// message.
func TestGenericPrepareSystem(t *testing.T) {
	tools := `[{"type":"function","function":{"name":"f"}}]`
	all := chattemplate.Caps{System: true, Tools: false, ToolCalls: true, ToolResults: true}
	for _, c := range []struct {
		msgs string
		caps chattemplate.Caps
		want func(m []map[string]any) bool
	}{
		{`[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]`, all, func(m []map[string]any) bool {
			s, _ := m[0]["content"].(string)
			return len(m) == 2 && strings.HasPrefix(s, "Be brief.\n\nYou can call functions") && strings.Contains(s, `{"type": "function", "function": {"name": "f"}}`)
		}},
		{`[{"role":"system","content":[{"type":"text","text":"Be brief."}]},{"role":"user","content":"Hi"}]`, all, func(m []map[string]any) bool {
			parts, _ := m[0]["content"].([]any)
			return len(parts) == 2
		}},
		{`[{"role":"user","content":"Hi"}]`, all, func(m []map[string]any) bool {
			return len(m) == 2 && m[0]["role"] == "system" && m[1]["content"] == "Hi"
		}},
		{`[{"role":"user","content":"Hi"}]`, chattemplate.Caps{Tools: true}, func(m []map[string]any) bool {
			s, _ := m[0]["content"].(string)
			return len(m) == 1 && strings.HasPrefix(s, GenericFormat) && strings.HasSuffix(s, "\n\nHi") && !strings.Contains(s, "<tools>")
		}},
	} {
		out, err := Prepare(chattemplate.Input{Messages: []byte(c.msgs), Tools: []byte(tools)}, c.caps, true)
		if err != nil {
			t.Fatal(err)
		}
		var m []map[string]any
		if err := json.Unmarshal(out.Messages, &m); err != nil || !c.want(m) {
			t.Errorf("%s: %s", c.msgs, out.Messages)
		}
	}
	if _, err := Prepare(chattemplate.Input{Messages: []byte(`[{"role":"assistant","tool_calls":[3]}]`)}, chattemplate.Caps{}, false); err == nil {
		t.Error("malformed tool_calls accepted")
	}
}

package toolcall

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/synth"
)

func loadTemplate(t *testing.T, name string) (src, bos, eos string) {
	t.Helper()
	if name == "synth" {
		return synth.ChatTemplate, "", "<|im_end|>"
	}
	path := "../chattemplate/testdata/templates/" + name + ".json"
	if name == "qwen3" {
		path = "../tokenizer/testdata/qwen3/tokenizer_config.json"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		ChatTemplate string `json:"chat_template"`
		BOS          any    `json:"bos_token"`
		EOS          any    `json:"eos_token"`
	}
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	bos, _ = fx.BOS.(string)
	eos, _ = fx.EOS.(string)
	return fx.ChatTemplate, bos, eos
}

// TestTemplatesRoundTrip: each real template's family is detected, a conversation with the
// assistant's call (arguments as a JSON string, as clients send them) and the tool's result
// renders, and the call as the template writes it parses back with the family's parser.
func TestTemplatesRoundTrip(t *testing.T) {
	tools := `[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	msgs := `[{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_abcdefghijklmnopqrstuvwx","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"call_abcdefghijklmnopqrstuvwx","content":"sunny"},
		{"role":"user","content":"And Rome?"}]`
	for _, c := range []struct {
		name, family, written string
	}{
		{"synth", Hermes, `<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`},
		{"qwen2_5", Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
		{"qwen3", Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
		{"llama3_2", Llama3JSON, `{"name": "get_weather", "parameters": {"city": "Paris"}}`},
		{"mistral_v03", Mistral, `[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "pqrstuvwx"}]`},
		{"smollm2", None, ""},
	} {
		src, bos, eos := loadTemplate(t, c.name)
		if got := Detect(src); got != c.family {
			t.Errorf("%s: detected %s, want %s", c.name, got, c.family)
			continue
		}
		if c.family == None {
			continue
		}
		tpl, err := chattemplate.Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		out, err := tpl.Render(chattemplate.Input{Messages: []byte(msgs), Tools: []byte(tools), AddGenerationPrompt: true,
			SpecialTokens: map[string]string{"bos_token": bos, "eos_token": eos}})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !strings.Contains(out, c.written) || !strings.Contains(out, "sunny") || !strings.Contains(out, "get_weather") {
			t.Fatalf("%s: rendered %q, want it to hold %q and the tool result", c.name, out, c.written)
		}
		content, calls, ok := Parse(c.family, c.written, Options{})
		if !ok || strings.TrimSpace(content) != "" || len(calls) != 1 || calls[0].Name != "get_weather" {
			t.Fatalf("%s: %q parsed as %q %v %v", c.name, c.written, content, calls, ok)
		}
		var args map[string]string
		if json.Unmarshal([]byte(calls[0].Arguments), &args) != nil || args["city"] != "Paris" {
			t.Fatalf("%s: arguments %q", c.name, calls[0].Arguments)
		}
	}
}

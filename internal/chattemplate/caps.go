package chattemplate

import (
	"strings"
	"sync"
)

// Caps says what of a conversation a template renders, found by rendering probes (as
// llama.cpp's minja does): a template that drops something, or raises on it, does not
// render it. Tool calling on a template without tool syntax of its own writes what the
// template leaves out into the messages (toolcall.Prepare).
type Caps struct {
	// System: a system message's content is rendered.
	System bool
	// Tools: the tools variable is read (a tool's name appears).
	Tools bool
	// ToolCalls: an assistant message's tool_calls are rendered (a call's name appears).
	ToolCalls bool
	// ToolResults: a tool message's content is rendered.
	ToolResults bool
}

type capsOnce struct {
	once sync.Once
	caps Caps
}

// Probe texts: unlikely to be written by a template itself.
const (
	probeSystem = "hone-probe-system-7f3a"
	probeTool   = "hone_probe_tool_7f3a"
	probeCall   = "hone_probe_call_7f3a"
	probeResult = "hone-probe-result-7f3a"
)

// Caps reports what the template renders; special are the tokenizer's special tokens
// (bos_token, ...), as rendering gets them. It is computed once per template.
func (t *Template) Caps(special map[string]string) Caps {
	t.caps.once.Do(func() { t.caps.caps = t.probeCaps(special) })
	return t.caps.caps
}

func (t *Template) probeCaps(special map[string]string) Caps {
	has := func(messages, tools, needle string, agp bool) bool {
		in := Input{Messages: []byte(messages), AddGenerationPrompt: agp, SpecialTokens: special}
		if tools != "" {
			in.Tools = []byte(tools)
		}
		out, err := t.Render(in)
		return err == nil && strings.Contains(out, needle)
	}
	call := `{"role": "assistant", "content": "", "tool_calls": [{"id": "call00001", "type": "function", "function": {"name": "` + probeCall + `", "arguments": "{\"x\": \"y\"}"}}]}`
	return Caps{
		System: has(`[{"role": "system", "content": "`+probeSystem+`"}, {"role": "user", "content": "Hi"}]`, "", probeSystem, true),
		Tools: has(`[{"role": "user", "content": "Hi"}]`,
			`[{"type": "function", "function": {"name": "`+probeTool+`", "description": "A tool.", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}]`, probeTool, true),
		ToolCalls:   has(`[{"role": "user", "content": "Hi"}, `+call+`]`, "", probeCall, false),
		ToolResults: has(`[{"role": "user", "content": "Hi"}, `+call+`, {"role": "tool", "tool_call_id": "call00001", "content": "`+probeResult+`"}]`, "", probeResult, true),
	}
}

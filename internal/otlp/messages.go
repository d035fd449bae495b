package otlp

import "strings"

// message is a chat message in OpenAI's shape, what Hone's own traced completions hold and
// what Hone Studio shows as a conversation.
type message struct {
	Role       string     `json:"role"`
	Content    any        `json:"content,omitempty"` // text, or OpenAI content parts
	Name       string     `json:"name,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// choice is one choice of an OpenAI chat completion.
type choice struct {
	Index        int     `json:"index"`
	Message      message `json:"message"`
	FinishReason string  `json:"finish_reason,omitempty"`
}

func (m message) empty() bool {
	return m.Role == "" && m.Content == nil && len(m.ToolCalls) == 0 && m.ToolCallID == ""
}

// arguments writes tool-call arguments as OpenAI does: a JSON text.
func arguments(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	return string(compact(v))
}

// content is a message's content: text as it is, a JSON list of parts (as some
// instrumentations send it) as parts.
func content(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		if x == "" {
			return nil
		}
		if d, ok := decodeJSONText(x).([]any); ok && looksLikeParts(d) {
			return openAIParts(d)
		}
		return x
	case []any:
		return openAIParts(x)
	}
	return v
}

func looksLikeParts(arr []any) bool {
	for _, el := range arr {
		m, ok := el.(map[string]any)
		if !ok || m["type"] == nil {
			return false
		}
	}
	return len(arr) > 0
}

// openAIParts writes content parts as OpenAI's ({"type":"text","text":...}); one text part
// is its text.
func openAIParts(parts []any) any {
	out := make([]any, 0, len(parts))
	for _, p := range parts {
		m, ok := p.(map[string]any)
		if !ok {
			if s := text(p); s != "" {
				out = append(out, map[string]any{"type": "text", "text": s})
			}
			continue
		}
		if m["type"] == "text" {
			t := m["text"]
			if t == nil {
				t = m["content"]
			}
			out = append(out, map[string]any{"type": "text", "text": text(t)})
			continue
		}
		out = append(out, m)
	}
	if len(out) == 1 {
		if m, ok := out[0].(map[string]any); ok && m["type"] == "text" {
			return m["text"]
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// --- OpenInference: llm.input_messages.<i>.message.{role,content,contents,tool_calls,...}

func openInferenceMessages(a attrs, prefix string) []message {
	var out []message
	for _, it := range a.indexed(prefix) {
		m := it.a
		msg := message{Role: m.str("message.role"), Name: m.str("message.name"), ToolCallID: m.str("message.tool_call_id")}
		msg.Content = content(m["message.content"])
		if msg.Content == nil {
			var parts []any
			for _, c := range m.indexed("message.contents") {
				switch c.a.str("message_content.type") {
				case "image":
					if url := c.a.str("message_content.image.image.url"); url != "" {
						parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}})
					}
				default:
					if t := c.a.str("message_content.text"); t != "" {
						parts = append(parts, map[string]any{"type": "text", "text": t})
					}
				}
			}
			msg.Content = openAIParts(parts)
		}
		for _, tc := range m.indexed("message.tool_calls") {
			msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: tc.a.str("tool_call.id"), Type: "function",
				Function: toolFunction{Name: tc.a.str("tool_call.function.name"), Arguments: arguments(tc.a["tool_call.function.arguments"])}})
		}
		if !msg.empty() {
			out = append(out, msg)
		}
	}
	return out
}

// --- GenAI semantic conventions before the message attributes, and OpenLLMetry:
// gen_ai.prompt.<i>.{role,content,tool_calls.<j>.{id,name,arguments},tool_call_id} and
// gen_ai.completion.<i>.{role,content,finish_reason,tool_calls...}.

func indexedMessages(a attrs, prefix string) ([]message, []string) {
	var out []message
	var finish []string
	for _, it := range a.indexed(prefix) {
		m := it.a
		msg := message{Role: m.str("role"), Name: m.str("name"), ToolCallID: m.str("tool_call_id"), Content: content(m["content"])}
		for _, tc := range m.indexed("tool_calls") {
			name := tc.a.str("name")
			if name == "" {
				name = tc.a.str("function.name")
			}
			args := tc.a["arguments"]
			if args == nil {
				args = tc.a["function.arguments"]
			}
			msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: tc.a.str("id"), Type: "function", Function: toolFunction{Name: name, Arguments: arguments(args)}})
		}
		if msg.empty() {
			continue
		}
		out = append(out, msg)
		finish = append(finish, m.str("finish_reason"))
	}
	return out, finish
}

// --- GenAI semantic conventions' message attributes: gen_ai.input.messages and
// gen_ai.output.messages, a list (or its JSON text) of {role, parts: [{type: text|tool_call|
// tool_call_response|..., ...}], finish_reason}; gen_ai.system_instructions, a list of parts.

func genAIMessages(v any) ([]message, []string) {
	arr, ok := decodeJSONText(v).([]any)
	if !ok {
		return nil, nil
	}
	var out []message
	var finish []string
	for _, el := range arr {
		m, ok := el.(map[string]any)
		if !ok {
			continue
		}
		msg := message{Role: text(m["role"]), Name: text(m["name"])}
		if parts, ok := m["parts"].([]any); ok {
			var rest []any
			for _, p := range parts {
				pm, ok := p.(map[string]any)
				if !ok {
					rest = append(rest, p)
					continue
				}
				switch pm["type"] {
				case "tool_call":
					msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: text(pm["id"]), Type: "function",
						Function: toolFunction{Name: text(pm["name"]), Arguments: arguments(pm["arguments"])}})
				case "tool_call_response":
					msg.ToolCallID = text(pm["id"])
					r := pm["response"]
					if s, ok := r.(string); ok {
						rest = append(rest, map[string]any{"type": "text", "text": s})
					} else {
						rest = append(rest, map[string]any{"type": "text", "text": string(compact(r))})
					}
				default:
					rest = append(rest, pm)
				}
			}
			msg.Content = openAIParts(rest)
		} else {
			msg.Content = content(m["content"])
		}
		if msg.empty() {
			continue
		}
		out = append(out, msg)
		finish = append(finish, text(m["finish_reason"]))
	}
	return out, finish
}

func systemInstructions(v any) *message {
	switch x := decodeJSONText(v).(type) {
	case string:
		if x != "" {
			return &message{Role: "system", Content: x}
		}
	case []any:
		if c := openAIParts(x); c != nil {
			return &message{Role: "system", Content: c}
		}
	}
	return nil
}

// --- Message events: gen_ai.{system,user,assistant,tool}.message and gen_ai.choice on the
// span (the GenAI conventions' events, as span events), with content, tool_calls (a list of
// {id, type, function: {name, arguments}}), id (a tool message's call) and, on a choice,
// index, finish_reason and message.

type spanEvent struct {
	name string
	a    attrs
}

func eventMessages(events []spanEvent) (in []message, out []choice) {
	for _, e := range events {
		switch e.name {
		case "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message":
			role := strings.TrimSuffix(strings.TrimPrefix(e.name, "gen_ai."), ".message")
			if r := e.a.str("role"); r != "" {
				role = r
			}
			msg := message{Role: role, Content: content(e.a["content"]), ToolCalls: eventToolCalls(e.a["tool_calls"])}
			if role == "tool" {
				msg.ToolCallID = e.a.str("id")
			}
			in = append(in, msg)
		case "gen_ai.choice":
			c := choice{Index: len(out), FinishReason: e.a.str("finish_reason")}
			if i, ok := integer(e.a["index"]); ok && i >= 0 && i < maxIndex {
				c.Index = int(i)
			}
			if m, ok := e.a["message"].(map[string]any); ok {
				c.Message = message{Role: text(m["role"]), Content: content(m["content"]), ToolCalls: eventToolCalls(m["tool_calls"])}
			} else {
				c.Message = message{Content: content(e.a["content"]), ToolCalls: eventToolCalls(e.a["tool_calls"])}
			}
			if c.Message.Role == "" {
				c.Message.Role = "assistant"
			}
			out = append(out, c)
		}
	}
	return in, out
}

func eventToolCalls(v any) []toolCall {
	arr, ok := decodeJSONText(v).([]any)
	if !ok {
		return nil
	}
	var out []toolCall
	for _, el := range arr {
		m, ok := el.(map[string]any)
		if !ok {
			continue
		}
		tc := toolCall{ID: text(m["id"]), Type: "function"}
		if f, ok := m["function"].(map[string]any); ok {
			tc.Function = toolFunction{Name: text(f["name"]), Arguments: arguments(f["arguments"])}
		} else {
			tc.Function = toolFunction{Name: text(m["name"]), Arguments: arguments(m["arguments"])}
		}
		out = append(out, tc)
	}
	return out
}

// choices turns output messages into OpenAI choices.
func choices(msgs []message, finish []string) []choice {
	out := make([]choice, len(msgs))
	for i, m := range msgs {
		if m.Role == "" {
			m.Role = "assistant"
		}
		out[i] = choice{Index: i, Message: m}
		if i < len(finish) {
			out[i].FinishReason = finish[i]
		}
	}
	return out
}

// hasKey reports whether a decoded JSON object has key as a non-empty array.
func hasKey(v any, key string) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	arr, ok := m[key].([]any)
	return ok && len(arr) > 0
}

package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/pyjson"
)

// GenericFormat is the instruction given to a model whose template shows no tool syntax: how
// to write a call in the Generic format. The constraint of tool_choice required or named
// enforces it whatever the model makes of it; with auto the model chooses to call.
const GenericFormat = `To call a function, answer with a JSON object holding its name and its arguments inside <tool_call></tool_call> tags, one block per call:
<tool_call>
{"name": "function_name", "arguments": {"argument_name": "value"}}
</tool_call>
Function results come back inside <tool_response></tool_response> tags.`

// GenericPreamble is what a model whose template neither reads tools nor shows tool syntax
// is told about the tools: each tool's JSON on a line of its own (as Python's json.dumps
// writes it), then GenericFormat.
func GenericPreamble(tools []json.RawMessage) string {
	var b strings.Builder
	b.WriteString("You can call functions to help answer. The functions, as JSON schemas:\n<tools>\n")
	for _, t := range tools {
		if v, err := pyjson.Parse(t); err == nil {
			b.Write(pyjson.Dumps(v)) // as json.dumps writes it, the form models were trained on
		} else {
			b.Write(t)
		}
		b.WriteByte('\n')
	}
	b.WriteString("</tools>\n")
	b.WriteString(GenericFormat)
	return b.String()
}

// GenericCall writes one call as the Generic format does, as the model would have written
// it: args is the call's arguments as the client sent them (a JSON object, or a JSON string
// holding one, as OpenAI clients send them).
func GenericCall(name string, args json.RawMessage) string {
	a := strings.TrimSpace(string(args))
	var s string
	if strings.HasPrefix(a, `"`) && json.Unmarshal(args, &s) == nil {
		a = strings.TrimSpace(s)
	}
	if a == "" || a == "null" || !json.Valid([]byte(a)) {
		a = "{}"
	}
	return hermesOpen + "\n" + `{"name": ` + quote(name) + `, "arguments": ` + a + "}\n" + hermesClose
}

// Prepare writes into a conversation what a template without tool syntax of its own leaves
// out, so that a model served with the Generic format sees its tools, its earlier calls and
// their results (llama.cpp's polyfills do the same for its generic format):
//
//   - describe (tool_choice auto, required or named): the tools and GenericFormat go into
//     the system message (a new first message, or the first user message's start where the
//     template renders no system message); a template that reads tools itself gets them
//     there and only GenericFormat;
//   - an assistant message's tool_calls, when the template does not render them, become its
//     content, each call written in the Generic format after any text;
//   - tool messages, when the template does not render them, become one user message of
//     <tool_response> blocks per run of results (with a user message that follows them).
//
// Everything else of in passes unchanged; in is returned as it is when nothing applies.
func Prepare(in chattemplate.Input, caps chattemplate.Caps, describe bool) (chattemplate.Input, error) {
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(in.Messages, &msgs); err != nil {
		return in, nil // the template reports malformed messages by name
	}
	changed := false
	var out []map[string]json.RawMessage
	results := -1 // the index in out of the user message of the results just before
	for _, m := range msgs {
		switch role := str(m["role"]); {
		case role == "assistant" && !caps.ToolCalls && hasCalls(m["tool_calls"]):
			text, err := callsText(m)
			if err != nil {
				return in, err
			}
			m = clone(m)
			delete(m, "tool_calls")
			m["content"] = raw(text)
			out, changed = append(out, m), true
		case role == "tool" && !caps.ToolResults:
			block := "<tool_response>\n" + contentText(m["content"]) + "\n</tool_response>"
			if results >= 0 && results == len(out)-1 {
				out[results]["content"] = raw(str(out[results]["content"]) + "\n" + block)
			} else {
				out = append(out, map[string]json.RawMessage{"role": raw("user"), "content": raw(block)})
				results = len(out) - 1
			}
			changed = true
		case role == "user" && results >= 0 && results == len(out)-1:
			// A question right after results: one user turn, for templates that insist
			// that roles alternate.
			m = clone(m)
			m["content"] = appendText(m["content"], str(out[results]["content"])+"\n\n", true)
			out[results] = m
			results = -1
		default:
			out = append(out, m)
		}
	}
	if describe && len(in.Tools) > 0 && string(in.Tools) != "null" {
		text := GenericFormat
		if !caps.Tools {
			var tools []json.RawMessage
			if err := json.Unmarshal(in.Tools, &tools); err != nil {
				return in, fmt.Errorf("tools: %w", err)
			}
			text = GenericPreamble(tools)
		}
		out = addSystem(out, text, caps.System)
		changed = true
	}
	if !changed {
		return in, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return in, err
	}
	in.Messages = b
	return in, nil
}

// addSystem puts text in the system message: appended to the first message's content when it
// is a system message, else a new system message first; without system messages, at the
// start of the first user message.
func addSystem(msgs []map[string]json.RawMessage, text string, system bool) []map[string]json.RawMessage {
	if system {
		if len(msgs) > 0 && str(msgs[0]["role"]) == "system" {
			m := clone(msgs[0])
			m["content"] = appendText(m["content"], "\n\n"+text, false)
			msgs[0] = m
			return msgs
		}
		return append([]map[string]json.RawMessage{{"role": raw("system"), "content": raw(text)}}, msgs...)
	}
	for i, m := range msgs {
		if str(m["role"]) == "user" {
			m = clone(m)
			m["content"] = appendText(m["content"], text+"\n\n", true)
			msgs[i] = m
			return msgs
		}
	}
	return append([]map[string]json.RawMessage{{"role": raw("user"), "content": raw(text)}}, msgs...)
}

// appendText adds text to a message content (a string, or a list of parts: a text part),
// before it when front.
func appendText(content json.RawMessage, text string, front bool) json.RawMessage {
	var parts []json.RawMessage
	if json.Unmarshal(content, &parts) == nil && len(bytes.TrimSpace(content)) > 0 && bytes.TrimSpace(content)[0] == '[' {
		part, _ := json.Marshal(map[string]string{"type": "text", "text": strings.TrimSpace(text)})
		if front {
			parts = append([]json.RawMessage{part}, parts...)
		} else {
			parts = append(parts, part)
		}
		b, _ := json.Marshal(parts)
		return b
	}
	s := contentText(content)
	if front {
		return raw(text + s)
	}
	return raw(s + text)
}

// callsText is an assistant message's text followed by its calls in the Generic format.
func callsText(m map[string]json.RawMessage) (string, error) {
	var calls []struct {
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(m["tool_calls"], &calls); err != nil {
		return "", &chattemplate.TemplateError{Msg: "tool_calls must be a list of calls {\"function\": {\"name\": ..., \"arguments\": ...}}: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	var blocks []string
	if t := strings.TrimSpace(contentText(m["content"])); t != "" {
		blocks = append(blocks, t)
	}
	for _, c := range calls {
		blocks = append(blocks, GenericCall(c.Function.Name, c.Function.Arguments))
	}
	return strings.Join(blocks, "\n"), nil
}

// contentText is a message content as text: a string, or the text parts of a list joined.
func contentText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &parts) == nil {
		var texts []string
		for _, p := range parts {
			texts = append(texts, p.Text)
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

func hasCalls(v json.RawMessage) bool {
	var calls []json.RawMessage
	return json.Unmarshal(v, &calls) == nil && len(calls) > 0
}

func str(v json.RawMessage) string {
	var s string
	json.Unmarshal(v, &s)
	return s
}

func raw(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func clone(m map[string]json.RawMessage) map[string]json.RawMessage {
	c := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

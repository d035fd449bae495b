package trainingdata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Exchanges are the model calls ART's capture API (`with art.Trajectory() as t:`) records on
// a trajectory in place of messages_and_choices: each chat completion's request body and
// response. Hone trains on chat completions; the other kinds are refused.
type Exchanges struct {
	ChatCompletions []ChatExchange    `json:"chat_completions"`
	Completions     []json.RawMessage `json:"completions,omitempty"`
	Responses       []json.RawMessage `json:"responses,omitempty"`
	Messages        []json.RawMessage `json:"messages,omitempty"`
}

// ChatExchange is one recorded chat completion: the JSON body sent and the completion
// received.
type ChatExchange struct {
	Request   json.RawMessage `json:"request"`
	Response  json.RawMessage `json:"response"`
	StartTime string          `json:"start_time,omitempty"`
	EndTime   string          `json:"end_time,omitempty"`
}

// FieldError is a problem with one field of a trajectory; Field is its path inside the
// trajectory (for example exchanges.chat_completions[0].request.messages).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Msg }

// Normalize checks a trajectory and, when it was recorded as exchanges, turns them into
// messages_and_choices (the first conversation) and additional_histories (the others), so
// that the rest of Hone reads one form. A missing reward is 0.0, as ART omits it then.
func (t *Trajectory) Normalize() error {
	if t.Exchanges == nil || t.Exchanges.empty() {
		if len(t.MessagesAndChoices) == 0 {
			return &FieldError{"messages_and_choices", "is required (or exchanges.chat_completions, as ART's capture API records them)"}
		}
		return nil
	}
	x := t.Exchanges
	for _, k := range []struct {
		name string
		n    int
	}{{"completions", len(x.Completions)}, {"responses", len(x.Responses)}, {"messages", len(x.Messages)}} {
		if k.n > 0 {
			return &FieldError{"exchanges." + k.name, "holds " + k.name + " exchanges; Hone trains on exchanges.chat_completions only"}
		}
	}
	if len(t.MessagesAndChoices) > 0 || len(t.AdditionalHistories) > 0 {
		return &FieldError{"exchanges", "cannot be combined with messages_and_choices or additional_histories (a trajectory holds one form)"}
	}
	hs, err := historiesFromExchanges(x.ChatCompletions)
	if err != nil {
		return err
	}
	t.MessagesAndChoices, t.Tools = hs[0].MessagesAndChoices, hs[0].Tools
	t.AdditionalHistories = hs[1:]
	t.Exchanges = nil
	return nil
}

func (x *Exchanges) empty() bool {
	return len(x.ChatCompletions) == 0 && len(x.Completions) == 0 && len(x.Responses) == 0 && len(x.Messages) == 0
}

// chain is one conversation being rebuilt from exchanges: its items (request messages and
// sampled choices) and their comparable keys.
type chain struct {
	items    []json.RawMessage
	keys     []string
	tools    json.RawMessage
	toolsKey string
	extended bool
}

// historiesFromExchanges rebuilds the conversations of recorded chat completions, in the
// order they started: an exchange whose request messages continue a conversation (its
// messages, with each sampled choice sent back as an assistant message, and the same tools)
// extends it with the new messages and its choice; any other starts a conversation of its
// own. Every choice of a response is a sampled continuation. Conversations that a later
// exchange extended are not kept apart.
func historiesFromExchanges(xs []ChatExchange) ([]History, error) {
	type parsed struct {
		at       time.Time
		hasAt    bool
		msgs     []json.RawMessage
		keys     []string
		tools    json.RawMessage
		toolsKey string
		choices  []json.RawMessage
	}
	ps := make([]parsed, len(xs))
	for i, x := range xs {
		field := fmt.Sprintf("exchanges.chat_completions[%d]", i)
		var req struct {
			Messages []json.RawMessage `json:"messages"`
			Tools    json.RawMessage   `json:"tools"`
		}
		if len(x.Request) == 0 || json.Unmarshal(x.Request, &req) != nil {
			return nil, &FieldError{field + ".request", "must be the chat completion's request body (an object with messages)"}
		}
		if len(req.Messages) == 0 {
			return nil, &FieldError{field + ".request.messages", "is required"}
		}
		var resp struct {
			Choices []json.RawMessage `json:"choices"`
		}
		if len(x.Response) == 0 || json.Unmarshal(x.Response, &resp) != nil || len(resp.Choices) == 0 {
			return nil, &FieldError{field + ".response", "must be the chat completion received (an object with choices)"}
		}
		p := parsed{msgs: req.Messages, choices: resp.Choices}
		if len(req.Tools) > 0 && string(req.Tools) != "null" {
			p.tools = req.Tools
			p.toolsKey = canonicalJSON(req.Tools)
		}
		for j, m := range req.Messages {
			k, err := messageKey(m)
			if err != nil {
				return nil, &FieldError{fmt.Sprintf("%s.request.messages[%d]", field, j), err.Error()}
			}
			p.keys = append(p.keys, k)
		}
		for j, c := range resp.Choices {
			var probe struct {
				Message json.RawMessage `json:"message"`
			}
			if json.Unmarshal(c, &probe) != nil || len(probe.Message) == 0 || string(probe.Message) == "null" {
				return nil, &FieldError{fmt.Sprintf("%s.response.choices[%d].message", field, j), "is required"}
			}
			if _, err := messageKey(probe.Message); err != nil {
				return nil, &FieldError{fmt.Sprintf("%s.response.choices[%d].message", field, j), err.Error()}
			}
		}
		p.at, p.hasAt = parseTime(x.StartTime)
		ps[i] = p
	}
	timed := true
	for _, p := range ps {
		timed = timed && p.hasAt
	}
	if timed {
		sort.SliceStable(ps, func(a, b int) bool { return ps[a].at.Before(ps[b].at) })
	}
	var chains []*chain
	for _, p := range ps {
		var base *chain
		for _, c := range chains {
			if len(c.keys) > len(p.keys) || c.toolsKey != p.toolsKey || (base != nil && len(c.keys) <= len(base.keys)) {
				continue
			}
			if equalKeys(c.keys, p.keys[:len(c.keys)]) {
				base = c
			}
		}
		for _, ch := range p.choices {
			var probe struct {
				Message json.RawMessage `json:"message"`
			}
			json.Unmarshal(ch, &probe)
			key, _ := messageKey(probe.Message)
			n := &chain{tools: p.tools, toolsKey: p.toolsKey}
			from := 0
			if base != nil {
				n.items = append(n.items, base.items...)
				n.keys = append(n.keys, base.keys...)
				from = len(base.keys)
				base.extended = true
			}
			n.items = append(n.items, p.msgs[from:]...)
			n.keys = append(n.keys, p.keys[from:]...)
			n.items = append(n.items, ch)
			n.keys = append(n.keys, key)
			chains = append(chains, n)
		}
	}
	var out []History
	for _, c := range chains {
		if !c.extended {
			out = append(out, History{MessagesAndChoices: c.items, Tools: c.tools})
		}
	}
	return out, nil
}

func equalKeys(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// messageKey is what identifies a chat message when a later request sends it back: its role,
// text, tool calls (function names and arguments), tool_call_id and name. A sampled choice's
// message and the assistant message a client builds from it (with or without the SDK's null
// fields) have the same key.
func messageKey(raw json.RawMessage) (string, error) {
	var m struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Name       string          `json:"name"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", fmt.Errorf("is not a chat message: %v", err)
	}
	if m.Role == "" {
		return "", fmt.Errorf("has no role")
	}
	var b strings.Builder
	parts, _ := json.Marshal([]string{m.Role, contentText(m.Content), m.Name, m.ToolCallID})
	b.Write(parts)
	for _, c := range m.ToolCalls {
		f, _ := json.Marshal([]string{c.Function.Name, c.Function.Arguments})
		b.Write(f)
	}
	return b.String(), nil
}

// contentText is a message's text: a string, the texts of a list of parts (other parts by
// their JSON), or "" for null.
func contentText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			var tp struct {
				Type string  `json:"type"`
				Text *string `json:"text"`
			}
			if json.Unmarshal(p, &tp) == nil && tp.Type == "text" && tp.Text != nil {
				b.WriteString(*tp.Text)
			} else {
				b.WriteString(canonicalJSON(p))
			}
		}
		return b.String()
	}
	return canonicalJSON(raw)
}

// canonicalJSON re-encodes JSON with sorted object keys (Go's encoding of maps).
func canonicalJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// parseTime reads the timestamps Python's datetime.isoformat writes (with or without a zone).
func parseTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

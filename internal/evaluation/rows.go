package evaluation

import (
	"encoding/json"
	"fmt"
	"strings"
)

// example is one row of an evaluation's dataset, ready to ask and score.
type example struct {
	index  int
	ref    string // the row's weave:/// ref (<dataset ref>/attr/rows/id/<row digest>)
	row    map[string]json.RawMessage
	prompt []json.RawMessage // the chat messages to send
	tools  json.RawMessage   // the row's tools, if any
	input  string            // the prompt's last user text ({input} of a judge)
	// reference is the assistant message that ended the row's messages (taken out of the
	// prompt): what the model is expected to answer when a scorer names no field.
	reference json.RawMessage
}

// parseExample reads a row: messages (an SFT row, as datasets/from-calls builds; a final
// assistant message is the reference answer), or a text field (inputField, else the first
// of prompt, question, input, query) asked as a user message.
func parseExample(i int, raw json.RawMessage, inputField string) (*example, error) {
	ex := &example{index: i}
	if json.Unmarshal(raw, &ex.row) != nil || ex.row == nil {
		return nil, fmt.Errorf("row %d is not a JSON object", i)
	}
	if tools, ok := ex.row["tools"]; ok && string(tools) != "null" {
		ex.tools = tools
	}
	if msgs, ok := ex.row["messages"]; ok && inputField == "" {
		if err := json.Unmarshal(msgs, &ex.prompt); err != nil || len(ex.prompt) == 0 {
			return nil, fmt.Errorf("row %d: messages must be a non-empty list of chat messages", i)
		}
		for j, m := range ex.prompt {
			var mm struct {
				Role string `json:"role"`
			}
			if json.Unmarshal(m, &mm) != nil || mm.Role == "" {
				return nil, fmt.Errorf("row %d: messages[%d] has no role", i, j)
			}
		}
		last := ex.prompt[len(ex.prompt)-1]
		if roleOf(last) == "assistant" {
			ex.reference = last
			ex.prompt = ex.prompt[:len(ex.prompt)-1]
			if len(ex.prompt) == 0 {
				return nil, fmt.Errorf("row %d: messages hold only the assistant's answer, nothing to ask", i)
			}
		}
		for j := len(ex.prompt) - 1; j >= 0; j-- {
			if roleOf(ex.prompt[j]) == "user" {
				ex.input = contentText(ex.prompt[j])
				break
			}
		}
		return ex, nil
	}
	fields := inputFields
	if inputField != "" {
		fields = []string{inputField}
	}
	for _, f := range fields {
		v, ok := ex.row[f]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
		if strings.TrimSpace(s) == "" {
			return nil, fmt.Errorf("row %d: %s is empty", i, f)
		}
		ex.input = s
		m, _ := json.Marshal(map[string]string{"role": "user", "content": s})
		ex.prompt = []json.RawMessage{m}
		return ex, nil
	}
	if inputField != "" {
		return nil, fmt.Errorf("row %d has no field %q (input_field)", i, inputField)
	}
	return nil, fmt.Errorf("row %d has neither messages nor a prompt field (%s); name the prompt's field with input_field", i, strings.Join(inputFields, ", "))
}

func roleOf(m json.RawMessage) string {
	var mm struct {
		Role string `json:"role"`
	}
	json.Unmarshal(m, &mm)
	return mm.Role
}

// contentText is a message's content as text (a list of parts: their text joined).
func contentText(m json.RawMessage) string {
	var mm struct {
		Content json.RawMessage `json:"content"`
	}
	json.Unmarshal(m, &mm)
	var s string
	if json.Unmarshal(mm.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(mm.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// expected is the value scorer sc compares with: the row's field (sc.Field, else the first
// of answer, expected, target, reference), else the reference message's text, or, for
// tool_call, its tool calls. ok is false when the row has none.
func (ex *example) expected(sc *Scorer) (json.RawMessage, bool) {
	if sc.Field != "" {
		v, ok := ex.row[sc.Field]
		return v, ok
	}
	for _, f := range expectedFields {
		if v, ok := ex.row[f]; ok {
			return v, true
		}
	}
	if ex.reference == nil {
		return nil, false
	}
	if sc.Type == ToolCall {
		var m struct {
			ToolCalls json.RawMessage `json:"tool_calls"`
		}
		json.Unmarshal(ex.reference, &m)
		if len(m.ToolCalls) == 0 || string(m.ToolCalls) == "null" {
			return nil, false
		}
		return m.ToolCalls, true
	}
	b, _ := json.Marshal(contentText(ex.reference))
	return b, true
}

// check tells whether every scorer finds what it needs in the row.
func (ex *example) check(scorers []Scorer, param string) error {
	for i := range scorers {
		sc := &scorers[i]
		if sc.needsExpected() {
			v, ok := ex.expected(sc)
			if !ok {
				where := "an answer field (" + strings.Join(expectedFields, ", ") + ") or a final assistant message"
				if sc.Field != "" {
					where = "the field " + sc.Field
				}
				return fmt.Errorf("row %d has no expected value for scorer %s (%s[%d]): it needs %s", ex.index, sc.Name, join(param, "scorers"), i, where)
			}
			switch sc.Type {
			case Numeric:
				if _, ok := number(text(v)); !ok {
					return fmt.Errorf("row %d: the expected value %s of scorer %s is not a number", ex.index, v, sc.Name)
				}
			case ToolCall:
				if _, err := expectedCall(v); err != nil {
					return fmt.Errorf("row %d: scorer %s: %w", ex.index, sc.Name, err)
				}
			}
		}
		if sc.Type == Judge {
			for _, m := range placeholder.FindAllStringSubmatch(sc.Prompt, -1) {
				switch name := m[1]; name {
				case "input", "output", "expected":
				default:
					if _, ok := ex.row[name]; !ok {
						return fmt.Errorf("row %d has no field %q, which the prompt of scorer %s names as {%s}", ex.index, name, sc.Name, name)
					}
				}
			}
		}
	}
	return nil
}

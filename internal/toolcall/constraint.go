package toolcall

import (
	"encoding/json"
	"fmt"

	"github.com/honeai/hone/internal/structured"
)

// Tool is one function a request offers.
type Tool struct {
	Name       string
	Parameters json.RawMessage // JSON schema; nil: any object
}

// schema is the tool's parameters schema; none means any object.
func (t Tool) schema() json.RawMessage {
	if len(t.Parameters) == 0 || string(t.Parameters) == "null" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return t.Parameters
}

// Marker is the text that opens a family's calls ("" for none).
func Marker(family string) string {
	switch syntaxOf(family) {
	case Hermes:
		return hermesOpen
	case Llama3JSON:
		return pythonTag
	case Mistral:
		return mistralTag
	}
	return ""
}

// ArgumentWhitespace is the whitespace allowed between JSON tokens of constrained arguments:
// at most one space, so `{"a": 1, "b": 2}` and `{"a":1,"b":2}` are both possible and a
// model cannot spin in whitespace.
const ArgumentWhitespace = " ?"

func quote(name string) string {
	b, _ := json.Marshal(name)
	return string(b)
}

// syntax is how a family writes one call of a tool, with or without its marker.
func syntax(family, name string, marker bool) (begin, end string) {
	switch syntaxOf(family) {
	case Hermes:
		if marker {
			return hermesOpen + "\n" + `{"name": ` + quote(name) + `, "arguments": `, "}\n" + hermesClose
		}
		return `{"name": ` + quote(name) + `, "arguments": `, "}"
	case Llama3JSON:
		return `{"name": ` + quote(name) + `, "parameters": `, "}"
	case Mistral:
		return `{"name": ` + quote(name) + `, "arguments": `, "}"
	}
	return "", ""
}

// Forced is the constraint of an output that is calls only (tool_choice required, or a
// named function when tools holds just that one): the family's syntax around JSON matching
// each tool's parameters; multiple allows several calls. markerSpecial says the family's
// marker is a special token of the vocabulary, which a constraint cannot produce: the calls
// are then written without it (Parse with Options.Forced reads them).
func Forced(family string, tools []Tool, multiple, markerSpecial bool) (*structured.Spec, error) {
	t, err := calls(family, tools, multiple, !markerSpecial)
	if err != nil {
		return nil, err
	}
	return structured.ToolCallsSpec(t, structured.SchemaOptions{Whitespace: ArgumentWhitespace})
}

// calls is the family's syntax of one call (or several, with multiple) of the tools, each
// with the family's marker or without it.
func calls(family string, tools []Tool, multiple, marker bool) (*structured.ToolCalls, error) {
	t := &structured.ToolCalls{Multiple: multiple}
	switch syntaxOf(family) {
	case Hermes:
		t.Sep, t.Trail = "\n", "\n"
	case Llama3JSON:
		t.Sep = "; "
	case Mistral:
		t.Prefix, t.Sep, t.Suffix = "[", ", ", "]"
		if marker {
			t.Prefix = mistralTag + "["
		}
	default:
		return nil, fmt.Errorf("the tool-call parser %q has no call syntax", family)
	}
	for _, tool := range tools {
		b, e := syntax(family, tool.Name, marker)
		t.Structures = append(t.Structures, structured.TagStructure{Begin: b, Schema: tool.schema(), End: e})
	}
	return t, nil
}

// Auto is the constraint of tool_choice auto: free text, in which the family's marker must be
// followed by a whole call of one of the tools (a structural tag triggered by the marker).
// It is nil, with no error, for a family whose calls have no marker a constraint can see
// (llama3_json begins its calls with plain JSON or with the special <|python_tag|>) or
// whose marker is a special token.
func Auto(family string, tools []Tool, markerSpecial bool) (*structured.Spec, error) {
	if markerSpecial || family == Llama3JSON || family == None || family == "" {
		return nil, nil
	}
	var structures []structured.TagStructure
	for _, tool := range tools {
		b, e := syntax(family, tool.Name, true)
		if syntaxOf(family) == Mistral {
			b, e = mistralTag+"["+b, e+"]"
		}
		structures = append(structures, structured.TagStructure{Begin: b, Schema: tool.schema(), End: e})
	}
	return structured.StructuralTagSpec(structures, []string{Marker(family)}, structured.SchemaOptions{Whitespace: ArgumentWhitespace})
}

// AutoOr is the constraint of tool_choice auto beside a JSON response format: the output is
// either calls in the family's syntax (with its marker; several when multiple) or JSON
// matching answer, as OpenAI lets a model either call or answer in the format. It is nil,
// with no error, where calls could not be told from the answer: llama3_json (whose calls
// are plain JSON), or a family whose marker is a special token a constraint cannot produce.
func AutoOr(family string, tools []Tool, multiple, markerSpecial bool, answer json.RawMessage) (*structured.Spec, error) {
	if markerSpecial || Marker(family) == "" || syntaxOf(family) == Llama3JSON {
		return nil, nil
	}
	t, err := calls(family, tools, multiple, true)
	if err != nil {
		return nil, err
	}
	t.Or = answer
	return structured.ToolCallsSpec(t, structured.SchemaOptions{Whitespace: ArgumentWhitespace})
}

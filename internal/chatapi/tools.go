package chatapi

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/structured"
	"github.com/honeai/hone/internal/toolcall"
)

// toolPlan is a request's tools and tool_choice, validated.
type toolPlan struct {
	tools    []toolcall.Tool
	choice   string // none, auto, required, named
	explicit bool   // tool_choice given (not defaulted)
	name     string // the named function
	parallel bool
	family   string // the parser, once the model is known ("" or none: no parsing)
	// generic: the model's calls are in Hone's generic format (its template shows no tool
	// syntax), so the conversation is prepared for its template (toolcall.Prepare).
	generic bool
}

const namedUsage = `Correct usage: {"type": "function", "function": {"name": "my_function"}}`

// parseTools validates tools, tool_choice and parallel_tool_calls with vLLM's rules and
// messages (vllm-chat.md §1.3).
func (req *Request) parseTools() (*toolPlan, error) {
	tp := &toolPlan{choice: "none", parallel: req.ParallelToolCalls == nil || *req.ParallelToolCalls}
	hasTools := len(req.Tools) > 0 && string(req.Tools) != "null"
	if hasTools {
		var raw []json.RawMessage
		if err := json.Unmarshal(req.Tools, &raw); err != nil {
			return nil, bad("tools", "`tools` must be an array of tools: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
		if len(raw) == 0 {
			return nil, bad("tools", "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.")
		}
		for i, r := range raw {
			var t struct {
				Type     string `json:"type"`
				Function *struct {
					Name       string          `json:"name"`
					Parameters json.RawMessage `json:"parameters"`
				} `json:"function"`
			}
			if err := json.Unmarshal(r, &t); err != nil {
				return nil, bad(fmt.Sprintf("tools[%d]", i), "Each tool must be an object {\"type\": \"function\", \"function\": {...}}: %s", strings.TrimPrefix(err.Error(), "json: "))
			}
			if t.Type != "function" {
				return nil, bad(fmt.Sprintf("tools[%d].type", i), "Input should be 'function': tools[%d].type is %q", i, t.Type)
			}
			if t.Function == nil || t.Function.Name == "" {
				return nil, bad(fmt.Sprintf("tools[%d].function.name", i), "Field required: tools[%d].function.name", i)
			}
			if p := t.Function.Parameters; len(p) > 0 && string(p) != "null" {
				var obj map[string]json.RawMessage
				if json.Unmarshal(p, &obj) != nil {
					return nil, bad(fmt.Sprintf("tools[%d].function.parameters", i), "tools[%d].function.parameters must be a JSON schema object", i)
				}
			}
			tp.tools = append(tp.tools, toolcall.Tool{Name: t.Function.Name, Parameters: t.Function.Parameters})
		}
		tp.choice = "auto"
	}
	if len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null" {
		tp.explicit = true
		var s string
		if json.Unmarshal(req.ToolChoice, &s) == nil {
			switch s {
			case "none", "auto", "required":
				tp.choice = s
			default:
				return nil, bad("tool_choice", "Invalid value for `tool_choice`: %s! Only named tools, \"none\", \"auto\" or \"required\" are supported.", s)
			}
		} else {
			var named struct {
				Type     string          `json:"type"`
				Function json.RawMessage `json:"function"`
			}
			if json.Unmarshal(req.ToolChoice, &named) != nil {
				return nil, bad("tool_choice", "Invalid value for `tool_choice`: %s! Only named tools, \"none\", \"auto\" or \"required\" are supported.", req.ToolChoice)
			}
			var fn map[string]json.RawMessage
			if len(named.Function) == 0 || json.Unmarshal(named.Function, &fn) != nil {
				return nil, bad("tool_choice", "Invalid value for `function`: `%s` in `tool_choice`! %s", named.Function, namedUsage)
			}
			nameRaw, ok := fn["name"]
			if !ok {
				return nil, bad("tool_choice", "Expected field `name` in `function` in `tool_choice`! %s", namedUsage)
			}
			if json.Unmarshal(nameRaw, &tp.name) != nil || tp.name == "" {
				return nil, bad("tool_choice", "Invalid `name` in `function`: `%s` in `tool_choice`! %s", nameRaw, namedUsage)
			}
			tp.choice = "named"
		}
		if tp.choice != "none" && !hasTools {
			return nil, bad("tool_choice", "When using `tool_choice`, `tools` must be set.")
		}
		if tp.choice == "named" {
			found := false
			for _, t := range tp.tools {
				found = found || t.Name == tp.name
			}
			if !found {
				return nil, bad("tool_choice", "The tool specified in `tool_choice` does not match any of the specified `tools`")
			}
		}
	}
	return tp, nil
}

// resolve picks the parser family for the model's template (the server's --tool-call-parser
// for the model, else detected from the template, else Hone's generic format) and checks the
// choice against it: only a model served with --tool-call-parser none refuses tool_choice,
// as vLLM without a parser does.
func (tp *toolPlan) resolve(configured, templateSource string) error {
	fam := toolcall.Choose(configured, templateSource)
	tp.generic = fam == toolcall.Generic
	if tp.choice == "none" {
		return nil
	}
	if fam == toolcall.None {
		switch {
		case tp.choice == "auto" && tp.explicit:
			return bad("tool_choice", "\"auto\" tool choice is off for this model: the server runs it with --tool-call-parser none. Serve it without that flag (Hone then uses the tool syntax of its chat template, or its generic format), or name a parser: hermes, llama3_json, mistral, generic")
		case tp.choice == "required" || tp.choice == "named":
			return bad("tool_choice", "tool_choice=%q is off for this model: the server runs it with --tool-call-parser none. Serve it without that flag (Hone then uses the tool syntax of its chat template, or its generic format), or name a parser: hermes, llama3_json, mistral, generic", tp.choice)
		}
		// tool_choice defaulted to auto: the tools are rendered, the answer stays text.
		tp.choice = "none"
		return nil
	}
	tp.family = fam
	return nil
}

// constraint is the structured-output spec of the calls: required and named always; auto
// when the family's marker can trigger one and the request has no constraint of its own. An
// auto constraint that cannot be built (a schema feature Hone cannot enforce) is left out:
// the calls are then only parsed.
func (tp *toolPlan) constraint(markerSpecial bool) (*structured.Spec, error) {
	switch tp.choice {
	case "required", "named":
		tools := tp.tools
		if tp.choice == "named" {
			for _, t := range tp.tools {
				if t.Name == tp.name {
					tools = []toolcall.Tool{t}
					break
				}
			}
		}
		spec, err := toolcall.Forced(tp.family, tools, tp.choice == "required" && tp.parallel, markerSpecial)
		if err != nil {
			return nil, apierror.BadRequest("tools", "The tools' parameters cannot constrain the tool call: %v", err)
		}
		return spec, nil
	case "auto":
		spec, err := toolcall.Auto(tp.family, tp.tools, markerSpecial)
		if err != nil {
			return nil, nil
		}
		return spec, nil
	}
	return nil, nil
}

// output is how the engine reads the calls (nil: no parsing).
func (tp *toolPlan) output() *inference.ToolCalls {
	if tp == nil || tp.family == "" || tp.choice == "none" {
		return nil
	}
	return &inference.ToolCalls{Family: tp.family, Options: toolcall.Options{
		Forced: tp.choice == "required" || tp.choice == "named",
		Single: !tp.parallel || tp.choice == "named",
	}}
}

// finishReason is a choice's finish reason once it made calls: tool_calls, except for a
// named function, where OpenAI and vLLM keep stop.
func (tp *toolPlan) finishReason(finish string) string {
	if finish == "stop" && tp.choice != "named" {
		return "tool_calls"
	}
	return finish
}

// ToolCall is one call of a response message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a call's function.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// deltaToolCall is a call's part in a streamed delta.
type deltaToolCall struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function deltaFunction `json:"function"`
}

type deltaFunction struct {
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}

package structured

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// ToolCalls is the constraint of an output made of tool calls only (tool_choice required or
// a named function): Prefix, one call (or, with Multiple, one or more separated by Sep),
// Suffix, then optionally Trail (whitespace a model may write before it ends, such as the
// newline after hermes' </tool_call>: with Sep "\n", a model that wrote that newline may
// still end instead of being held to a further call). A call is one of the structures: its
// Begin, JSON matching its Schema, its End.
//
// Or, when set, is a JSON schema the output may match instead of being calls: tool_choice
// auto beside a response_format, where the model either calls or answers in the format, as
// OpenAI lets it.
type ToolCalls struct {
	Prefix, Sep, Suffix string
	Trail               string `json:",omitempty"`
	Multiple            bool
	Structures          []TagStructure
	Or                  json.RawMessage `json:",omitempty"`
}

// TagStructure is one structure of a structural tag or of tool calls.
type TagStructure struct {
	Begin  string          `json:"begin"`
	Schema json.RawMessage `json:"schema"`
	End    string          `json:"end"`
}

// ToolCallsSpec returns the spec of tool calls; o's whitespace options apply inside the
// arguments. Errors name the structure whose schema Hone cannot enforce.
func ToolCallsSpec(t *ToolCalls, o SchemaOptions) (*Spec, error) {
	s := &Spec{Kind: "tool_calls", Tools: t, Options: o}
	if _, err := s.Rules(); err != nil {
		return nil, err
	}
	return s, nil
}

// StructuralTagSpec returns the spec of a structural tag built by Hone (tool_choice auto):
// free text until a trigger, then one of the structures it begins.
func StructuralTagSpec(structures []TagStructure, triggers []string, o SchemaOptions) (*Spec, error) {
	raw, err := json.Marshal(map[string]any{"structures": structures, "triggers": triggers})
	if err != nil {
		return nil, err
	}
	tag, field, err := parseStructuralTag(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	s := &Spec{Kind: "structural_tag", Tag: tag, Options: o}
	if _, err := s.Rules(); err != nil {
		return nil, err
	}
	return s, nil
}

func (t *ToolCalls) rules(o SchemaOptions) (RuleSet, error) {
	set := &RuleSet{Rules: []string{""}, Names: []string{"tool_calls"}}
	alts := make([]string, 0, len(t.Structures))
	for j, s := range t.Structures {
		schema := s.Schema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		content, err := schemaInto(set, schema, o)
		if err != nil {
			if ue, ok := err.(*UnsupportedError); ok {
				for f := range ue.Features {
					ue.Features[f] = fmt.Sprintf("structures[%d].schema: %s", j, ue.Features[f])
				}
			}
			return RuleSet{}, err
		}
		alts = append(alts, regexp.QuoteMeta(s.Begin)+content+regexp.QuoteMeta(s.End))
	}
	one := "(?:" + strings.Join(alts, "|") + ")"
	body := one
	if t.Multiple {
		body = one + "(?:" + regexp.QuoteMeta(t.Sep) + one + ")*"
	}
	set.Rules[0] = regexp.QuoteMeta(t.Prefix) + body + regexp.QuoteMeta(t.Suffix)
	if t.Trail != "" {
		set.Rules[0] += "(?:" + regexp.QuoteMeta(t.Trail) + ")?"
	}
	if len(t.Or) > 0 {
		answer, err := schemaInto(set, t.Or, o)
		if err != nil {
			if ue, ok := err.(*UnsupportedError); ok {
				for f := range ue.Features {
					ue.Features[f] = "or: " + ue.Features[f]
				}
			}
			return RuleSet{}, err
		}
		set.Rules[0] = "(?:" + set.Rules[0] + "|" + answer + ")"
	}
	if len(set.Rules) > maxRules {
		return RuleSet{}, &UnsupportedError{Features: []string{fmt.Sprintf("more than %d rules", maxRules-1)}}
	}
	return *set, nil
}

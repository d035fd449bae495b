package structured

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/honeai/hone/internal/fault"
)

// Backend is Hone's structured-output backend name (the `_backend` a request may name).
const Backend = "hone"

// Spec is a validated constraint of a request: exactly one kind.
type Spec struct {
	Kind    string // json, regex, choice, grammar, json_object, structural_tag, tool_calls
	Schema  json.RawMessage
	Regex   string
	Grammar string
	Choices []string
	Tag     *StructuralTag
	Tools   *ToolCalls
	Options SchemaOptions
	param   string // the request field it came from, for errors
}

// JSONSchema is the schema of a JSON constraint (json, or json_object as any object); nil for
// the other kinds.
func (s *Spec) JSONSchema() json.RawMessage {
	switch s.Kind {
	case "json":
		return s.Schema
	case "json_object":
		return json.RawMessage(`{"type":"object"}`)
	}
	return nil
}

// Key identifies the spec for caching compiled constraints.
func (s *Spec) Key() string {
	b, _ := json.Marshal(struct {
		K string
		S json.RawMessage
		R string
		G string
		C []string
		T *StructuralTag
		U *ToolCalls
		W bool
		A bool
		P string
	}{s.Kind, s.Schema, s.Regex, s.Grammar, s.Choices, s.Tag, s.Tools, s.Options.NoWhitespace, s.Options.NoAdditionalProperties, s.Options.Whitespace})
	return string(b)
}

// Rules returns the rule set the spec compiles to (one rule when it is regular).
func (s *Spec) Rules() (RuleSet, error) {
	one := func(re string) RuleSet { return RuleSet{Rules: []string{re}, Names: []string{s.Kind}} }
	switch s.Kind {
	case "regex":
		return one(s.Regex), nil
	case "choice":
		alts := make([]string, len(s.Choices))
		for i, c := range s.Choices {
			alts[i] = regexp.QuoteMeta(c)
		}
		return one("(?:" + strings.Join(alts, "|") + ")"), nil
	case "json":
		return SchemaRules(s.Schema, s.Options)
	case "json_object":
		return SchemaRules(json.RawMessage(`{"type":"object"}`), s.Options)
	case "grammar":
		rs, err := GrammarRules(s.Grammar)
		if err != nil {
			return RuleSet{}, &grammarError{err}
		}
		return rs, nil
	case "structural_tag":
		return s.Tag.rules(s.Options)
	case "tool_calls":
		return s.Tools.rules(s.Options)
	}
	return RuleSet{}, fmt.Errorf("unknown constraint kind %q", s.Kind)
}

// compileRules builds the automaton of a rule set: a DFA for one rule, else a pushdown
// automaton.
func compileRules(rs RuleSet) (*DFA, *PDA, error) {
	if len(rs.Rules) == 1 {
		d, err := CompileRegex(rs.Rules[0])
		return d, nil, err
	}
	p, err := CompileRules(rs)
	return nil, p, err
}

func bad(param, format string, args ...any) error { return fault.Invalid(param, format, args...) }

// FromRequest validates a chat request's structured_outputs and response_format (raw JSON,
// either may be absent) and returns the constraint, nil when there is none. Errors are faults
// (fault.Invalid) with vLLM's messages, naming the field.
func FromRequest(structuredOutputs, responseFormat json.RawMessage) (*Spec, error) {
	var spec *Spec
	if len(responseFormat) > 0 && string(responseFormat) != "null" {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
				Strict *bool           `json:"strict"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(responseFormat, &rf); err != nil {
			return nil, bad("response_format", "response_format must be an object with a type: %v", err)
		}
		switch rf.Type {
		case "text":
		case "json_object":
			spec = &Spec{Kind: "json_object", param: "response_format"}
		case "json_schema":
			if rf.JSONSchema == nil {
				return nil, bad("response_format.json_schema", "When response_format type is 'json_schema', the 'json_schema' field must be provided.")
			}
			schema := rf.JSONSchema.Schema
			if len(schema) == 0 || string(schema) == "null" {
				schema = json.RawMessage(`{}`)
			}
			spec = &Spec{Kind: "json", Schema: schema, param: "response_format.json_schema.schema"}
		case "structural_tag":
			tag, field, err := parseStructuralTag(responseFormat)
			if err != nil {
				return nil, bad(join("response_format", field), "%v", err)
			}
			spec = &Spec{Kind: "structural_tag", Tag: tag, param: "response_format"}
		default:
			return nil, bad("response_format.type", "response_format type must be one of 'text', 'json_object', 'json_schema', 'structural_tag', got %q", rf.Type)
		}
	}
	if len(structuredOutputs) > 0 && string(structuredOutputs) != "null" {
		var so map[string]json.RawMessage
		if err := json.Unmarshal(structuredOutputs, &so); err != nil {
			return nil, bad("structured_outputs", "structured_outputs must be an object: %v", err)
		}
		var kinds []string
		for _, k := range []string{"json", "regex", "choice", "grammar", "json_object", "structural_tag"} {
			if v, ok := so[k]; ok && string(v) != "null" && !(k == "json_object" && string(v) == "false") {
				kinds = append(kinds, k)
			}
		}
		present := map[string]any{}
		for _, k := range kinds {
			present[k] = json.RawMessage(so[k])
		}
		pj, _ := json.Marshal(present)
		if len(kinds) > 1 {
			return nil, bad("structured_outputs", "You can only use one kind of structured outputs constraint but multiple are specified: %s", pj)
		}
		if len(kinds) == 0 {
			return nil, bad("structured_outputs", "You must use one kind of structured outputs constraint but none are specified: %s", structuredOutputs)
		}
		if spec != nil {
			return nil, bad("structured_outputs", "You can only use one kind of structured outputs constraint: response_format and structured_outputs both give one")
		}
		if b, ok := so["_backend"]; ok && string(b) != "null" {
			var name string
			json.Unmarshal(b, &name)
			if name != "auto" && name != Backend {
				return nil, bad("structured_outputs._backend", "Request-level structured output backend selection is not supported. The request specified '%s', but Hone was initialised with '%s'. This error can be resolved by removing '_backend' from the request.", name, Backend)
			}
		}
		kind := kinds[0]
		raw := so[kind]
		spec = &Spec{Kind: kind}
		switch kind {
		case "json":
			var str string
			if json.Unmarshal(raw, &str) == nil {
				raw = json.RawMessage(str) // a schema given as a JSON string
			}
			if !json.Valid(raw) {
				return nil, bad("structured_outputs.json", "Invalid JSON schema: not JSON")
			}
			spec.Schema = raw
		case "regex":
			if json.Unmarshal(raw, &spec.Regex) != nil {
				return nil, bad("structured_outputs.regex", "structured_outputs.regex must be a string")
			}
		case "choice":
			if json.Unmarshal(raw, &spec.Choices) != nil {
				return nil, bad("structured_outputs.choice", "structured_outputs.choice must be a list of strings")
			}
			if len(spec.Choices) == 0 {
				return nil, bad("structured_outputs.choice", "Choice '[]' cannot be an empty list")
			}
		case "json_object":
			var b bool
			if json.Unmarshal(raw, &b) != nil {
				return nil, bad("structured_outputs.json_object", "structured_outputs.json_object must be a boolean")
			}
		case "grammar":
			var g string
			if json.Unmarshal(raw, &g) != nil || strings.TrimSpace(g) == "" {
				return nil, bad("structured_outputs.grammar", "structured_outputs.grammar cannot be an empty string")
			}
			spec.Grammar = g
		case "structural_tag":
			tag, field, err := parseStructuralTag(raw)
			if err != nil {
				return nil, bad(join("structured_outputs.structural_tag", field), "%v", err)
			}
			spec.Tag = tag
		}
		for k, dst := range map[string]*bool{"disable_any_whitespace": &spec.Options.NoWhitespace, "disable_additional_properties": &spec.Options.NoAdditionalProperties} {
			if v, ok := so[k]; ok && string(v) != "null" {
				if json.Unmarshal(v, dst) != nil {
					return nil, bad("structured_outputs."+k, "structured_outputs.%s must be a boolean", k)
				}
			}
		}
		if v, ok := so["whitespace_pattern"]; ok && string(v) != "null" {
			if json.Unmarshal(v, &spec.Options.Whitespace) != nil {
				return nil, bad("structured_outputs.whitespace_pattern", "structured_outputs.whitespace_pattern must be a string")
			}
		}
	}
	if spec == nil {
		return nil, nil
	}
	// Compile once here so that every problem is a 400 now, not a failure mid-generation.
	rs, err := spec.Rules()
	var ue *UnsupportedError
	var ge *grammarError
	switch {
	case errors.As(err, &ue):
		return nil, bad(specParam(spec), "%s", ue.Error())
	case errors.As(err, &ge):
		return nil, bad(specParam(spec), "Invalid grammar specification: %v", ge.err)
	case err != nil:
		return nil, bad(specParam(spec), "Invalid structured output constraint: %v", err)
	}
	if _, _, err := compileRules(rs); err != nil {
		return nil, bad(specParam(spec), "Failed to transform regex into a grammar: %v", err)
	}
	return spec, nil
}

func specParam(s *Spec) string {
	if s.param != "" {
		return s.param
	}
	return "structured_outputs." + s.Kind
}

func join(param, field string) string {
	if field == "" {
		return param
	}
	return param + "." + field
}

type grammarError struct{ err error }

func (e *grammarError) Error() string { return e.err.Error() }

// Compiler compiles specs against one vocabulary, caching the results by their text.
type Compiler struct {
	Index *Index

	mu    sync.Mutex
	cache map[string]*Constraint
	order []string
}

// NewCompiler returns a compiler for ix, keeping up to 256 compiled constraints.
func NewCompiler(ix *Index) *Compiler { return &Compiler{Index: ix, cache: map[string]*Constraint{}} }

// Compile returns the constraint of spec (from the cache when compiled before).
func (c *Compiler) Compile(spec *Spec) (*Constraint, error) {
	key := spec.Key()
	c.mu.Lock()
	if k, ok := c.cache[key]; ok {
		c.mu.Unlock()
		return k, nil
	}
	c.mu.Unlock()
	rs, err := spec.Rules()
	if err != nil {
		return nil, err
	}
	d, p, err := compileRules(rs)
	if err != nil {
		return nil, err
	}
	var k *Constraint
	if p != nil {
		k = NewPushdownConstraint(c.Index, p, strings.Join(rs.Rules, "\n"))
	} else {
		k = NewConstraint(c.Index, d, rs.Rules[0])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.order) >= 256 {
		delete(c.cache, c.order[0])
		c.order = c.order[1:]
	}
	c.cache[key] = k
	c.order = append(c.order, key)
	return k, nil
}

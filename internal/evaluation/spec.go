package evaluation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/jsonfields"
)

// Spec is an evaluation as Hone runs it: where its rows are, how a row becomes a chat
// request, the generation settings and the scorers. It is kept in the Weave Evaluation
// object's metadata (metadata.hone), so that the Evaluation can be run again by its ref.
type Spec struct {
	// Name is the Evaluation object's name in the trace project.
	Name string `json:"name"`
	// Dataset is a weave:/// Dataset object or table ref (an upload becomes a Dataset when
	// the evaluation is created).
	Dataset string `json:"dataset"`
	// InputField names the row field that holds the prompt text when the row has no
	// messages ("" = the first of prompt, question, input, query).
	InputField string `json:"input_field,omitempty"`
	// Limit evaluates the first Limit rows only (0 = all).
	Limit      int        `json:"limit,omitempty"`
	Generation Generation `json:"generation"`
	Scorers    []Scorer   `json:"scorers"`
}

// Generation is how each row's reply is generated: the fields of a chat completion request.
type Generation struct {
	MaxTokens      *int            `json:"max_tokens,omitempty"`  // default 256
	Temperature    *float64        `json:"temperature,omitempty"` // default 0 (greedy)
	TopP           *float64        `json:"top_p,omitempty"`
	Seed           *int64          `json:"seed,omitempty"`
	Stop           json.RawMessage `json:"stop,omitempty"`
	System         string          `json:"system,omitempty"` // a system message before each row's messages
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	Tools          json.RawMessage `json:"tools,omitempty"`
	ToolChoice     json.RawMessage `json:"tool_choice,omitempty"`
	// Concurrency is how many rows are generated at once (default 8; the engine batches them).
	Concurrency int `json:"concurrency,omitempty"`
}

// Scorer is one of Hone's built-in scorers (Type) with its settings.
type Scorer struct {
	Type string `json:"type"`
	// Name is the scorer's name: its key in the scores and the summary, and its metric
	// (default: Type).
	Name string `json:"name,omitempty"`
	// Field is the row field that holds the expected value ("" = the first of answer,
	// expected, target, reference, else the row's final assistant message).
	Field      string `json:"field,omitempty"`
	IgnoreCase bool   `json:"ignore_case,omitempty"`
	// Value is contains' fixed text (instead of the row's expected value).
	Value   string          `json:"value,omitempty"`
	Pattern string          `json:"pattern,omitempty"` // regex: RE2 syntax
	Schema  json.RawMessage `json:"schema,omitempty"`  // json_schema: a JSON Schema
	// Tolerance is numeric's largest accepted difference (default 1e-6); Relative makes it
	// a fraction of the expected value.
	Tolerance *float64 `json:"tolerance,omitempty"`
	Relative  bool     `json:"relative,omitempty"`
	// Arguments is tool_call's comparison of the arguments: "exact" (default: the same JSON
	// value), "subset" (the expected keys with the same values) or "ignore" (the name only).
	Arguments string `json:"arguments,omitempty"`
	// Judge: Model (a served model or a checkpoint of the entity) answers Prompt (a template
	// of {input}, {output}, {expected} and the row's fields) with one of the labels of
	// Choices (the answer is held to them), whose value is the score.
	Model     string             `json:"model,omitempty"`
	Prompt    string             `json:"prompt,omitempty"`
	Choices   map[string]float64 `json:"choices,omitempty"`
	System    string             `json:"system,omitempty"`
	MaxTokens *int               `json:"max_tokens,omitempty"`
}

// Scorer types.
const (
	ExactMatch = "exact_match"
	Contains   = "contains"
	Regex      = "regex"
	JSONSchema = "json_schema"
	Numeric    = "numeric"
	ToolCall   = "tool_call"
	Judge      = "judge"
)

// ScorerTypes lists the built-in scorers.
var ScorerTypes = []string{ExactMatch, Contains, Regex, JSONSchema, Numeric, ToolCall, Judge}

// expectedFields are the row fields a scorer reads its expected value from when it names
// none, in this order.
var expectedFields = []string{"answer", "expected", "target", "reference"}

// inputFields are the row fields a prompt is read from when the row has no messages and
// the evaluation names none, in this order.
var inputFields = []string{"prompt", "question", "input", "query"}

// strictDecode decodes the JSON object raw into v; a field v does not have, or a value of
// the wrong type, is a fault naming it under param.
func strictDecode(raw json.RawMessage, v any, param string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return fault.Invalid(param, "%s must be a JSON object", orBody(param))
	}
	t := reflect.TypeOf(v).Elem()
	var unknown []string
	for k := range m {
		if !jsonfields.Has(t, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		known := make([]string, 0)
		for k := range jsonfields.Of(t) {
			known = append(known, k)
		}
		sort.Strings(known)
		return fault.Invalid(join(param, unknown[0]), "%s is not a field Hone knows here (%s)", join(param, unknown[0]), strings.Join(known, ", "))
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fault.JSON(err, param)
	}
	return nil
}

func orBody(param string) string {
	if param == "" {
		return "the body"
	}
	return param
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// validName checks a name used as an object id and a metric (no '/', ':', spaces).
func validName(param, v string) error {
	if v == "" {
		return fault.Invalid(param, "%s is required", param)
	}
	if len(v) > 128 || strings.ContainsAny(v, "/:\\ \t\n@{}") {
		return fault.Invalid(param, "%s %q must be at most 128 characters without '/', ':', '\\\\', '@', braces or spaces", param, v)
	}
	return nil
}

// placeholder finds the {name} placeholders of a judge's prompt.
var placeholder = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_.]*)\}`)

// Check validates the spec (not its dataset, which the service reads) and fills in the
// defaults; param prefixes the fields it names ("" for a request body, "evaluation" inside
// a training job).
func (sp *Spec) Check(param string) error {
	if err := validName(join(param, "name"), sp.Name); err != nil {
		return err
	}
	if sp.Limit < 0 {
		return fault.Invalid(join(param, "limit"), "limit must be at least 0 (0 evaluates every row), got %d", sp.Limit)
	}
	if sp.InputField != "" {
		if err := validName(join(param, "input_field"), sp.InputField); err != nil {
			return err
		}
	}
	g := &sp.Generation
	gp := join(param, "generation")
	if g.MaxTokens != nil && (*g.MaxTokens < 1 || *g.MaxTokens > 1<<20) {
		return fault.Invalid(gp+".max_tokens", "generation.max_tokens must be from 1 to %d, got %d", 1<<20, *g.MaxTokens)
	}
	if g.Temperature != nil && (*g.Temperature < 0 || *g.Temperature > 100) {
		return fault.Invalid(gp+".temperature", "generation.temperature must be from 0 to 100, got %g", *g.Temperature)
	}
	if g.TopP != nil && (*g.TopP <= 0 || *g.TopP > 1) {
		return fault.Invalid(gp+".top_p", "generation.top_p must be in (0, 1], got %g", *g.TopP)
	}
	if g.Concurrency < 0 || g.Concurrency > 256 {
		return fault.Invalid(gp+".concurrency", "generation.concurrency must be from 1 to 256, got %d", g.Concurrency)
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"stop", g.Stop}, {"response_format", g.ResponseFormat}, {"tools", g.Tools}, {"tool_choice", g.ToolChoice}} {
		if len(f.raw) > 0 && !json.Valid(f.raw) {
			return fault.Invalid(gp+"."+f.name, "generation.%s is not JSON", f.name)
		}
	}
	if len(sp.Scorers) == 0 {
		return fault.Invalid(join(param, "scorers"), "scorers must name at least one scorer (%s)", strings.Join(ScorerTypes, ", "))
	}
	names := map[string]bool{}
	for i := range sp.Scorers {
		sc := &sp.Scorers[i]
		p := fmt.Sprintf("%s[%d]", join(param, "scorers"), i)
		if err := sc.check(p); err != nil {
			return err
		}
		if names[sc.Name] {
			return fault.Invalid(p+".name", "two scorers are named %q: give each its own name", sc.Name)
		}
		if sc.Name == "model_latency" || sc.Name == "output" {
			return fault.Invalid(p+".name", "%q is the name of a summary entry of its own: give the scorer another name", sc.Name)
		}
		names[sc.Name] = true
	}
	return nil
}

// check validates one scorer and fills in its defaults.
func (sc *Scorer) check(p string) error {
	known := false
	for _, t := range ScorerTypes {
		known = known || sc.Type == t
	}
	if !known {
		return fault.Invalid(p+".type", "%s.type %q is not a scorer Hone has (%s)", p, sc.Type, strings.Join(ScorerTypes, ", "))
	}
	if sc.Name == "" {
		sc.Name = sc.Type
	}
	if err := validName(p+".name", sc.Name); err != nil {
		return err
	}
	if sc.Field != "" {
		if err := validName(p+".field", sc.Field); err != nil {
			return err
		}
	}
	// The settings of one type given to another are mistakes: say so rather than ignore them.
	only := func(field string, set bool, types ...string) error {
		if !set {
			return nil
		}
		for _, t := range types {
			if sc.Type == t {
				return nil
			}
		}
		return fault.Invalid(p+"."+field, "%s.%s is a setting of the %s scorer, not of %s", p, field, strings.Join(types, " and "), sc.Type)
	}
	for _, e := range []error{
		only("value", sc.Value != "", Contains),
		only("ignore_case", sc.IgnoreCase, ExactMatch, Contains),
		only("pattern", sc.Pattern != "", Regex),
		only("schema", len(sc.Schema) > 0, JSONSchema),
		only("tolerance", sc.Tolerance != nil, Numeric),
		only("relative", sc.Relative, Numeric),
		only("arguments", sc.Arguments != "", ToolCall),
		only("model", sc.Model != "", Judge),
		only("prompt", sc.Prompt != "", Judge),
		only("choices", sc.Choices != nil, Judge),
		only("system", sc.System != "", Judge),
		only("max_tokens", sc.MaxTokens != nil, Judge),
	} {
		if e != nil {
			return e
		}
	}
	switch sc.Type {
	case Regex:
		if sc.Pattern == "" {
			return fault.Invalid(p+".pattern", "%s.pattern is required: the regular expression (RE2 syntax) the output must match", p)
		}
		if _, err := regexp.Compile(sc.Pattern); err != nil {
			return fault.Invalid(p+".pattern", "%s.pattern is not a regular expression: %v", p, err)
		}
	case JSONSchema:
		if len(bytes.TrimSpace(sc.Schema)) == 0 {
			return fault.Invalid(p+".schema", "%s.schema is required: the JSON Schema the output must be valid against", p)
		}
		if _, err := compileSchema(sc.Schema); err != nil {
			return fault.Invalid(p+".schema", "%s.schema is not a JSON Schema Hone can use: %v", p, err)
		}
	case Numeric:
		if sc.Tolerance == nil {
			t := 1e-6
			sc.Tolerance = &t
		}
		if *sc.Tolerance < 0 || *sc.Tolerance != *sc.Tolerance {
			return fault.Invalid(p+".tolerance", "%s.tolerance must be a number at least 0, got %g", p, *sc.Tolerance)
		}
	case ToolCall:
		switch sc.Arguments {
		case "":
			sc.Arguments = "exact"
		case "exact", "subset", "ignore":
		default:
			return fault.Invalid(p+".arguments", "%s.arguments must be exact, subset or ignore, got %q", p, sc.Arguments)
		}
	case Judge:
		if sc.Model == "" {
			return fault.Invalid(p+".model", "%s.model is required: the served model (or checkpoint) that judges", p)
		}
		if strings.TrimSpace(sc.Prompt) == "" {
			return fault.Invalid(p+".prompt", "%s.prompt is required: a template such as \"Question: {input}\\nAnswer: {output}\\nIs the answer right? yes or no\"", p)
		}
		if len(sc.Choices) < 2 {
			return fault.Invalid(p+".choices", "%s.choices must map at least two answers to their scores, such as {\"yes\": 1, \"no\": 0}", p)
		}
		for label, v := range sc.Choices {
			if strings.TrimSpace(label) == "" || v != v || v > 1e12 || v < -1e12 {
				return fault.Invalid(p+".choices", "%s.choices: every answer must be non-empty text with a finite score", p)
			}
		}
		if sc.MaxTokens != nil && (*sc.MaxTokens < 1 || *sc.MaxTokens > 4096) {
			return fault.Invalid(p+".max_tokens", "%s.max_tokens must be from 1 to 4096, got %d", p, *sc.MaxTokens)
		}
	}
	return nil
}

// labels are a judge's answers in a fixed order.
func (sc *Scorer) labels() []string {
	out := make([]string, 0, len(sc.Choices))
	for k := range sc.Choices {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Metrics are the names of the metrics an evaluation of this spec produces: one per scorer
// (its mean, or its fraction of true for a pass/fail scorer) and model_latency.
func (sp *Spec) Metrics() []string {
	out := []string{}
	for _, sc := range sp.Scorers {
		out = append(out, sc.Name)
	}
	return append(out, "model_latency")
}

// Produces reports whether the evaluation produces metric.
func (sp *Spec) Produces(metric string) bool {
	for _, m := range sp.Metrics() {
		if m == metric {
			return true
		}
	}
	return false
}

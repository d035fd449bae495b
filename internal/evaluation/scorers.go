package evaluation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// noLoader refuses every $ref to a document outside the schema: a scorer's schema never
// makes the server read files or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref %q: a scorer's schema may refer only to itself", url)
}

// compileSchema compiles a JSON Schema (draft 2020-12 unless it says otherwise).
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	const loc = "hone:///scorer-schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// reply is what the model answered to a row: its text and its tool calls.
type reply struct {
	Content   string     `json:"content"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

// toolCall is a tool call as OpenAI's API writes it (arguments a JSON string).
type toolCall struct {
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// scorer is a compiled Scorer (not a judge: run.go asks the judge model).
type scorer struct {
	Scorer
	re     *regexp.Regexp
	schema *jsonschema.Schema
}

func compile(sc Scorer) (*scorer, error) {
	c := &scorer{Scorer: sc}
	var err error
	switch sc.Type {
	case Regex:
		c.re, err = regexp.Compile(sc.Pattern)
	case JSONSchema:
		c.schema, err = compileSchema(sc.Schema)
	}
	return c, err
}

// needsExpected reports whether the scorer compares with a value of the row.
func (sc *Scorer) needsExpected() bool {
	switch sc.Type {
	case ExactMatch, Numeric, ToolCall:
		return true
	case Contains:
		return sc.Value == ""
	case Judge:
		return strings.Contains(sc.Prompt, "{expected}")
	}
	return false
}

// text is a JSON value as text: a string's own characters, anything else its JSON.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

// score scores one reply: a pass/fail scorer's bool, or a number.
func (c *scorer) score(out reply, expected json.RawMessage) (any, error) {
	switch c.Type {
	case ExactMatch:
		a, b := strings.TrimSpace(out.Content), strings.TrimSpace(text(expected))
		if c.IgnoreCase {
			return strings.EqualFold(a, b), nil
		}
		return a == b, nil
	case Contains:
		want := c.Value
		if want == "" {
			want = strings.TrimSpace(text(expected))
		}
		if c.IgnoreCase {
			return strings.Contains(strings.ToLower(out.Content), strings.ToLower(want)), nil
		}
		return strings.Contains(out.Content, want), nil
	case Regex:
		return c.re.MatchString(out.Content), nil
	case JSONSchema:
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(strings.TrimSpace(out.Content)))
		if err != nil {
			return false, nil
		}
		return c.schema.Validate(inst) == nil, nil
	case Numeric:
		want, ok := number(text(expected))
		if !ok {
			return nil, fmt.Errorf("the expected value %s is not a number", expected)
		}
		got, ok := lastNumber(out.Content)
		if !ok {
			return false, nil
		}
		tol := *c.Tolerance
		if c.Relative {
			tol *= math.Abs(want)
		}
		return math.Abs(got-want) <= tol, nil
	case ToolCall:
		want, err := expectedCall(expected)
		if err != nil {
			return nil, err
		}
		if len(out.ToolCalls) == 0 {
			return false, nil
		}
		got := out.ToolCalls[0].Function
		if got.Name != want.name {
			return false, nil
		}
		switch c.Arguments {
		case "ignore":
			return true, nil
		case "subset":
			return argsSubset(want.args, got.Arguments), nil
		}
		return sameJSON(want.args, got.Arguments), nil
	}
	return nil, fmt.Errorf("scorer type %q is not scored here", c.Type)
}

// numberRe finds numbers in text: signs, thousands separators, decimals and exponents.
var numberRe = regexp.MustCompile(`[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+`)

// number reads a number written alone (its separators allowed).
func number(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return f, true
	}
	return 0, false
}

// lastNumber is the last number a reply writes ("... so the answer is 42.").
func lastNumber(s string) (float64, bool) {
	all := numberRe.FindAllString(s, -1)
	for i := len(all) - 1; i >= 0; i-- {
		if f, ok := number(all[i]); ok {
			return f, true
		}
	}
	return 0, false
}

type wantCall struct {
	name string
	args string // JSON text ("" when the expected call gives none)
}

// expectedCall reads the expected tool call: {name, arguments}, OpenAI's {type, function:
// {name, arguments}}, a list of either (its first), or an assistant message's tool_calls.
func expectedCall(raw json.RawMessage) (wantCall, error) {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		if len(list) == 0 {
			return wantCall{}, errors.New("the expected tool calls are an empty list")
		}
		raw = list[0]
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return wantCall{}, fmt.Errorf("the expected tool call %s is not an object {name, arguments}", raw)
	}
	if tc, ok := m["tool_calls"]; ok {
		return expectedCall(tc)
	}
	if f, ok := m["function"]; ok {
		if json.Unmarshal(f, &m) != nil {
			return wantCall{}, fmt.Errorf("the expected tool call's function %s is not an object", f)
		}
	}
	var w wantCall
	if json.Unmarshal(m["name"], &w.name) != nil || w.name == "" {
		return wantCall{}, fmt.Errorf("the expected tool call %s has no name", raw)
	}
	if a, ok := m["arguments"]; ok && string(a) != "null" {
		var s string
		if json.Unmarshal(a, &s) == nil {
			w.args = s
		} else {
			w.args = string(a)
		}
	}
	return w, nil
}

// sameJSON compares two JSON texts as values ("" is {}).
func sameJSON(a, b string) bool {
	var x, y any
	if strings.TrimSpace(a) == "" {
		a = "{}"
	}
	if strings.TrimSpace(b) == "" {
		b = "{}"
	}
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// argsSubset reports whether every key of want's object has the same value in got's.
func argsSubset(want, got string) bool {
	var w, g map[string]any
	if strings.TrimSpace(want) == "" {
		return true
	}
	if json.Unmarshal([]byte(want), &w) != nil || json.Unmarshal([]byte(got), &g) != nil {
		return false
	}
	for k, v := range w {
		if gv, ok := g[k]; !ok || !reflect.DeepEqual(v, gv) {
			return false
		}
	}
	return true
}

// judgeScore reads a judge's answer: the value of the label it gave (the constraint holds
// it to one; surrounding space and case are forgiven for a model that wrote more).
func (sc *Scorer) judgeScore(answer string) (float64, bool) {
	a := strings.TrimSpace(answer)
	if v, ok := sc.Choices[a]; ok {
		return v, true
	}
	for label, v := range sc.Choices {
		if strings.EqualFold(label, a) {
			return v, true
		}
	}
	return 0, false
}

// renderPrompt fills a judge's template: {input} (the row's prompt), {output} (the reply),
// {expected} (the expected value) and {<field>} (a row field, as text).
func renderPrompt(tmpl string, ex *example, out reply, expected json.RawMessage) string {
	return placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[1 : len(m)-1]
		switch name {
		case "input":
			return ex.input
		case "output":
			if out.Content == "" && len(out.ToolCalls) > 0 {
				b, _ := json.Marshal(out.ToolCalls)
				return string(b)
			}
			return out.Content
		case "expected":
			return text(expected)
		}
		if v, ok := ex.row[name]; ok {
			return text(v)
		}
		return m
	})
}

package evaluation

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/fault"
)

func mustScorer(t *testing.T, sc Scorer) *scorer {
	t.Helper()
	if err := sc.check("scorers[0]"); err != nil {
		t.Fatalf("check %+v: %v", sc, err)
	}
	c, err := compile(sc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func call(name, args string) toolCall {
	var c toolCall
	c.Type, c.Function.Name, c.Function.Arguments = "function", name, args
	return c
}

func TestScorers(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	cases := []struct {
		name     string
		sc       Scorer
		out      reply
		expected string // JSON
		want     any
	}{
		{"exact", Scorer{Type: ExactMatch}, reply{Content: " Paris\n"}, `"Paris"`, true},
		{"exact case", Scorer{Type: ExactMatch}, reply{Content: "paris"}, `"Paris"`, false},
		{"exact ignore case", Scorer{Type: ExactMatch, IgnoreCase: true}, reply{Content: "paris"}, `"Paris"`, true},
		{"exact number", Scorer{Type: ExactMatch}, reply{Content: "4"}, `4`, true},
		{"contains expected", Scorer{Type: Contains}, reply{Content: "It is Paris."}, `"Paris"`, true},
		{"contains value", Scorer{Type: Contains, Value: "paris", IgnoreCase: true}, reply{Content: "PARIS!"}, ``, true},
		{"contains no", Scorer{Type: Contains, Value: "Rome"}, reply{Content: "Paris"}, ``, false},
		{"regex", Scorer{Type: Regex, Pattern: `^\d+$`}, reply{Content: "42"}, ``, true},
		{"regex no", Scorer{Type: Regex, Pattern: `^\d+$`}, reply{Content: "forty-two"}, ``, false},
		{"schema", Scorer{Type: JSONSchema, Schema: json.RawMessage(`{"type":"object","required":["a"],"properties":{"a":{"type":"integer"}}}`)}, reply{Content: ` {"a": 3} `}, ``, true},
		{"schema wrong type", Scorer{Type: JSONSchema, Schema: json.RawMessage(`{"type":"object","required":["a"],"properties":{"a":{"type":"integer"}}}`)}, reply{Content: `{"a": "x"}`}, ``, false},
		{"schema not json", Scorer{Type: JSONSchema, Schema: json.RawMessage(`{"type":"object"}`)}, reply{Content: `{a: 1`}, ``, false},
		{"numeric last number", Scorer{Type: Numeric}, reply{Content: "3 apples and 4 pears make 7."}, `7`, true},
		{"numeric separators", Scorer{Type: Numeric}, reply{Content: "It costs 1,250.5 dollars"}, `"1250.5"`, true},
		{"numeric tolerance", Scorer{Type: Numeric, Tolerance: f(0.1)}, reply{Content: "3.14"}, `3.2`, true},
		{"numeric outside", Scorer{Type: Numeric, Tolerance: f(0.01)}, reply{Content: "3.14"}, `3.2`, false},
		{"numeric relative", Scorer{Type: Numeric, Tolerance: f(0.05), Relative: true}, reply{Content: "98"}, `100`, true},
		{"numeric none", Scorer{Type: Numeric}, reply{Content: "no idea"}, `7`, false},
		{"tool exact", Scorer{Type: ToolCall}, reply{ToolCalls: []toolCall{call("lookup", `{"key": "a", "n": 1}`)}}, `{"name":"lookup","arguments":{"n":1,"key":"a"}}`, true},
		{"tool string args", Scorer{Type: ToolCall}, reply{ToolCalls: []toolCall{call("lookup", `{"key":"a"}`)}}, `[{"type":"function","function":{"name":"lookup","arguments":"{\"key\": \"a\"}"}}]`, true},
		{"tool wrong args", Scorer{Type: ToolCall}, reply{ToolCalls: []toolCall{call("lookup", `{"key":"b"}`)}}, `{"name":"lookup","arguments":{"key":"a"}}`, false},
		{"tool subset", Scorer{Type: ToolCall, Arguments: "subset"}, reply{ToolCalls: []toolCall{call("lookup", `{"key":"a","extra":2}`)}}, `{"name":"lookup","arguments":{"key":"a"}}`, true},
		{"tool ignore args", Scorer{Type: ToolCall, Arguments: "ignore"}, reply{ToolCalls: []toolCall{call("lookup", `{}`)}}, `{"name":"lookup","arguments":{"key":"a"}}`, true},
		{"tool wrong name", Scorer{Type: ToolCall}, reply{ToolCalls: []toolCall{call("search", `{}`)}}, `{"name":"lookup"}`, false},
		{"tool none", Scorer{Type: ToolCall}, reply{Content: "I would look it up"}, `{"name":"lookup"}`, false},
		{"tool from a message", Scorer{Type: ToolCall}, reply{ToolCalls: []toolCall{call("lookup", `{"key":"a"}`)}}, `{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"lookup","arguments":"{\"key\":\"a\"}"}}]}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := mustScorer(t, c.sc).score(c.out, json.RawMessage(c.expected))
			if err != nil || got != c.want {
				t.Fatalf("score = %v, %v; want %v", got, err, c.want)
			}
		})
	}
	if _, err := mustScorer(t, Scorer{Type: Numeric}).score(reply{Content: "1"}, json.RawMessage(`"many"`)); err == nil {
		t.Error("a non-numeric expected value scored")
	}
}

func TestJudgeScoreAndPrompt(t *testing.T) {
	sc := Scorer{Type: Judge, Model: "m", Prompt: "Q: {input}\nA: {output}\nWant: {expected} ({topic}) {unknown}", Choices: map[string]float64{"yes": 1, "no": 0, "partly": 0.5}}
	if err := sc.check("scorers[0]"); err != nil {
		t.Fatal(err)
	}
	for answer, want := range map[string]float64{"yes": 1, " partly\n": 0.5, "No": 0} {
		if v, ok := sc.judgeScore(answer); !ok || v != want {
			t.Errorf("judgeScore(%q) = %v, %v", answer, v, ok)
		}
	}
	if _, ok := sc.judgeScore("maybe"); ok {
		t.Error("an answer outside the choices scored")
	}
	if got := sc.labels(); strings.Join(got, ",") != "no,partly,yes" {
		t.Errorf("labels = %v", got)
	}
	ex, err := parseExample(0, json.RawMessage(`{"question":"2+2?","answer":4,"topic":"math"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	got := renderPrompt(sc.Prompt, ex, reply{Content: "four"}, json.RawMessage(`4`))
	if want := "Q: 2+2?\nA: four\nWant: 4 (math) {unknown}"; got != want {
		t.Errorf("prompt = %q, want %q", got, want)
	}
}

func TestExamples(t *testing.T) {
	ex, err := parseExample(3, json.RawMessage(`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"Capital of France?"},{"role":"assistant","content":"Paris."}],"tools":[{"type":"function","function":{"name":"f"}}]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.prompt) != 2 || ex.input != "Capital of France?" || ex.reference == nil || ex.tools == nil {
		t.Fatalf("messages row: %+v", ex)
	}
	if v, ok := ex.expected(&Scorer{Type: ExactMatch}); !ok || string(v) != `"Paris."` {
		t.Errorf("expected from the reference = %s %v", v, ok)
	}
	ex, err = parseExample(0, json.RawMessage(`{"q":"hi","target":"hello"}`), "q")
	if err != nil || ex.input != "hi" {
		t.Fatalf("input_field: %+v %v", ex, err)
	}
	if v, ok := ex.expected(&Scorer{Type: ExactMatch}); !ok || string(v) != `"hello"` {
		t.Errorf("expected from target = %s", v)
	}
	for raw, want := range map[string]string{
		`[1]`:                    "not a JSON object",
		`{"answer":"x"}`:         "neither messages nor a prompt field",
		`{"messages":[]}`:        "non-empty list",
		`{"messages":[{"x":1}]}`: "has no role",
		`{"messages":[{"role":"assistant","content":"x"}]}`: "nothing to ask",
		`{"prompt":"  "}`: "is empty",
	} {
		if _, err := parseExample(0, json.RawMessage(raw), ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
	ex, _ = parseExample(7, json.RawMessage(`{"question":"q"}`), "")
	if err := ex.check([]Scorer{{Type: ExactMatch, Name: "exact_match"}}, ""); err == nil || !strings.Contains(err.Error(), "row 7 has no expected value for scorer exact_match (scorers[0])") {
		t.Errorf("a row without an answer: %v", err)
	}
	ex, _ = parseExample(1, json.RawMessage(`{"question":"q","answer":"many"}`), "")
	if err := ex.check([]Scorer{{Type: Numeric, Name: "n"}}, ""); err == nil || !strings.Contains(err.Error(), "not a number") {
		t.Errorf("a non-numeric answer: %v", err)
	}
	if err := ex.check([]Scorer{{Type: Judge, Name: "j", Prompt: "{nope}"}}, ""); err == nil || !strings.Contains(err.Error(), `no field "nope"`) {
		t.Errorf("a judge placeholder the row lacks: %v", err)
	}
}

func TestSpecCheck(t *testing.T) {
	ok := func() Spec {
		return Spec{Name: "qa", Dataset: "weave:///e/p/object/d:latest", Scorers: []Scorer{{Type: ExactMatch}}}
	}
	sp := ok()
	if err := sp.Check(""); err != nil {
		t.Fatal(err)
	}
	if sp.Scorers[0].Name != ExactMatch {
		t.Errorf("default name %q", sp.Scorers[0].Name)
	}
	if got := sp.Metrics(); strings.Join(got, ",") != "exact_match,model_latency" || !sp.Produces("exact_match") || sp.Produces("accuracy") {
		t.Errorf("metrics %v", got)
	}
	neg := -1
	cases := map[string]func(*Spec){
		"name":               func(s *Spec) { s.Name = "a/b" },
		"limit":              func(s *Spec) { s.Limit = -1 },
		"scorers":            func(s *Spec) { s.Scorers = nil },
		"scorers[0].type":    func(s *Spec) { s.Scorers[0].Type = "bleu" },
		"scorers[1].name":    func(s *Spec) { s.Scorers = append(s.Scorers, Scorer{Type: ExactMatch}) },
		"scorers[0].pattern": func(s *Spec) { s.Scorers[0] = Scorer{Type: Regex, Pattern: "("} },
		"scorers[0].schema":  func(s *Spec) { s.Scorers[0] = Scorer{Type: JSONSchema, Schema: json.RawMessage(`{"type":12}`)} },
		"scorers[0].value":   func(s *Spec) { s.Scorers[0].Value = "x" },
		"scorers[0].choices": func(s *Spec) {
			s.Scorers[0] = Scorer{Type: Judge, Model: "m", Prompt: "p", Choices: map[string]float64{"yes": 1}}
		},
		"scorers[0].model":          func(s *Spec) { s.Scorers[0] = Scorer{Type: Judge, Prompt: "p"} },
		"scorers[0].arguments":      func(s *Spec) { s.Scorers[0] = Scorer{Type: ToolCall, Arguments: "fuzzy"} },
		"generation.max_tokens":     func(s *Spec) { s.Generation.MaxTokens = &neg },
		"scorers[0].name_reserved":  func(s *Spec) { s.Scorers[0].Name = "model_latency" },
		"generation.concurrency":    func(s *Spec) { s.Generation.Concurrency = 1000 },
		"scorers[0].pattern_needed": func(s *Spec) { s.Scorers[0] = Scorer{Type: Regex} },
	}
	for field, mutate := range cases {
		sp := ok()
		mutate(&sp)
		err := sp.Check("")
		f, isFault := fault.As(err)
		want := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(field, "_reserved"), "_needed"), "")
		if !isFault || f.Field != want {
			t.Errorf("%s: %v (field %v)", field, err, f)
		}
	}
	// A remote $ref in a scorer's schema is refused, not fetched.
	sp = ok()
	sp.Scorers[0] = Scorer{Type: JSONSchema, Schema: json.RawMessage(`{"$ref":"http://example.com/s.json"}`)}
	if err := sp.Check(""); err == nil {
		t.Error("a schema referring to another document was accepted")
	}
}

func TestSummaryAndMetrics(t *testing.T) {
	scorers := []Scorer{{Name: "exact"}, {Name: "judge"}, {Name: "never"}}
	rows := []rowResult{
		{Scores: map[string]any{"exact": true, "judge": 1.0, "never": nil}, Latency: 1},
		{Scores: map[string]any{"exact": false, "judge": 0.5}, Latency: 3},
	}
	s := summarize(scorers, rows)
	b, _ := json.Marshal(s)
	want := `{"exact":{"true_count":1,"true_fraction":0.5},"judge":{"mean":0.75},"model_latency":{"mean":2},"never":{"mean":null}}`
	if string(b) != want {
		t.Errorf("summary %s\nwant    %s", b, want)
	}
	m := Metrics(b)
	if len(m) != 3 || m["exact"] != 0.5 || m["judge"] != 0.75 || m["model_latency"] != 2 {
		t.Errorf("metrics %v", m)
	}
	// The Weave Python SDK's summary of a scorer returning {"correct": bool}.
	sdk := Metrics(json.RawMessage(`{"output":{"mean":4.0},"exact":{"correct":{"true_count":1,"true_fraction":0.5}},"close":{"mean":0.95},"model_latency":{"mean":0.02}}`))
	if len(sdk) != 4 || sdk["exact.correct"] != 0.5 || sdk["close"] != 0.95 || sdk["output"] != 4 {
		t.Errorf("SDK summary metrics %v", sdk)
	}
	if CheckpointMetric("qa", "exact") != "eval/qa/exact" {
		t.Error(CheckpointMetric("qa", "exact"))
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The agent and LLM frameworks of docs/frameworks.md, each driven unchanged from its own venv
// (conformance/<dir>/.venv, made by scripts/test-setup.sh from its requirements.txt) against a
// started server, on two models: the demo model, whose (Qwen-style) template has tool syntax
// (hermes), and the real SmolLM2-135M-Instruct GGUF, whose ChatML template has none (Hone's
// generic format). Every case of a scenario must pass, and the requests the framework sent (seen
// by a recording proxy in front of the server) must carry what the case is about, so that a
// framework that changes what it sends is noticed rather than passing by doing less.

// frameworkCase is what one case's requests must include: at least one request to path
// (default /v1/chat/completions) whose body has each field (a dotted path into the JSON) equal
// to its value.
type frameworkCase struct {
	path string
	has  map[string]any
}

type framework struct {
	name, dir, script, imports string
	cases                      map[string]frameworkCase
}

func named(name string) map[string]any {
	return map[string]any{"type": "function", "function": map[string]any{"name": name}}
}

var (
	langchainFramework = framework{name: "langchain-openai", dir: "langchain-py", script: "scenario.py", imports: "import langchain_openai, jsonschema",
		cases: map[string]frameworkCase{
			"invoke":                             {has: map[string]any{"max_completion_tokens": 16.0}},
			"stream":                             {has: map[string]any{"stream": true, "stream_options.include_usage": true}},
			"tools_auto":                         {has: map[string]any{"tool_choice": "auto"}},
			"tools_required":                     {has: map[string]any{"tool_choice": "required"}},
			"tools_named":                        {has: map[string]any{"tool_choice": named("get_time")}},
			"tools_stream":                       {has: map[string]any{"tool_choice": "required", "stream": true}},
			"tools_cut":                          {has: map[string]any{"tool_choice": "required", "max_completion_tokens": 8.0}},
			"tool_result":                        {has: map[string]any{"messages.2.role": "tool", "messages.1.tool_calls.0.function.name": "get_weather"}},
			"structured_json_schema":             {has: map[string]any{"response_format.type": "json_schema", "response_format.json_schema.strict": true}},
			"structured_function_calling":        {has: map[string]any{"tool_choice": named("Weather"), "parallel_tool_calls": false}},
			"structured_function_calling_strict": {has: map[string]any{"tool_choice": named("Weather"), "tools.0.function.strict": true}},
			"structured_json_mode":               {has: map[string]any{"response_format.type": "json_object"}},
			"structured_stream":                  {has: map[string]any{"tool_choice": named("Weather"), "stream": true}},
			"responses_api":                      {path: "/v1/responses", has: map[string]any{"tool_choice": map[string]any{"type": "function", "name": "get_time"}}},
		}}
	pydanticAIFramework = framework{name: "pydantic-ai", dir: "pydanticai-py", script: "scenario.py", imports: "import pydantic_ai, jsonschema",
		cases: map[string]frameworkCase{
			"run_text":                   {has: map[string]any{"max_completion_tokens": 16.0}},
			"run_stream_text":            {has: map[string]any{"stream": true, "stream_options.include_usage": true}},
			"tools_auto_agent":           {has: map[string]any{"tool_choice": "auto"}},
			"tools_required":             {has: map[string]any{"tool_choice": "required"}},
			"tools_named":                {has: map[string]any{"tool_choice": named("get_time")}},
			"tools_stream":               {has: map[string]any{"tool_choice": "required", "stream": true}},
			"output_tool":                {has: map[string]any{"tool_choice": "required", "tools.0.function.name": "final_result"}},
			"output_tool_named":          {has: map[string]any{"tool_choice": named("final_result")}},
			"output_tool_with_tools":     {has: map[string]any{"tool_choice": "required", "tools.2.function.name": "final_result"}},
			"output_native":              {has: map[string]any{"response_format.type": "json_schema", "response_format.json_schema.strict": true}},
			"output_native_with_tools":   {has: map[string]any{"tool_choice": "auto", "response_format.type": "json_schema", "tools.0.function.name": "get_weather"}},
			"output_prompted":            {has: map[string]any{"response_format.type": "json_object"}},
			"stream_output_tool":         {has: map[string]any{"tool_choice": "required", "stream": true}},
			"stream_output_native":       {has: map[string]any{"response_format.type": "json_schema", "stream": true}},
			"openai_compatible_provider": {has: map[string]any{"tool_choice": "required", "max_completion_tokens": 64.0}},
			"responses_model":            {path: "/v1/responses", has: map[string]any{"text.format.type": "json_schema", "stream": true}},
		}}
	liteLLMFramework = framework{name: "litellm", dir: "litellm-py", script: "scenario.py", imports: "import litellm, jsonschema",
		cases: map[string]frameworkCase{
			"completion":                      {has: map[string]any{"max_tokens": 16.0}},
			"stream":                          {has: map[string]any{"stream": true, "stream_options.include_usage": true}},
			"acompletion":                     {has: map[string]any{"max_tokens": 16.0}},
			"tools_auto":                      {has: map[string]any{"tool_choice": "auto"}},
			"tools_required":                  {has: map[string]any{"tool_choice": "required"}},
			"tools_named":                     {has: map[string]any{"tool_choice": named("get_time"), "parallel_tool_calls": false}},
			"tools_stream":                    {has: map[string]any{"tool_choice": "required", "stream": true}},
			"tools_cut":                       {has: map[string]any{"tool_choice": "required", "max_tokens": 8.0, "stream": true}},
			"tool_result":                     {has: map[string]any{"messages.2.role": "tool"}},
			"response_format_pydantic":        {has: map[string]any{"response_format.type": "json_schema", "response_format.json_schema.strict": true}},
			"response_format_json_schema":     {has: map[string]any{"response_format.type": "json_schema"}},
			"response_format_json_object":     {has: map[string]any{"response_format.type": "json_object"}},
			"openai_provider_tools":           {has: map[string]any{"tool_choice": "required"}},
			"openai_provider_response_format": {has: map[string]any{"response_format.type": "json_schema"}},
		}}
	instructorFramework = framework{name: "instructor", dir: "instructor-py", script: "scenario.py", imports: "import instructor",
		cases: map[string]frameworkCase{
			"tools":           {has: map[string]any{"tool_choice": named("Weather")}},
			"tools_strict":    {has: map[string]any{"tool_choice": named("Weather")}}, // 1.17.0 sends no "strict" (TOOLS_STRICT is an alias of TOOLS)
			"json_schema":     {has: map[string]any{"response_format.type": "json_schema"}},
			"json_object":     {has: map[string]any{"response_format.type": "json_object"}},
			"parallel_tools":  {has: map[string]any{"tool_choice": "auto"}},
			"partial_stream":  {has: map[string]any{"tool_choice": named("PartialWeather"), "stream": true}},
			"responses_tools": {path: "/v1/responses", has: map[string]any{"tool_choice": map[string]any{"type": "function", "name": "Weather"}}},
		}}
	dspyFramework = framework{name: "dspy", dir: "litellm-py", script: "dspy_scenario.py", imports: "import dspy, litellm",
		cases: map[string]frameworkCase{
			"predict_native":          {has: map[string]any{"response_format.type": "json_schema"}},
			"chain_of_thought_native": {has: map[string]any{"response_format.type": "json_schema"}},
			"predict_litellm_engine":  {has: map[string]any{"response_format.type": "json_schema"}},
			"tool_calls_native":       {has: map[string]any{"tools.0.function.name": "get_weather"}},
			"react_native":            {has: map[string]any{"tool_choice": named("submit")}},
			"tool_calls_json_adapter": {has: map[string]any{"tools.0.function.name": "get_weather", "response_format.type": "json_schema"}},
			"react_json_adapter":      {has: map[string]any{"tool_choice": named("submit"), "response_format.type": "json_schema"}},
		}}
)

func TestConformanceLangChain(t *testing.T)  { runFramework(t, langchainFramework) }
func TestConformancePydanticAI(t *testing.T) { runFramework(t, pydanticAIFramework) }
func TestConformanceLiteLLM(t *testing.T)    { runFramework(t, liteLLMFramework) }
func TestConformanceInstructor(t *testing.T) { runFramework(t, instructorFramework) }
func TestConformanceDSPy(t *testing.T)       { runFramework(t, dspyFramework) }

// runFramework runs fw's scenario on the demo model and on the real SmolLM2 GGUF, each on a
// server of its own behind a recording proxy.
func runFramework(t *testing.T, fw framework) {
	dir := filepath.Join(repoRoot(t), "conformance", fw.dir)
	py := venvPython(t, "", fw.dir, fw.imports)
	if py == "" {
		skipOrFail(t, "%s is not installed in %s/.venv (run scripts/test-setup.sh)", fw.name, dir)
	}
	run := func(t *testing.T, model string, args ...string) {
		data := t.TempDir()
		s := startServer(t, data, args...)
		rec := newRecorder(t, s.url)
		line := runScenario(t, 5*time.Minute, []string{"HONE_URL=" + rec.url, "HONE_MARK_URL=" + rec.url + "/_case", "HONE_KEY=" + initialKey(t, data), "HONE_MODEL=" + model},
			py, filepath.Join(dir, fw.script))
		var res struct {
			OK      bool   `json:"ok"`
			Version string `json:"version"`
			Cases   []struct {
				Name   string `json:"name"`
				OK     bool   `json:"ok"`
				Detail string `json:"detail"`
				Error  string `json:"error"`
				Where  string `json:"where"`
			} `json:"cases"`
		}
		if err := json.Unmarshal(line, &res); err != nil {
			t.Fatalf("scenario printed %s (err %v)", line, err)
		}
		passed, seen := 0, map[string]bool{}
		var details []string
		for _, c := range res.Cases {
			seen[c.Name] = true
			if !c.OK {
				t.Errorf("%s %s, case %s: %s\n%s", fw.name, res.Version, c.Name, c.Error, c.Where)
				continue
			}
			passed++
			if c.Detail != "" {
				details = append(details, c.Name+": "+c.Detail)
			}
			want, ok := fw.cases[c.Name]
			if !ok {
				t.Errorf("case %s: the test does not say what its requests carry", c.Name)
				continue
			}
			if !rec.sent(model+"/"+c.Name, want) {
				t.Errorf("case %s: no request to %s with %v; it sent:\n%s", c.Name, or(want.path, "/v1/chat/completions"), want.has, rec.dump(model+"/"+c.Name))
			}
		}
		for name := range fw.cases {
			if !seen[name] {
				t.Errorf("case %s did not run", name)
			}
		}
		t.Logf("%s %s on %s: %d of %d cases passed; %s", fw.name, res.Version, model, passed, len(res.Cases), strings.Join(details, ", "))
		t.Logf("what %s sent: %s", fw.name, rec.summary())
	}
	t.Run("demo", func(t *testing.T) { run(t, "demo") })
	t.Run("smollm2", func(t *testing.T) { run(t, "smol", "--model", "smol="+smolGGUF(t), "--no-demo-model") })
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// recorder is a reverse proxy in front of a server that keeps every request's path and body,
// labelled with the case the scenario announced last (GET /_case/<model>/<case>).
type recorder struct {
	url   string
	mu    sync.Mutex
	label string
	reqs  map[string][]recorded
}

type recorded struct {
	path string
	body map[string]any
}

func newRecorder(t *testing.T, target string) *recorder {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{reqs: map[string][]recorded{}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1 // streams pass through as they come
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name, ok := strings.CutPrefix(r.URL.Path, "/_case/"); ok {
			rec.mu.Lock()
			rec.label = name
			rec.mu.Unlock()
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		var body map[string]any
		_ = json.Unmarshal(b, &body) // a GET or a non-JSON body records as nil
		rec.mu.Lock()
		rec.reqs[rec.label] = append(rec.reqs[rec.label], recorded{path: r.URL.Path, body: body})
		rec.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec.url = srv.URL
	return rec
}

// sent reports whether some request of the case matches want.
func (rec *recorder) sent(label string, want frameworkCase) bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, r := range rec.reqs[label] {
		if r.path != or(want.path, "/v1/chat/completions") || r.body == nil {
			continue
		}
		all := true
		for field, value := range want.has {
			got, ok := jsonAt(r.body, field)
			if !ok || !reflect.DeepEqual(got, value) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// dump is the case's requests, their messages left out, for a failure message.
func (rec *recorder) dump(label string) string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var b strings.Builder
	for _, r := range rec.reqs[label] {
		short := map[string]any{}
		for k, v := range r.body {
			if k != "messages" && k != "input" {
				short[k] = v
			}
		}
		j, _ := json.Marshal(short)
		fmt.Fprintf(&b, "  %s %s\n", r.path, j)
	}
	return b.String()
}

// summary is what the framework sent over all its cases: the routes, the top-level fields, and
// the values of the fields that decide what Hone must support (tool_choice, response_format's
// type, stream_options, parallel_tool_calls, strict tools), for docs/frameworks.md.
func (rec *recorder) summary() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	paths, fields, values := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, rs := range rec.reqs {
		for _, r := range rs {
			paths[r.path] = true
			for k := range r.body {
				fields[k] = true
			}
			for _, f := range []string{"tool_choice", "response_format.type", "stream_options", "parallel_tool_calls", "tools.0.function.strict", "text.format.type"} {
				if v, ok := jsonAt(r.body, f); ok {
					j, _ := json.Marshal(v)
					values[f+"="+string(j)] = true
				}
			}
		}
	}
	keys := func(m map[string]bool) string {
		var s []string
		for k := range m {
			s = append(s, k)
		}
		sort.Strings(s)
		return strings.Join(s, " ")
	}
	return fmt.Sprintf("routes [%s]; fields [%s]; values [%s]", keys(paths), keys(fields), keys(values))
}

// jsonAt is the value at a dotted path (object keys and array indexes) in a decoded JSON value.
func jsonAt(v any, path string) (any, bool) {
	for _, part := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[part]; !ok {
				return nil, false
			}
		case []any:
			var i int
			if _, err := fmt.Sscan(part, &i); err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// TestFrameworkSnippets runs the snippets of docs/frameworks.md, each in its framework's venv
// (the line `<!-- snippet: <conformance dir> -->` before a python block names it), against a
// server serving the real SmolLM2 GGUF as `smol`, as the page tells a reader to start it. Each
// must run to the end; what it printed is logged (the page shows a run's).
func TestFrameworkSnippets(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "frameworks.md"))
	if err != nil {
		t.Fatal(err)
	}
	type snippet struct{ dir, code string }
	var snippets []snippet
	lines := strings.Split(string(page), "\n")
	for i := 0; i < len(lines); i++ {
		dir, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "<!-- snippet: ")
		if !ok {
			continue
		}
		dir = strings.TrimSuffix(dir, " -->")
		if i+1 >= len(lines) || lines[i+1] != "```python" {
			t.Fatalf("docs/frameworks.md line %d: the snippet marker is not followed by a python block", i+1)
		}
		var code []string
		for i += 2; i < len(lines) && lines[i] != "```"; i++ {
			code = append(code, lines[i])
		}
		snippets = append(snippets, snippet{dir, strings.Join(code, "\n") + "\n"})
	}
	if len(snippets) != 5 {
		t.Fatalf("docs/frameworks.md has %d snippets, want 5 (LangChain, instructor, Pydantic AI, LiteLLM, DSPy)", len(snippets))
	}
	gguf := smolGGUF(t)
	data := t.TempDir()
	s := startServer(t, data, "--model", "smol="+gguf, "--no-demo-model")
	key := initialKey(t, data)
	for i, sn := range snippets {
		t.Run(fmt.Sprintf("%d-%s", i+1, sn.dir), func(t *testing.T) {
			py := venvPython(t, "", sn.dir, "import sys")
			if py == "" {
				skipOrFail(t, "no venv in conformance/%s (run scripts/test-setup.sh)", sn.dir)
			}
			file := filepath.Join(t.TempDir(), "snippet.py")
			if err := os.WriteFile(file, []byte(sn.code), 0o644); err != nil {
				t.Fatal(err)
			}
			// runScenario fails the test when the snippet exits non-zero, with its output.
			out := runScenario(t, 3*time.Minute, []string{"HONE_URL=" + s.url, "HONE_KEY=" + key, "LITELLM_LOCAL_MODEL_COST_MAP=True"}, py, file)
			if len(bytes.TrimSpace(out)) == 0 {
				t.Fatal("the snippet printed nothing")
			}
			t.Logf("its last line: %s", out)
		})
	}
}

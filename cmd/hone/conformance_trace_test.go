package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// requireConformance reports whether conformance clients must be present (set by scripts/test.sh
// after it installed them); otherwise a missing client skips its test.
func requireConformance() bool { return os.Getenv("HONE_REQUIRE_CONFORMANCE") == "1" }

func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if requireConformance() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// repoRoot is the module root (tests run in cmd/hone).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

type sdkResult struct {
	ObjectDigests     []string                    `json:"object_digests"`
	DatasetDigest     string                      `json:"dataset_digest"`
	Rows              []map[string]any            `json:"rows"`
	ExpectedRootUsage map[string]map[string]int64 `json:"expected_root_usage"`
	// What the scenario read back through the SDK (the Python and TypeScript scenarios).
	RootCallID        string          `json:"root_call_id"`
	FeedbackIDs       []string        `json:"feedback_ids"`
	EvaluationSummary json.RawMessage `json:"evaluation_summary"`
	Read              json.RawMessage `json:"read"`
}

// runScenario runs a conformance client (name args...) in a temporary working and home
// directory with env added to this process's, fails the test with its output when it fails,
// and returns the last line it printed: its JSON result.
func runScenario(t *testing.T, timeout time.Duration, env []string, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = t.TempDir() // the clients may write logs and caches into the working directory
	cmd.Env = append(append(os.Environ(), "HOME="+cmd.Dir), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return []byte(lines[len(lines)-1])
}

// runSDK runs a Weave SDK scenario script against s and returns what it reports.
func runSDK(t *testing.T, s *server, key, project string, name string, args ...string) sdkResult {
	t.Helper()
	cache := filepath.Join(t.TempDir(), "weave-cache")
	line := runScenario(t, 3*time.Minute, []string{
		"WF_TRACE_SERVER_URL=" + s.url, "WANDB_BASE_URL=" + s.url, "WANDB_API_KEY=" + key,
		"HONE_PROJECT=" + project, "WEAVE_PRINT_CALL_LINK=false", "WANDB_SILENT=true", "WEAVE_DISABLED=false",
		"WEAVE_USE_SERVER_CACHE=false", "WEAVE_SERVER_CACHE_DIR=" + cache}, name, args...)
	var res sdkResult
	if err := json.Unmarshal(line, &res); err != nil {
		t.Fatalf("%s printed no result: %v\n%s", name, err, line)
	}
	return res
}

func post(t *testing.T, s *server, key, path string, body any, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	code, _, resp := do(t, "POST", s.url+path, basic("api", key), string(b))
	if code != 200 {
		t.Fatalf("%s: %d %s", path, code, resp)
	}
	if err := json.Unmarshal(resp, out); err != nil {
		t.Fatalf("%s: %v: %s", path, err, resp)
	}
}

// checkSDKWrites checks, through Hone's own endpoints, what a Weave SDK wrote.
func checkSDKWrites(t *testing.T, s *server, key, project string, res sdkResult) {
	// Two versions of the object; latest_only finds the second.
	var objs struct {
		Objs []struct {
			Digest       string `json:"digest"`
			VersionIndex int    `json:"version_index"`
			IsLatest     int    `json:"is_latest"`
		} `json:"objs"`
	}
	post(t, s, key, "/objs/query", map[string]any{"project_id": project, "filter": map[string]any{"object_ids": []string{"config"}}}, &objs)
	if len(objs.Objs) != 2 || objs.Objs[0].Digest != res.ObjectDigests[0] || objs.Objs[1].Digest != res.ObjectDigests[1] {
		t.Fatalf("config versions = %+v, SDK digests %v", objs.Objs, res.ObjectDigests)
	}
	post(t, s, key, "/objs/query", map[string]any{"project_id": project, "filter": map[string]any{"object_ids": []string{"config"}, "latest_only": true}}, &objs)
	if len(objs.Objs) != 1 || objs.Objs[0].Digest != res.ObjectDigests[1] || objs.Objs[0].VersionIndex != 1 || objs.Objs[0].IsLatest != 1 {
		t.Fatalf("latest_only = %+v", objs.Objs)
	}

	// The dataset's rows come back in order with their absolute indexes.
	var ds struct {
		Obj struct {
			Digest string `json:"digest"`
			Val    struct {
				Rows string `json:"rows"`
			} `json:"val"`
			BaseObjectClass string `json:"base_object_class"`
		} `json:"obj"`
	}
	post(t, s, key, "/obj/read", map[string]any{"project_id": project, "object_id": "arith", "digest": "latest"}, &ds)
	if ds.Obj.Digest != res.DatasetDigest || ds.Obj.BaseObjectClass != "Dataset" {
		t.Fatalf("dataset = %+v, SDK digest %s", ds.Obj, res.DatasetDigest)
	}
	tableDigest := ds.Obj.Val.Rows[strings.LastIndex(ds.Obj.Val.Rows, "/")+1:]
	var tq struct {
		Rows []struct {
			Digest        string         `json:"digest"`
			Val           map[string]any `json:"val"`
			OriginalIndex int            `json:"original_index"`
		} `json:"rows"`
	}
	post(t, s, key, "/table/query", map[string]any{"project_id": project, "digest": tableDigest}, &tq)
	if len(tq.Rows) != len(res.Rows) {
		t.Fatalf("table rows = %d, want %d", len(tq.Rows), len(res.Rows))
	}
	for i, r := range tq.Rows {
		if r.OriginalIndex != i || r.Val["question"] != res.Rows[i]["question"] || r.Val["answer"] != res.Rows[i]["answer"] {
			t.Fatalf("row %d = %+v, want %v", i, r, res.Rows[i])
		}
	}
	if tq.Rows[0].Digest != tq.Rows[2].Digest {
		t.Fatal("equal rows have different digests")
	}

	// The usage roll-up of the trace root (the `root` op; the Python scenario also runs an
	// evaluation, another trace) equals the sum computed by hand.
	var roots []map[string]any
	code, _, body := do(t, "POST", s.url+"/calls/stream_query", basic("api", key),
		`{"project_id":"`+project+`","filter":{"trace_roots_only":true},"query":{"$expr":{"$contains":{"input":{"$getField":"op_name"},"substr":{"$literal":"/op/root:"}}}}}`)
	if code != 200 {
		t.Fatalf("stream_query: %d %s", code, body)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		var c map[string]any
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("bad JSON line %q", line)
		}
		roots = append(roots, c)
	}
	if len(roots) != 1 {
		t.Fatalf("trace roots = %d", len(roots))
	}
	rootID, traceID := roots[0]["id"].(string), roots[0]["trace_id"].(string)
	var usage struct {
		CallUsage         map[string]map[string]map[string]int64 `json:"call_usage"`
		UnfinishedCallIDs []string                               `json:"unfinished_call_ids"`
	}
	post(t, s, key, "/trace/usage", map[string]any{"project_id": project, "filter": map[string]any{"trace_ids": []string{traceID}}}, &usage)
	if len(usage.CallUsage) != 5 || len(usage.UnfinishedCallIDs) != 0 {
		t.Fatalf("usage covers %d calls (want 5), unfinished %v", len(usage.CallUsage), usage.UnfinishedCallIDs)
	}
	for model, want := range res.ExpectedRootUsage {
		got := usage.CallUsage[rootID][model]
		for k, v := range want {
			if got[k] != v {
				t.Errorf("root usage %s.%s = %d, want %d (all: %v)", model, k, got[k], v, usage.CallUsage[rootID])
			}
		}
		if got["total_tokens"] != want["prompt_tokens"]+want["completion_tokens"] {
			t.Errorf("root usage %s total = %d", model, got["total_tokens"])
		}
	}
}

func TestConformanceWeaveTypeScriptSDK(t *testing.T) {
	root := repoRoot(t)
	dir := filepath.Join(root, "conformance", "weave-ts")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "weave")); err != nil {
		skipOrFail(t, "npm weave is not installed in %s (run scripts/test-setup.sh)", dir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not installed")
	}
	data := t.TempDir()
	s := startServer(t, data)
	key := initialKey(t, data)
	res := runSDK(t, s, key, "local/weave-ts", node, filepath.Join(dir, "scenario.mjs"))
	checkSDKWrites(t, s, key, "local/weave-ts", res)
	checkTypeScriptReadBack(t, s, key, "local/weave-ts", res)
}

// checkTypeScriptReadBack checks what the TypeScript SDK read back (it has getCalls, getCall,
// get and addScore; no feedback or dataset readers) and that its score was stored.
func checkTypeScriptReadBack(t *testing.T, s *server, key, project string, res sdkResult) {
	t.Helper()
	var rb struct {
		TraceCallOps []string `json:"trace_call_ops"`
		OpCalls      int      `json:"op_calls"`
		GetCall      struct {
			ID     string `json:"id"`
			Output string `json:"output"`
		} `json:"get_call"`
		Children         []json.RawMessage `json:"children"`
		Ref1             map[string]any    `json:"ref1"`
		Ref2             map[string]any    `json:"ref2"`
		EvaluationOutput json.RawMessage   `json:"evaluation_output"`
		Predictions      int               `json:"predictions"`
	}
	if err := json.Unmarshal(res.Read, &rb); err != nil {
		t.Fatalf("read-back: %v: %s", err, res.Read)
	}
	if strings.Join(rb.TraceCallOps, ",") != "llm,llm,llm,root,step" || rb.OpCalls != 3 || rb.GetCall.ID != res.RootCallID || rb.GetCall.Output != "root" {
		t.Errorf("calls read back = %+v", rb)
	}
	if len(rb.Children) != 2 || string(rb.Children[0]) != `"step1"` || !strings.Contains(string(rb.Children[1]), `"text":"ok:c"`) {
		t.Errorf("children = %s", rb.Children)
	}
	if rb.Ref1["prompt"] != "v1" || rb.Ref2["prompt"] != "v2" || rb.Ref2["temperature"] != 0.7 {
		t.Errorf("get(ref) = %v, %v", rb.Ref1, rb.Ref2)
	}
	var out, ret map[string]any
	_ = json.Unmarshal(rb.EvaluationOutput, &out)
	_ = json.Unmarshal(res.EvaluationSummary, &ret)
	o, _ := json.Marshal(out)
	r, _ := json.Marshal(ret)
	if string(o) != string(r) || !strings.Contains(string(o), `"exact":{"correct":{"true_count":2`) {
		t.Errorf("evaluation call output %s, evaluate returned %s", o, r)
	}
	if rb.Predictions != 3 {
		t.Errorf("%d predictions read back", rb.Predictions)
	}
	var fq struct {
		Result []struct {
			ID           string `json:"id"`
			FeedbackType string `json:"feedback_type"`
		} `json:"result"`
	}
	post(t, s, key, "/feedback/query", map[string]any{"project_id": project}, &fq)
	if len(fq.Result) != 1 || len(res.FeedbackIDs) != 1 || fq.Result[0].ID != res.FeedbackIDs[0] || fq.Result[0].FeedbackType != "wandb.runnable.exact" {
		t.Errorf("score feedback = %+v, SDK ids %v", fq.Result, res.FeedbackIDs)
	}
}

// weavePython finds a Python with the weave package: HONE_WEAVE_PYTHON, or the venv
// scripts/test-setup.sh makes.
func weavePython(t *testing.T) string {
	return venvPython(t, "HONE_WEAVE_PYTHON", "weave-py", "import weave")
}

// venvPython returns the first of $envVar and conformance/<venv>/.venv/bin/python that
// runs code (an import), or "" when neither does.
func venvPython(t *testing.T, envVar, venv, code string) string {
	t.Helper()
	candidates := []string{os.Getenv(envVar), filepath.Join(repoRoot(t), "conformance", venv, ".venv", "bin", "python")}
	for _, py := range candidates {
		if py == "" {
			continue
		}
		if err := exec.Command(py, "-c", code).Run(); err == nil {
			return py
		}
	}
	return ""
}

func TestConformanceWeavePythonSDK(t *testing.T) {
	py := weavePython(t)
	if py == "" {
		skipOrFail(t, "no Python with the weave package (set HONE_WEAVE_PYTHON or run scripts/test-setup.sh)")
	}
	data := t.TempDir()
	s := startServer(t, data)
	key := initialKey(t, data)
	res := runSDK(t, s, key, "local/weave-py", py, filepath.Join(repoRoot(t), "conformance", "weave-py", "scenario.py"))
	checkSDKWrites(t, s, key, "local/weave-py", res)
	checkPythonReadBack(t, s, key, "local/weave-py", res)
}

// pyReadBack is what the Python scenario read back through the SDK.
type pyReadBack struct {
	OpCalls      []string `json:"op_calls"`
	TraceCallOps []string `json:"trace_call_ops"`
	GetCall      struct {
		ID       string  `json:"id"`
		Output   string  `json:"output"`
		TraceID  string  `json:"trace_id"`
		ParentID *string `json:"parent_id"`
	} `json:"get_call"`
	Children     []string         `json:"children"`
	Ref1         map[string]any   `json:"ref1"`
	Ref2         map[string]any   `json:"ref2"`
	ConfigLatest map[string]any   `json:"config_latest"`
	DatasetRows  []map[string]any `json:"dataset_rows"`
	Feedback     []struct {
		ID      string         `json:"id"`
		Type    string         `json:"type"`
		Payload map[string]any `json:"payload"`
	} `json:"feedback"`
	SummaryFeedbackTypes []string        `json:"summary_feedback_types"`
	WBUsername           *string         `json:"wb_username"`
	EvaluationOutput     json.RawMessage `json:"evaluation_output"`
	Predictions          [][2]any        `json:"predictions"`
	Scores               []string        `json:"scores"`
	ScoredByExact        int             `json:"scored_by_exact"`
	SavedView            struct {
		ObjectID string   `json:"object_id"`
		Label    string   `json:"label"`
		OpNames  []string `json:"op_names"`
	} `json:"saved_view"`
}

// checkPythonReadBack checks the answers the Python SDK got when it read back what it wrote,
// and, through Hone's own endpoints, that feedback and scores were stored (not dropped).
func checkPythonReadBack(t *testing.T, s *server, key, project string, res sdkResult) {
	t.Helper()
	var rb pyReadBack
	if err := json.Unmarshal(res.Read, &rb); err != nil {
		t.Fatalf("read-back: %v: %s", err, res.Read)
	}
	eq := func(what string, got, want any) {
		t.Helper()
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Errorf("%s = %s, want %s", what, g, w)
		}
	}
	// get_calls with an op filter and a trace filter; get_call; children.
	eq("get_calls(op_names=[llm]) count", len(rb.OpCalls), 3)
	eq("get_calls(trace_ids=[root's]) ops", rb.TraceCallOps, []string{"llm", "llm", "llm", "root", "step"})
	eq("get_call id", rb.GetCall.ID, res.RootCallID)
	eq("get_call output", rb.GetCall.Output, "root")
	eq("get_call parent", rb.GetCall.ParentID, (*string)(nil))
	eq("children outputs", rb.Children, []string{"step", "ok:c"})
	// refs' .get() and a dataset's rows.
	eq("ref1.get()", rb.Ref1, map[string]any{"temperature": 0.5, "prompt": "v1"})
	eq("ref2.get()", rb.Ref2, map[string]any{"temperature": 0.7, "prompt": "v2"})
	eq("ref('config').get()", rb.ConfigLatest, rb.Ref2)
	eq("dataset rows", rb.DatasetRows, res.Rows)
	// Feedback: what the SDK reads back, with the ids it returned when adding it.
	if len(rb.Feedback) != 3 {
		t.Fatalf("feedback read back = %+v", rb.Feedback)
	}
	eq("feedback types", []string{rb.Feedback[0].Type, rb.Feedback[1].Type, rb.Feedback[2].Type}, []string{"quality", "wandb.note.1", "wandb.reaction.1"})
	eq("feedback payloads", []map[string]any{rb.Feedback[0].Payload, rb.Feedback[1].Payload, rb.Feedback[2].Payload},
		[]map[string]any{{"score": 3}, {"note": "looks right"}, {"emoji": "👍"}})
	ids := map[string]bool{}
	for _, f := range rb.Feedback {
		ids[f.ID] = true
	}
	for _, id := range res.FeedbackIDs {
		if !ids[id] {
			t.Errorf("feedback id %s the SDK returned is not what it reads back (%v)", id, ids)
		}
	}
	eq("summary.weave.feedback types", rb.SummaryFeedbackTypes, []string{"quality", "wandb.note.1", "wandb.reaction.1"})
	eq("wb_username", rb.WBUsername, ptrTo("local"))
	// The Evaluation: its call's output is the summary evaluate returned; predictions and the
	// scorer's results read back (the model gets "2+3" wrong).
	var summary struct {
		Exact struct {
			Correct struct {
				TrueCount    int     `json:"true_count"`
				TrueFraction float64 `json:"true_fraction"`
			} `json:"correct"`
		} `json:"exact"`
	}
	if err := json.Unmarshal(res.EvaluationSummary, &summary); err != nil || summary.Exact.Correct.TrueCount != 2 {
		t.Errorf("evaluation summary = %s", res.EvaluationSummary)
	}
	var out, ret map[string]any
	_ = json.Unmarshal(rb.EvaluationOutput, &out)
	_ = json.Unmarshal(res.EvaluationSummary, &ret)
	eq("Evaluation.evaluate call output", out, ret)
	eq("predictions", rb.Predictions, [][2]any{{"1+1", 2}, {"1+1", 2}, {"2+3", 6}})
	eq("scores", rb.Scores, []string{`{"correct": false}`, `{"correct": true}`, `{"correct": true}`})
	eq("get_calls(scored_by=[exact]) count", rb.ScoredByExact, 3)

	// Through Hone: every feedback item is stored with the SDK's id, scores included.
	var fq struct {
		Result []struct {
			ID           string         `json:"id"`
			FeedbackType string         `json:"feedback_type"`
			WeaveRef     string         `json:"weave_ref"`
			RunnableRef  *string        `json:"runnable_ref"`
			Payload      map[string]any `json:"payload"`
		} `json:"result"`
		TotalCount int `json:"total_count"`
	}
	post(t, s, key, "/feedback/query", map[string]any{"project_id": project}, &fq)
	if fq.TotalCount != 6 || len(fq.Result) != 6 {
		t.Fatalf("Hone holds %d feedback items, want 6 (3 on the root call, 3 scores)", fq.TotalCount)
	}
	runnable := 0
	for _, f := range fq.Result {
		if f.FeedbackType == "wandb.runnable.exact" {
			runnable++
			if f.RunnableRef == nil || !strings.Contains(*f.RunnableRef, "/op/exact:") || !strings.Contains(f.WeaveRef, "/call/") {
				t.Errorf("score feedback = %+v", f)
			}
		} else if !ids[f.ID] || f.WeaveRef != "weave:///"+project+"/call/"+res.RootCallID {
			t.Errorf("feedback %+v is not the SDK's", f)
		}
	}
	if runnable != 3 {
		t.Errorf("%d scores stored, want 3", runnable)
	}

	// The SDK's SavedView: an object of base class SavedView, listed as Hone Studio lists the
	// project's views, and loaded back by the SDK.
	op := "weave:///" + project + "/op/llm:*"
	eq("SavedView.load(ref)", rb.SavedView.Label, "llm calls")
	eq("SavedView op_names", rb.SavedView.OpNames, []string{op})
	var views struct {
		Objs []struct {
			ObjectID        string `json:"object_id"`
			BaseObjectClass string `json:"base_object_class"`
			Val             struct {
				ViewType   string `json:"view_type"`
				Label      string `json:"label"`
				Definition struct {
					Filter struct {
						OpNames []string `json:"op_names"`
					} `json:"filter"`
					SortBy []struct {
						Field     string `json:"field"`
						Direction string `json:"direction"`
					} `json:"sort_by"`
				} `json:"definition"`
			} `json:"val"`
		} `json:"objs"`
	}
	post(t, s, key, "/objs/query", map[string]any{"project_id": project, "filter": map[string]any{"base_object_classes": []string{"SavedView"}, "latest_only": true}}, &views)
	if len(views.Objs) != 1 {
		t.Fatalf("SavedView objects: %+v", views.Objs)
	}
	v := views.Objs[0]
	if v.ObjectID != rb.SavedView.ObjectID || v.BaseObjectClass != "SavedView" || v.Val.ViewType != "traces" || v.Val.Label != "llm calls" ||
		len(v.Val.Definition.Filter.OpNames) != 1 || v.Val.Definition.Filter.OpNames[0] != op ||
		len(v.Val.Definition.SortBy) != 1 || v.Val.Definition.SortBy[0].Field != "started_at" || v.Val.Definition.SortBy[0].Direction != "desc" {
		t.Errorf("SavedView as stored: %+v (the SDK's ref names %s)", v, rb.SavedView.ObjectID)
	}
}

func ptrTo[T any](v T) *T { return &v }

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// loopKey creates a key of another entity on the server's store.
func loopKey(t *testing.T, dir, entity string, args []string) string {
	t.Helper()
	var out bytes.Buffer
	if c := runKeys(context.Background(), append([]string{"create", "--data", dir, "--entity", entity}, args...), &out, io.Discard); c != 0 {
		t.Fatal("keys create failed")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1]
}

// call sends a request and checks its status; the answer as JSON.
func callJSON(t *testing.T, method, url, bearer, body string, want int) map[string]any {
	t.Helper()
	code, _, b := do(t, method, url, bearer, body)
	if code != want {
		t.Fatalf("%s %s: %d %s (want %d)", method, url, code, b, want)
	}
	var m map[string]any
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return m
}

// wantError checks a 4xx envelope's status and param.
func wantError(t *testing.T, method, url, bearer, body string, code int, param string) string {
	t.Helper()
	c, _, b := do(t, method, url, bearer, body)
	if c != code {
		t.Fatalf("%s %s %s: %d %s (want %d naming %s)", method, url, body, c, b, code, param)
	}
	e := envelope(t, b)
	p := ""
	if e.Param != nil {
		p = *e.Param
	}
	if p != param {
		t.Fatalf("%s %s %s: param %q (want %q): %s", method, url, body, p, param, e.Message)
	}
	return e.Message
}

// uploadJSONL uploads rows and returns their hone-file:/// url.
func uploadJSONL(t *testing.T, s *server, bearer, rows string) string {
	t.Helper()
	code, _, b := do(t, "POST", s.url+"/v1/preview/files", bearer, rows)
	m := jsonOf(t, code, b, 200)
	return m["url"].(string)
}

// waitEvaluation polls an evaluation job until it ends.
func waitEvaluation(t *testing.T, s *server, bearer, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		j := callJSON(t, "GET", s.url+"/v1/preview/evaluation-jobs/"+id, bearer, "", 200)
		switch j["status"] {
		case "SUCCEEDED", "FAILED", "CANCELLED":
			return j
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("evaluation job %s did not finish", id)
	return nil
}

// jobEventsOf lists every event of a job.
func jobEventsOf(t *testing.T, s *server, bearer, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	after := ""
	for {
		m := callJSON(t, "GET", s.url+"/v1/preview/training-jobs/"+id+"/events?limit=100&after="+after, bearer, "", 200)
		for _, e := range m["data"].([]any) {
			out = append(out, e.(map[string]any))
		}
		if m["has_more"] != true {
			return out
		}
		after = m["last_id"].(string)
	}
}

// streamCalls reads a project's calls through /calls/stream_query.
func streamCalls(t *testing.T, s *server, key string, query map[string]any) []map[string]any {
	t.Helper()
	b, _ := json.Marshal(query)
	code, _, body := do(t, "POST", s.url+"/calls/stream_query", basic("api", key), string(b))
	if code != 200 {
		t.Fatalf("stream_query %d %s", code, body)
	}
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var c map[string]any
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		out = append(out, c)
	}
	return out
}

func opOf(c map[string]any) string {
	op, _ := c["op_name"].(string)
	if i := strings.LastIndex(op, "/"); i >= 0 {
		op = op[i+1:]
	}
	op, _, _ = strings.Cut(op, ":")
	return op
}

// evalRows are an evaluation's rows: text questions with answers, a chat conversation whose
// last message is the answer, and a tool call.
const evalRows = `{"question": "What is 2+2?", "answer": "4", "topic": "math"}
{"question": "What is the capital of France?", "answer": "Paris", "topic": "geography"}
{"messages": [{"role": "user", "content": "Say hi"}, {"role": "assistant", "content": "hi"}], "answer": "hi", "topic": "chat"}
{"question": "Look up a", "answer": "a", "topic": "tools", "call": {"name": "lookup", "arguments": {"key": "a"}}, "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"key": {"type": "string"}}}}}]}
`

// evalScorers are one scorer of each type (the tool_call scorer reads the field call; the
// judge is the demo model, its answer held to yes/no).
const evalScorers = `[{"type":"exact_match"},{"type":"contains","name":"has_a","value":"a","ignore_case":true},{"type":"regex","pattern":"\\d"},
 {"type":"json_schema","schema":{"type":"object"}},{"type":"numeric","name":"number","field":"answer_n"},
 {"type":"tool_call","field":"call","arguments":"subset"},{"type":"judge","model":"demo","prompt":"Topic {topic}. Q: {input} A: {output} Right?","choices":{"yes":1,"no":0}}]`

// TestEvaluationJobs evaluates the demo model with every built-in scorer through POST
// /v1/preview/evaluation-jobs on both stores: the job's events, its runs' summary, the Weave
// Evaluation it stored (objects, an Evaluation.evaluate call with a predict-and-score call
// per row whose example is the row's ref, scorer calls and feedback, the summarize call), the
// same Evaluation run again by its ref, the 4xx cases and another entity's view.
func TestEvaluationJobs(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		s := startServer(t, dir, st.args...)
		key := initialKey(t, dir)
		bearer := "Bearer " + key
		u := s.url + "/v1/preview"
		// The numeric scorer needs numbers: rows with answer_n.
		var rows strings.Builder
		for _, line := range strings.Split(strings.TrimSpace(evalRows), "\n") {
			var m map[string]any
			json.Unmarshal([]byte(line), &m)
			m["answer_n"] = 4
			if m["call"] == nil {
				m["call"] = map[string]any{"name": "lookup"}
			}
			b, _ := json.Marshal(m)
			rows.Write(b)
			rows.WriteByte('\n')
		}
		file := uploadJSONL(t, s, bearer, rows.String())
		body := `{"model":"demo","project":"evals","name":"qa","dataset":"` + file + `","generation":{"max_tokens":6,"concurrency":2},"scorers":` + evalScorers + `}`
		j := callJSON(t, "POST", u+"/evaluation-jobs", bearer, body, 200)
		if j["object"] != "evaluation_job" || j["status"] != "QUEUED" || j["model_name"] != "demo" || j["project"] != "local/evals" ||
			!strings.HasPrefix(j["evaluation_ref"].(string), "weave:///local/evals/object/qa:") {
			t.Fatalf("created %v", j)
		}
		id := j["id"].(string)
		j = waitEvaluation(t, s, bearer, id)
		if j["status"] != "SUCCEEDED" {
			t.Fatalf("evaluation job %v", j)
		}
		summary := j["summary"].(map[string]any)
		for _, k := range []string{"exact_match", "has_a", "regex", "json_schema", "number", "tool_call", "judge", "model_latency"} {
			if _, ok := summary[k]; !ok {
				t.Errorf("summary has no %s: %v", k, summary)
			}
		}
		if _, ok := summary["exact_match"].(map[string]any)["true_fraction"]; !ok {
			t.Errorf("a pass/fail scorer's summary: %v", summary["exact_match"])
		}
		if _, ok := summary["judge"].(map[string]any)["mean"]; !ok {
			t.Errorf("the judge's summary: %v", summary["judge"])
		}
		metrics := j["metrics"].(map[string]any)
		if len(metrics) != 8 {
			t.Errorf("metrics %v", metrics)
		}
		evs := jobEventsOf(t, s, bearer, id)
		var types []string
		for _, e := range evs {
			types = append(types, e["type"].(string))
		}
		if types[0] != "evaluation_started" || types[len(types)-2] != "evaluation_ended" || types[len(types)-1] != "training_ended" ||
			strings.Count(strings.Join(types, ","), "evaluation_progress") != 4 {
			t.Errorf("events %v", types)
		}
		if n := evs[0]["data"].(map[string]any)["num_rows"]; n != 4.0 {
			t.Errorf("evaluation_started %v", evs[0]["data"])
		}

		// The Weave Evaluation, as the SDK would have stored it.
		calls := streamCalls(t, s, key, map[string]any{"project_id": "local/evals"})
		byOp := map[string][]map[string]any{}
		for _, c := range calls {
			byOp[opOf(c)] = append(byOp[opOf(c)], c)
		}
		root := byOp["Evaluation.evaluate"]
		if len(root) != 1 || root[0]["display_name"] != "demo" || root[0]["parent_id"] != nil {
			t.Fatalf("Evaluation.evaluate calls %v", root)
		}
		rootID := root[0]["id"].(string)
		if in := root[0]["inputs"].(map[string]any); in["self"] != j["evaluation_ref"] || !strings.HasPrefix(in["model"].(string), "weave:///local/evals/object/demo:") {
			t.Errorf("evaluate inputs %v", in)
		}
		if out, _ := json.Marshal(root[0]["output"]); !bytes.Equal(out, mustMarshal(summary)) {
			t.Errorf("evaluate output %s, the job's summary %s", out, mustMarshal(summary))
		}
		pas := byOp["Evaluation.predict_and_score"]
		if len(pas) != 4 || len(byOp["HoneChatModel.predict"]) != 4 || len(byOp["Evaluation.summarize"]) != 1 {
			t.Fatalf("calls by op: %d predict_and_score, %d predict, %d summarize", len(pas), len(byOp["HoneChatModel.predict"]), len(byOp["Evaluation.summarize"]))
		}
		for _, op := range []string{"ExactMatchScorer.score", "ContainsScorer.score", "RegexScorer.score", "JSONSchemaScorer.score", "NumericScorer.score", "ToolCallScorer.score", "JudgeScorer.score"} {
			if len(byOp[op]) != 4 {
				t.Errorf("%d calls of %s", len(byOp[op]), op)
			}
		}
		var refs []string
		for _, c := range pas {
			if c["parent_id"] != rootID {
				t.Errorf("predict_and_score parent %v", c["parent_id"])
			}
			ex := c["inputs"].(map[string]any)["example"].(string)
			if !strings.Contains(ex, "/object/qa-data:") || !strings.Contains(ex, "/attr/rows/id/") {
				t.Errorf("example ref %s", ex)
			}
			refs = append(refs, ex)
			out := c["output"].(map[string]any)
			if _, ok := out["scores"].(map[string]any)["judge"]; !ok || out["model_latency"] == nil {
				t.Errorf("predict_and_score output %v", out)
			}
		}
		// The example refs read back as the rows.
		rb, _ := json.Marshal(map[string]any{"refs": refs})
		code, _, b := do(t, "POST", s.url+"/refs/read_batch", basic("api", key), string(rb))
		if code != 200 || strings.Count(string(b), `"question"`) != 3 || !strings.Contains(string(b), `"Say hi"`) {
			t.Errorf("rows by ref: %d %s", code, b)
		}
		fb := callJSON(t, "POST", s.url+"/feedback/query", basic("api", key), `{"project_id":"local/evals","query":{"$expr":{"$eq":[{"$getField":"feedback_type"},{"$literal":"wandb.runnable.judge"}]}}}`, 200)
		if n := len(fb["result"].([]any)); n != 4 {
			t.Errorf("%d judge feedback", n)
		}
		// The tool-call row was asked with its tools.
		for _, c := range byOp["HoneChatModel.predict"] {
			if strings.Contains(mustString(c["inputs"]), "Look up a") && c["summary"].(map[string]any)["usage"] == nil {
				t.Errorf("predict call without usage: %v", c["summary"])
			}
		}

		// Run it again by its ref: the same Evaluation, a second run.
		j2 := callJSON(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"evals","evaluation":"`+j["evaluation_ref"].(string)+`"}`, 200)
		j2 = waitEvaluation(t, s, bearer, j2["id"].(string))
		if j2["status"] != "SUCCEEDED" || j2["evaluation_ref"] != j["evaluation_ref"] {
			t.Fatalf("run by ref %v", j2)
		}
		list := callJSON(t, "GET", u+"/evaluation-jobs?model_id=demo", bearer, "", 200)
		if n := len(list["data"].([]any)); n != 2 {
			t.Errorf("%d evaluation jobs listed", n)
		}
		if n := len(streamCalls(t, s, key, map[string]any{"project_id": "local/evals", "filter": map[string]any{"trace_roots_only": true}})); n != 2 {
			t.Errorf("%d evaluation runs in the project", n)
		}

		// 4xx: each names its field and queues nothing.
		ev := func(fields string) string {
			return `{"model":"demo","project":"evals","name":"e","dataset":"` + file + `","scorers":[{"type":"exact_match"}]` + fields + `}`
		}
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"evals","name":"e","dataset":"weave:///local/evals/object/nope:latest","scorers":[{"type":"exact_match"}]}`, 404, "dataset")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"evals","name":"e","dataset":"hone-file:///file-nope","scorers":[{"type":"exact_match"}]}`, 404, "dataset")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"evals","name":"e","dataset":"`+file+`","scorers":[{"type":"bleu"}]}`, 400, "scorers[0].type")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"evals","name":"e","dataset":"`+file+`","scorers":[{"type":"regex","pattern":"("}]}`, 400, "scorers[0].pattern")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"evals","name":"e","dataset":"`+file+`","scorers":[{"type":"exact_match","colour":1}]}`, 400, "scorers[0].colour")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"evals","name":"e","dataset":"`+file+`","scorers":[{"type":"judge","model":"nope","prompt":"{output}","choices":{"a":1,"b":0}}]}`, 404, "scorers[0].model")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"evals","name":"e","dataset":"`+file+`","scorers":[{"type":"numeric","field":"topic"}]}`, 400, "dataset")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"evals","name":"e","dataset":"`+file+`","scorers":[]}`, 400, "scorers")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, ev(`,"colour":"red"`), 400, "colour")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, ev(`,"generation":{"max_tokens":0}`), 400, "generation.max_tokens")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, ev(`,"generation":{"temprature":1}`), 400, "generation.temprature")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, strings.Replace(ev(""), `"model":"demo"`, `"model":"nope"`, 1), 404, "model")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, strings.Replace(ev(""), `"project":"evals",`, ``, 1), 400, "project")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"evals","evaluation":"`+j["evaluation_ref"].(string)+`","scorers":[]}`, 400, "scorers")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"evals","evaluation":"weave:///local/evals/object/nope:latest"}`, 404, "evaluation")
		// An Evaluation the Weave SDK stored holds code the server cannot run.
		sdkEval := `{"obj":{"project_id":"local/evals","object_id":"sdk-eval","val":{"_type":"Evaluation","name":"sdk-eval","dataset":"x","scorers":["weave:///local/evals/op/f:abc"],"_class_name":"Evaluation","_bases":["Object","BaseModel"]}}}`
		callJSON(t, "POST", s.url+"/obj/create", basic("api", key), sdkEval, 200)
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"evals","evaluation":"weave:///local/evals/object/sdk-eval:latest"}`, 400, "evaluation")
		wantError(t, "GET", u+"/evaluation-jobs/nope", bearer, "", 404, "evaluation_job_id")
		wantError(t, "GET", u+"/evaluation-jobs?status=DONE", bearer, "", 400, "status")
		wantError(t, "GET", u+"/evaluation-jobs?limit=0", bearer, "", 400, "limit")
		wantError(t, "GET", u+"/evaluation-jobs?model_id=local/p/nope", bearer, "", 404, "model_id")
		// A training job's id is not an evaluation job's.
		callJSON(t, "POST", u+"/models", bearer, `{"project":"p","name":"agent","base_model":"demo"}`, 200)
		tj := callJSON(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+uploadJSONL(t, s, bearer, sftRows)+`"}`, 200)
		wantError(t, "GET", u+"/evaluation-jobs/"+tj["id"].(string), bearer, "", 404, "evaluation_job_id")
		waitJob(t, s, bearer, tj["id"].(string))

		// Another entity sees none of it and reaches none of local's data.
		other := "Bearer " + loopKey(t, dir, "other", st.args)
		wantError(t, "GET", u+"/evaluation-jobs/"+id, other, "", 404, "evaluation_job_id")
		wantError(t, "GET", u+"/evaluation-jobs/"+id+"/events", other, "", 404, "evaluation_job_id")
		wantError(t, "POST", u+"/evaluation-jobs/"+id+"/cancel", other, "", 404, "evaluation_job_id")
		if l := callJSON(t, "GET", u+"/evaluation-jobs", other, "", 200); len(l["data"].([]any)) != 0 {
			t.Errorf("another entity lists %v", l["data"])
		}
		wantError(t, "POST", u+"/evaluation-jobs", other, `{"model":"demo","project":"mine","name":"e","dataset":"weave:///local/evals/object/qa-data:latest","scorers":[{"type":"exact_match"}]}`, 403, "dataset")
		wantError(t, "POST", u+"/evaluation-jobs", other, `{"model":"demo","project":"local/evals","evaluation":"`+j["evaluation_ref"].(string)+`"}`, 403, "project")
		wantError(t, "POST", u+"/evaluation-jobs", other, `{"model":"demo","project":"mine","evaluation":"`+j["evaluation_ref"].(string)+`"}`, 403, "evaluation")
		wantError(t, "POST", u+"/evaluation-jobs", other, `{"model":"local/p/agent:latest","project":"mine","evaluation":"`+j["evaluation_ref"].(string)+`"}`, 404, "model")
		wantError(t, "GET", u+"/models/local/p/agent/evaluations", other, "", 404, "model_id")
	})
}

// sftRows are two SFT examples.
const sftRows = `{"messages":[{"role":"user","content":"What is the capital of France?"},{"role":"assistant","content":"Paris."}]}
{"messages":[{"role":"user","content":"Name the French capital."},{"role":"assistant","content":"Paris."}]}
`

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func mustString(v any) string { return string(mustMarshal(v)) }

// TestTrainingJobEvaluation: an SFT job that names an evaluation runs it on its new
// checkpoint; the scores land in the checkpoint's metrics (eval/<evaluation>/<metric>), in
// the model's evaluations and in delete_checkpoints' choice of the best; a training job's
// evaluation errors name their fields.
func TestTrainingJobEvaluation(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		s := startServer(t, dir, st.args...)
		bearer := "Bearer " + initialKey(t, dir)
		u := s.url + "/v1/preview"
		callJSON(t, "POST", u+"/models", bearer, `{"project":"p","name":"agent","base_model":"demo"}`, 200)
		data := uploadJSONL(t, s, bearer, sftRows)
		evaluation := `{"name":"paris","dataset":"` + data + `","scorers":[{"type":"contains","value":"Paris"}],"generation":{"max_tokens":4}}`
		// Step 1 trains at a learning rate that teaches nothing; step 2 learns "Paris".
		j1 := callJSON(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+data+`","config":{"learning_rate":1e-9},"evaluation":`+evaluation+`}`, 200)
		if jj := waitJob(t, s, bearer, j1["id"].(string)); jj["status"] != "SUCCEEDED" || jj["step"] != 1.0 {
			t.Fatalf("job 1 %v", jj)
		}
		types := func(id string) string {
			var ts []string
			for _, e := range jobEventsOf(t, s, bearer, id) {
				ts = append(ts, e["type"].(string))
			}
			return strings.Join(ts, ",")
		}
		if ts := types(j1["id"].(string)); !strings.Contains(ts, "gradient_step,checkpoint_saved,evaluation_started,evaluation_progress") || !strings.HasSuffix(ts, "evaluation_ended,training_ended") {
			t.Errorf("events %s", ts)
		}
		// The same Evaluation by its ref (the object the first job stored).
		ref := "weave:///local/p/object/paris:latest"
		j2 := callJSON(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+data+`","config":{"learning_rate":5e-3,"epochs":4},"evaluation":"`+ref+`"}`, 200)
		if jj := waitJob(t, s, bearer, j2["id"].(string)); jj["status"] != "SUCCEEDED" || jj["step"] != 2.0 {
			t.Fatalf("job 2 %v", jj)
		}
		cps := callJSON(t, "GET", u+"/models/local/p/agent/checkpoints?order=asc", bearer, "", 200)["data"].([]any)
		score := func(i int) float64 {
			m := cps[i].(map[string]any)["metrics"].(map[string]any)
			v, ok := m["eval/paris/contains"].(float64)
			if !ok || m["eval/paris/model_latency"] == nil || m["loss"] == nil {
				t.Fatalf("checkpoint %d metrics %v", i+1, m)
			}
			return v
		}
		s1, s2 := score(0), score(1)
		t.Logf("contains Paris: step 1 %.2f, step 2 %.2f", s1, s2)
		if s2 <= s1 {
			t.Fatalf("step 2 (%.2f) does not beat step 1 (%.2f)", s2, s1)
		}
		runs := callJSON(t, "GET", u+"/models/local/p/agent/evaluations", bearer, "", 200)["data"].([]any)
		if len(runs) != 2 || runs[0].(map[string]any)["model"] != "local/p/agent:step2" || runs[0].(map[string]any)["label"] != "checkpoint" {
			t.Errorf("model evaluations %v", runs)
		}
		wantError(t, "GET", u+"/models/local/p/agent/evaluations?limit=1000", bearer, "", 400, "limit")
		// A third step at a learning rate that breaks nothing; pruning by the evaluation keeps
		// the best (step 2) and the latest (step 3).
		j3 := callJSON(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+data+`","config":{"learning_rate":1e-9}}`, 200)
		waitJob(t, s, bearer, j3["id"].(string))
		pr := callJSON(t, "DELETE", u+"/models/local/p/agent/checkpoints", bearer, `{"best_checkpoint_metric":"eval/paris/contains"}`, 200)
		if fmt.Sprint(pr["kept_steps"]) != "[2 3]" || fmt.Sprint(pr["best_steps"]) != "[2]" {
			t.Errorf("prune %v", pr)
		}
		// Errors name the evaluation's fields; no job is queued.
		wantError(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+data+`","evaluation":{"name":"x","dataset":"`+data+`","scorers":[{"type":"rouge"}]}}`, 400, "evaluation.scorers[0].type")
		wantError(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+data+`","evaluation":{"name":"x","dataset":"weave:///local/p/table/abc","scorers":[{"type":"exact_match"}]}}`, 404, "evaluation.dataset")
		wantError(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+data+`","evaluation":"weave:///local/p/object/nope:latest"}`, 404, "evaluation")
		wantError(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+data+`","evaluation":{"model":"demo","name":"x","dataset":"`+data+`","scorers":[{"type":"exact_match"}]}}`, 400, "evaluation.model")
		wantError(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+data+`","evaluation":7}`, 400, "evaluation")
	})
}

// TestEvaluationResumes: an evaluation job whose server shuts down in the middle runs again
// on the next start and goes on from the rows its first run recorded: every row is scored
// once, and the summary covers them all.
func TestEvaluationResumes(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	key := initialKey(t, dir)
	var rows strings.Builder
	for i := range 150 {
		fmt.Fprintf(&rows, `{"question":"Count to %d","answer":"%d"}`+"\n", i, i)
	}
	file := uploadJSONL(t, s, bearer, rows.String())
	j := callJSON(t, "POST", s.url+"/v1/preview/evaluation-jobs", bearer, `{"model":"demo","project":"evals","name":"count","dataset":"`+file+`","generation":{"max_tokens":24,"concurrency":1},"scorers":[{"type":"regex","pattern":"\\d"}]}`, 200)
	id := j["id"].(string)
	deadline := time.Now().Add(time.Minute)
	for {
		evs := jobEventsOf(t, s, bearer, id)
		if n := len(evs); n > 0 && evs[n-1]["type"] == "evaluation_progress" && evs[n-1]["data"].(map[string]any)["rows_done"].(float64) >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no progress")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	s = startServer(t, dir)
	j = waitEvaluation(t, s, bearer, id)
	if j["status"] != "SUCCEEDED" {
		t.Fatalf("job %v", j)
	}
	var resumed float64
	for _, e := range jobEventsOf(t, s, bearer, id) {
		d := e["data"].(map[string]any)
		if e["type"] == "evaluation_started" && d["attempt"] == 2.0 {
			resumed = d["done_rows"].(float64)
		}
	}
	if resumed < 10 || resumed >= 150 {
		t.Fatalf("the second run went on from %v rows", resumed)
	}
	t.Logf("the second run went on from row %v of 150", resumed)
	pas := streamCalls(t, s, key, map[string]any{"project_id": "local/evals", "filter": map[string]any{"op_names": []string{"weave:///local/evals/op/Evaluation.predict_and_score:*"}}})
	if len(pas) != 150 {
		t.Fatalf("%d predict_and_score calls, want one per row", len(pas))
	}
	seen := map[string]bool{}
	for _, c := range pas {
		seen[c["inputs"].(map[string]any)["example"].(string)] = true
	}
	if len(seen) != 150 {
		t.Fatalf("%d distinct examples scored", len(seen))
	}
	if cnt := j["summary"].(map[string]any)["regex"].(map[string]any)["true_count"].(float64); cnt > 150 {
		t.Fatalf("true_count %v", cnt)
	}
}

// TestEvaluationWeavePythonReadBack: the Weave Python SDK reads an evaluation Hone ran as it
// reads its own: the Evaluation object (its dataset's rows, its scorers), the
// Evaluation.evaluate call's summary, the predict-and-score children with their examples
// (refs resolved to the rows), the scorers' feedback and scored_by.
func TestEvaluationWeavePythonReadBack(t *testing.T) {
	py := weavePython(t)
	dir := t.TempDir()
	s := startServer(t, dir)
	key := initialKey(t, dir)
	bearer := "Bearer " + key
	file := uploadJSONL(t, s, bearer, "{\"question\":\"What is 2+2?\",\"answer\":\"4\"}\n{\"question\":\"Capital of France?\",\"answer\":\"Paris\"}\n")
	j := callJSON(t, "POST", s.url+"/v1/preview/evaluation-jobs", bearer, `{"model":"demo","project":"evalpy","name":"qa","dataset":"`+file+`","generation":{"max_tokens":4},"scorers":[{"type":"exact_match"},{"type":"contains","name":"has_four","value":"4"}]}`, 200)
	j = waitEvaluation(t, s, bearer, j["id"].(string))
	script := filepath.Join(repoRoot(t), "conformance", "weave-py", "evaluation_read.py")
	out := runScenario(t, 3*time.Minute, []string{"WF_TRACE_SERVER_URL=" + s.url, "WANDB_BASE_URL=" + s.url, "WANDB_API_KEY=" + key,
		"HONE_PROJECT=local/evalpy", "WEAVE_PRINT_CALL_LINK=false", "WANDB_SILENT=true", "WEAVE_DISABLED=false",
		"WEAVE_USE_SERVER_CACHE=false", "WEAVE_SERVER_CACHE_DIR=" + filepath.Join(t.TempDir(), "weave-cache")}, py, script, j["evaluation_ref"].(string))
	var got struct {
		Name, DatasetType string
		Rows              []map[string]any
		Scorers           []string
		Evaluations       int
		Summary           map[string]any
		Children          []string
		Examples          []map[string]any
		Feedback          int
		ScoredBy          int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Name != "qa" || len(got.Rows) != 2 || got.Rows[1]["answer"] != "Paris" || fmt.Sprint(got.Scorers) != "[exact_match has_four]" {
		t.Errorf("the Evaluation object: %+v", got)
	}
	if got.Evaluations != 1 || mustString(got.Summary) != mustString(j["summary"]) {
		t.Errorf("the evaluate call's summary %v, the job's %v", got.Summary, j["summary"])
	}
	if fmt.Sprint(got.Children) != "[Evaluation.predict_and_score Evaluation.predict_and_score Evaluation.summarize]" || len(got.Examples) != 2 || got.Examples[0]["question"] == nil {
		t.Errorf("children %v, examples %v", got.Children, got.Examples)
	}
	if got.Feedback != 2 || got.ScoredBy != 2 {
		t.Errorf("feedback %d, scored_by %d", got.Feedback, got.ScoredBy)
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatal(err)
	}
}

// TestEvalCLI: `hone eval` uploads a file, queues the job, follows its progress and prints
// the summary; it runs a stored Evaluation again by its ref; usage errors exit 2.
func TestEvalCLI(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	file := filepath.Join(t.TempDir(), "qa.jsonl")
	if err := os.WriteFile(file, []byte("{\"question\":\"What is 2+2?\",\"answer\":\"4\"}\n{\"question\":\"Capital of France?\",\"answer\":\"Paris\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := runEval(context.Background(), append([]string{"--url", s.url, "--data", dir}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := run("--model", "demo", "--project", "cli", "--file", file, "--name", "qa", "--max-tokens", "4",
		"--scorer", "exact_match", "--scorer", `{"type":"contains","name":"four","value":"4"}`)
	if code != 0 || !strings.Contains(out, "evaluating demo with qa: 2 row(s)") || !strings.Contains(out, "SUCCEEDED: qa on demo") ||
		!strings.Contains(out, "exact_match") || !strings.Contains(out, "four") || !strings.Contains(out, "/local/cli/weave/calls/") {
		t.Fatalf("hone eval: exit %d\n%s\n%s", code, out, errs)
	}
	ref := strings.TrimSuffix(strings.Split(strings.SplitN(out, "(", 2)[1], ")")[0], ")")
	code, out, errs = run("--model", "demo", "--project", "cli", "--evaluation", ref)
	if code != 0 || !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("hone eval --evaluation: exit %d\n%s\n%s", code, out, errs)
	}
	for _, args := range [][]string{{"--project", "cli", "--file", file, "--scorer", "exact_match"}, {"--model", "demo", "--scorer", "exact_match"},
		{"--model", "demo", "--file", file}, {"--model", "demo", "--evaluation", ref, "--scorer", "regex"}, {"--model", "demo", "--file", file, "--scorer", "{bad"}} {
		if code, _, errs := run(args...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d %s", args, code, errs)
		}
	}
	if code, out, errs := run("--help"); code != 0 || !strings.Contains(out, "usage: hone eval") || !strings.Contains(out, "-scorer") || errs != "" {
		t.Errorf("--help: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := run("--model", "demo", "--project", "cli", "--file", file, "--scorer", "bleu"); code != 1 || !strings.Contains(errs, "scorers[0].type") {
		t.Errorf("an unknown scorer: exit %d %s", code, errs)
	}
}

// TestEvaluationOnWorker: an evaluation job runs on a separate `hone worker` (whose models
// are loaded for training only: its evaluations get engines of their own), with a
// checkpoint trained on it and a judge.
func TestEvaluationOnWorker(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--train-workers", "0")
	bearer := "Bearer " + initialKey(t, dir)
	u := s.url + "/v1/preview"
	callJSON(t, "POST", u+"/models", bearer, `{"project":"p","name":"w","base_model":"demo"}`, 200)
	data := uploadJSONL(t, s, bearer, sftRows)
	tj := callJSON(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/w","training_data_url":"`+data+`","evaluation":{"name":"paris","dataset":"`+data+`","scorers":[{"type":"contains","value":"Paris"},{"type":"judge","model":"local/p/w:latest","prompt":"{output}?","choices":{"yes":1,"no":0}}],"generation":{"max_tokens":3}}}`, 200)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- runWorker(ctx, []string{"--data", dir}, io.Discard, io.Discard, nil) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("worker did not stop")
		}
	}()
	if j := waitJob(t, s, bearer, tj["id"].(string)); j["status"] != "SUCCEEDED" {
		t.Fatalf("training job on the worker %v", j)
	}
	ej := callJSON(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"local/p/w:step1","evaluation":"weave:///local/p/object/paris:latest"}`, 200)
	if j := waitEvaluation(t, s, bearer, ej["id"].(string)); j["status"] != "SUCCEEDED" || j["model_name"] != "local/p/w:step1" {
		t.Fatalf("evaluation job on the worker %v", j)
	}
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// tracedChat records a finished chat completion in a trace project as the Weave SDK's OpenAI
// integration (or Hone's chat API with X-Hone-Trace-Project) records one, and a reaction on
// it (emoji "" for none).
func tracedChat(t *testing.T, s *server, key, project, id, question, answer, emoji string) {
	t.Helper()
	upsert(t, s, key, []map[string]any{{"project_id": project, "id": id, "trace_id": "t-" + id, "op_name": "openai.chat.completions.create",
		"started_at": time.Now().UTC().Format(time.RFC3339Nano),
		"inputs":     map[string]any{"model": "gpt-4o-mini", "messages": []any{map[string]any{"role": "user", "content": question}}},
		"output": map[string]any{"model": "gpt-4o-mini", "choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": answer}}}}}})
	if emoji != "" {
		callJSON(t, "POST", s.url+"/feedback/create", basic("api", key), fmt.Sprintf(`{"project_id":%q,"weave_ref":"weave:///%s/call/%s","feedback_type":"wandb.reaction.1","payload":{"emoji":%q}}`,
			project, project, id, emoji), 200)
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func eventTypes(t *testing.T, s *server, bearer, id string) string {
	var ts []string
	for _, e := range jobEventsOf(t, s, bearer, id) {
		ts = append(ts, e["type"].(string))
	}
	return strings.Join(ts, ",")
}

// TestTrainingPolicy: a model's training policy on both stores: off until set; paused, it
// starts nothing; resumed, N new liked calls start a run (the dataset from the calls, training
// from the alias's checkpoint, the rule's evaluation, the promotion), an ordinary job with its
// events; a run started by hand whose checkpoint does not beat the alias's leaves the alias
// where it was; a run with nothing to train on says so; the 4xx cases and another entity.
func TestTrainingPolicy(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		s := startServer(t, dir, append([]string{"--policy-check", "100ms"}, st.args...)...)
		key := initialKey(t, dir)
		bearer := "Bearer " + key
		u := s.url + "/v1/preview"
		pol := u + "/models/local/p/agent/policy"
		data := uploadJSONL(t, s, bearer, sftRows)
		callJSON(t, "POST", u+"/models", bearer, `{"project":"p","name":"agent","base_model":"demo"}`, 200)
		ej := callJSON(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"p","name":"paris","dataset":"`+data+`","scorers":[{"type":"contains","value":"Paris"}],"generation":{"max_tokens":3}}`, 200)
		waitEvaluation(t, s, bearer, ej["id"].(string))
		wantError(t, "GET", pol, bearer, "", 404, "policy")
		wantError(t, "POST", pol+"/run", bearer, "", 404, "policy")
		wantError(t, "POST", pol+"/pause", bearer, "", 404, "policy")
		wantError(t, "DELETE", pol, bearer, "", 404, "policy")
		wantError(t, "GET", pol+"/runs?limit=500", bearer, "", 400, "limit")
		wantError(t, "POST", pol+"/run", bearer, `{"why":"x"}`, 400, "why")
		callJSON(t, "PUT", u+"/models/local/p/agent/aliases/norule", bearer, `{"step":0}`, 200)

		// 4xx: each names its field.
		good := `"project":"chats","alias":"prod","every_calls":2`
		callJSON(t, "PUT", u+"/models/local/p/agent/aliases/prod", bearer, `{"step":0}`, 200)
		wantError(t, "PUT", pol, bearer, `{`+good+`}`, 400, "alias") // prod has no rule yet
		callJSON(t, "PUT", u+"/models/local/p/agent/aliases/prod/rule", bearer, `{"evaluation":"weave:///local/p/object/paris:latest","metric":"contains"}`, 200)
		for _, c := range []struct{ body, param string }{
			{`{"project":"chats","every_calls":2}`, "alias"},
			{`{"project":"chats","alias":"norule","every_calls":2}`, "alias"},
			{`{"project":"chats","alias":"prod"}`, "every_calls"},
			{`{` + good + `,"interval":"soon"}`, "interval"},
			{`{` + good + `,"interval":"10ms"}`, "interval"},
			{`{` + good + `,"kind":"dpo"}`, "kind"},
			{`{` + good + `,"colour":1}`, "colour"},
			{`{` + good + `,"feedback":{"emoji":"x"}}`, "feedback.emoji"},
			{`{` + good + `,"query":{"$expr":{"$nope":[]}}}`, "query"},
			{`{` + good + `,"config":{"learning_rate":-1}}`, "config.learning_rate"},
			{`{` + good + `,"kind":"rl","config":{"epochs":2}}`, "config"},
			{`{` + good + `,"kind":"rl","experimental_config":{"loss_fn":"x"}}`, "experimental_config.loss_fn"},
			{`{` + good + `,"every_calls":-1}`, "every_calls"},
		} {
			wantError(t, "PUT", pol, bearer, c.body, 400, c.param)
		}
		wantError(t, "PUT", pol, bearer, `{"project":"chats","alias":"nope","every_calls":2}`, 404, "alias")
		wantError(t, "PUT", pol, bearer, `{"project":"other/chats","alias":"prod","every_calls":2}`, 403, "project")

		v := callJSON(t, "PUT", pol, bearer, `{`+good+`,"config":{"learning_rate":5e-3,"epochs":4},"paused":true}`, 200)
		if v["project"] != "local/chats" || v["kind"] != "sft" || v["new_calls"] != 0.0 || v["paused"] != true || mustString(v["feedback"]) != `{"reaction":"👍"}` {
			t.Fatalf("policy %v", v)
		}
		// Liked calls (and one disliked, and one of another op) while paused: counted, no run.
		tracedChat(t, s, key, "local/chats", "c1", "What is the capital of France?", "Paris.", "👍")
		tracedChat(t, s, key, "local/chats", "c2", "Name the French capital.", "Paris.", "👍")
		tracedChat(t, s, key, "local/chats", "c3", "Name the French capital.", "Lyon.", "👎")
		if v = callJSON(t, "GET", pol, bearer, "", 200); v["new_calls"] != 2.0 {
			t.Fatalf("new calls %v", v)
		}
		time.Sleep(400 * time.Millisecond)
		if runs := callJSON(t, "GET", pol+"/runs", bearer, "", 200)["data"].([]any); len(runs) != 0 {
			t.Fatalf("a paused policy ran: %v", runs)
		}
		// Resumed, the check starts a run.
		callJSON(t, "POST", pol+"/resume", bearer, "", 200)
		var run map[string]any
		waitFor(t, "a policy run", 30*time.Second, func() bool {
			runs := callJSON(t, "GET", pol+"/runs", bearer, "", 200)["data"].([]any)
			if len(runs) == 1 {
				run = runs[0].(map[string]any)
			}
			return len(runs) == 1
		})
		jobID := run["job_id"].(string)
		if tr := run["trigger"].(map[string]any); tr["reason"] != "every_calls" || tr["new_calls"] != 2.0 {
			t.Errorf("trigger %v", tr)
		}
		if j := waitJob(t, s, bearer, jobID); j["status"] != "SUCCEEDED" || j["kind"] != "policy" || j["step"] != 1.0 {
			t.Fatalf("policy run job %v", j)
		}
		ts := eventTypes(t, s, bearer, jobID)
		for _, want := range []string{"policy_run_started,dataset_built,training_started", "gradient_step,checkpoint_saved,evaluation_started", "evaluation_ended,promotion_decided,policy_run_ended,training_ended"} {
			if !strings.Contains(ts, want) {
				t.Errorf("run events lack %s: %s", want, ts)
			}
		}
		if a := callJSON(t, "GET", u+"/models/local/p/agent/aliases/prod", bearer, "", 200); a["step"] != 1.0 {
			t.Fatalf("the run did not promote: %v", a)
		}
		run = callJSON(t, "GET", pol+"/runs", bearer, "", 200)["data"].([]any)[0].(map[string]any)
		res := run["result"].(map[string]any)
		if res["rows"] != 2.0 || res["from_step"] != 0.0 || res["step"] != 1.0 || res["decision"].(map[string]any)["promoted"] != true || run["status"] != "SUCCEEDED" {
			t.Errorf("run result %v", run)
		}
		if v = callJSON(t, "GET", pol, bearer, "", 200); v["new_calls"] != 0.0 || v["last_job_id"] != jobID {
			t.Errorf("policy after the run %v", v)
		}
		if l := callJSON(t, "GET", pol+"/runs", bearer, "", 200); l["policy"].(map[string]any)["alias"] != "prod" {
			t.Errorf("the runs' list holds the policy: %v", l["policy"])
		}
		// By hand: trains from step 1 again; the checkpoint does not beat it, the alias stays.
		callJSON(t, "POST", pol+"/pause", bearer, "", 200)
		j := callJSON(t, "POST", pol+"/run", bearer, `{"reason":"try again"}`, 200)
		if jj := waitJob(t, s, bearer, j["id"].(string)); jj["status"] != "SUCCEEDED" || jj["step"] != 2.0 {
			t.Fatalf("run by hand %v", jj)
		}
		run = callJSON(t, "GET", pol+"/runs", bearer, "", 200)["data"].([]any)[0].(map[string]any)
		if d := run["result"].(map[string]any)["decision"].(map[string]any); d["promoted"] != false || d["current_step"] != 1.0 || run["trigger"].(map[string]any)["reason"] != "manual" {
			t.Errorf("run by hand %v", run)
		}
		if a := callJSON(t, "GET", u+"/models/local/p/agent/aliases/prod", bearer, "", 200); a["step"] != 1.0 {
			t.Fatalf("a checkpoint that does not beat prod moved it: %v", a)
		}
		// A policy whose project has no liked calls: the run says so and trains nothing.
		callJSON(t, "PUT", pol, bearer, `{"project":"quiet","alias":"prod","every_calls":1}`, 200)
		j = callJSON(t, "POST", pol+"/run", bearer, "", 200)
		if jj := waitJob(t, s, bearer, j["id"].(string)); jj["status"] != "SUCCEEDED" || jj["step"] != nil {
			t.Fatalf("a run with nothing to train on %v", jj)
		}
		if ts := eventTypes(t, s, bearer, j["id"].(string)); !strings.Contains(ts, "policy_run_skipped") || strings.Contains(ts, "gradient_step") {
			t.Errorf("events of a run with nothing to train on: %s", ts)
		}

		// On a schedule: every second, when a call got feedback since the last run.
		callJSON(t, "PUT", pol, bearer, `{"project":"ichats","alias":"prod","interval":"1s","config":{"learning_rate":1e-9}}`, 200)
		tracedChat(t, s, key, "local/ichats", "i1", "What is the capital of France?", "Paris.", "👍")
		waitFor(t, "a run on the interval", 30*time.Second, func() bool {
			runs := callJSON(t, "GET", pol+"/runs", bearer, "", 200)["data"].([]any)
			return len(runs) == 4 && runs[0].(map[string]any)["trigger"].(map[string]any)["reason"] == "interval" && runs[0].(map[string]any)["status"] == "SUCCEEDED"
		})
		time.Sleep(1500 * time.Millisecond) // nothing new since: no other run
		if runs := callJSON(t, "GET", pol+"/runs", bearer, "", 200)["data"].([]any); len(runs) != 4 {
			t.Errorf("%d runs after an interval with no new feedback", len(runs))
		}
		// RL from rewards: two replies to one prompt, one liked and one not, make a group.
		callJSON(t, "PUT", pol, bearer, `{"project":"rlchats","alias":"prod","kind":"rl","every_calls":100,"experimental_config":{"allow_training_without_logprobs":true,"learning_rate":1e-3}}`, 200)
		tracedChat(t, s, key, "local/rlchats", "r1", "What is the capital of France?", "Paris.", "👍")
		tracedChat(t, s, key, "local/rlchats", "r2", "What is the capital of France?", "Lyon.", "👎")
		if v := callJSON(t, "GET", pol, bearer, "", 200); v["new_calls"] != 2.0 || v["kind"] != "rl" {
			t.Errorf("an RL policy counts the calls with a reward: %v", v)
		}
		j = callJSON(t, "POST", pol+"/run", bearer, "", 200)
		if jj := waitJob(t, s, bearer, j["id"].(string)); jj["status"] != "SUCCEEDED" {
			t.Fatalf("an RL run %v", jj)
		}
		if ts := eventTypes(t, s, bearer, j["id"].(string)); !strings.Contains(ts, "dataset_built,training_started,gradient_step,checkpoint_saved") || !strings.Contains(ts, "promotion_decided") {
			t.Errorf("an RL run's events: %s", ts)
		}
		if r := callJSON(t, "GET", pol+"/runs", bearer, "", 200)["data"].([]any)[0].(map[string]any)["result"].(map[string]any); r["rows"] != 1.0 || !strings.Contains(r["dataset_ref"].(string), "/object/agent-policy-rl:") {
			t.Errorf("an RL run's result %v", r)
		}

		// Another entity reaches none of it.
		other := "Bearer " + loopKey(t, dir, "other", st.args)
		wantError(t, "GET", pol, other, "", 404, "model_id")
		wantError(t, "PUT", pol, other, `{"project":"chats","alias":"prod","every_calls":1}`, 404, "model_id")
		wantError(t, "POST", pol+"/run", other, "", 404, "model_id")
		wantError(t, "GET", pol+"/runs", other, "", 404, "model_id")
		wantError(t, "DELETE", pol, other, "", 404, "model_id")
		wantError(t, "GET", u+"/training-jobs/"+jobID, other, "", 404, "training_job_id")

		callJSON(t, "DELETE", pol, bearer, "", 200)
		wantError(t, "GET", pol, bearer, "", 404, "policy")
		if l := callJSON(t, "GET", pol+"/runs", bearer, "", 200); len(l["data"].([]any)) != 5 || l["policy"] != nil {
			t.Errorf("the runs after the policy's deletion: %v", l)
		}
		// A deleted model takes its policy, runs and evaluation runs with it.
		callJSON(t, "PUT", pol, bearer, `{"project":"chats","alias":"prod","every_calls":1}`, 200)
		callJSON(t, "DELETE", u+"/models/local/p/agent", bearer, "", 200)
		wantError(t, "GET", pol, bearer, "", 404, "model_id")
		callJSON(t, "POST", u+"/models", bearer, `{"project":"p","name":"agent","base_model":"demo"}`, 200)
		wantError(t, "GET", pol, bearer, "", 404, "policy")
		if l := callJSON(t, "GET", pol+"/runs", bearer, "", 200); len(l["data"].([]any)) != 0 {
			t.Errorf("a new model of the same name lists %v", l["data"])
		}
	})
}

// TestPolicyCLI: `hone policy` sets, shows, pauses, resumes, runs (following the run),
// lists the runs of and deletes a policy.
func TestPolicyCLI(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--policy-check", "0")
	key := initialKey(t, dir)
	bearer := "Bearer " + key
	u := s.url + "/v1/preview"
	data := uploadJSONL(t, s, bearer, sftRows)
	callJSON(t, "POST", u+"/models", bearer, `{"project":"p","name":"agent","base_model":"demo"}`, 200)
	ej := callJSON(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"p","name":"paris","dataset":"`+data+`","scorers":[{"type":"contains","value":"Paris"}],"generation":{"max_tokens":3}}`, 200)
	waitEvaluation(t, s, bearer, ej["id"].(string))
	callJSON(t, "PUT", u+"/models/local/p/agent/aliases/prod", bearer, `{"step":0}`, 200)
	callJSON(t, "PUT", u+"/models/local/p/agent/aliases/prod/rule", bearer, `{"evaluation":"weave:///local/p/object/paris:latest","metric":"contains"}`, 200)
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := runPolicy(context.Background(), append(args[:1:1], append([]string{"--url", s.url, "--data", dir}, args[1:]...)...), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := run("set", "--model", "local/p/agent", "--alias", "prod", "--project", "chats", "--every-calls", "3", "--interval", "6h",
		"--feedback", "up", "--config", `{"learning_rate":0.005,"epochs":4}`, "--paused"); code != 0 || !strings.Contains(out, "paused policy, every 3 liked calls or every 6h") {
		t.Fatalf("set: %d %s %s", code, out, errs)
	}
	tracedChat(t, s, key, "local/chats", "c1", "What is the capital of France?", "Paris.", "👍")
	if code, out, errs := run("get", "--model", "local/p/agent"); code != 0 || !strings.Contains(out, "(1 new calls with feedback)") {
		t.Fatalf("get: %d %s %s", code, out, errs)
	}
	if code, out, _ := run("resume", "--model", "local/p/agent"); code != 0 || !strings.Contains(out, "active policy") {
		t.Fatalf("resume: %d %s", code, out)
	}
	if code, out, _ := run("pause", "--model", "local/p/agent"); code != 0 || !strings.Contains(out, "paused policy") {
		t.Fatalf("pause: %d %s", code, out)
	}
	code, out, errs := run("run", "--model", "local/p/agent", "--reason", "now")
	if code != 0 || !strings.Contains(out, "policy run") || !strings.Contains(out, "dataset weave:///local/chats/object/agent-policy:") ||
		!strings.Contains(out, "local/p/agent:prod promoted from step 0 to step 1") || !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("run: %d\n%s\n%s", code, out, errs)
	}
	if code, out, _ := run("runs", "--model", "local/p/agent"); code != 0 || !strings.Contains(out, "manual") || !strings.Contains(out, "promoted from step 0 to step 1") {
		t.Fatalf("runs: %d %s", code, out)
	}
	if code, _, errs := run("set", "--model", "local/p/agent", "--alias", "prod", "--config", "{"); code != 2 || errs == "" {
		t.Fatalf("bad --config: %d %s", code, errs)
	}
	if code, _, errs := run("set", "--model", "local/p/agent", "--alias", "nope", "--every-calls", "1"); code != 1 || !strings.Contains(errs, "404") {
		t.Fatalf("unknown alias: %d %s", code, errs)
	}
	if code, out, _ := run("delete", "--model", "local/p/agent"); code != 0 || !strings.Contains(out, "no training policy now") {
		t.Fatalf("delete: %d %s", code, out)
	}
	if code, _, _ := run("get"); code != 2 {
		t.Fatalf("get without --model: %d", code)
	}
}

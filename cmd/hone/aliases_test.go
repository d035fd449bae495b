package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

// trainSteps trains n SFT steps of model ref (created on demo if needed) at learning rate lr.
func trainSteps(t *testing.T, s *server, bearer, ref, data string, n int, lr string, extra string) {
	t.Helper()
	u := s.url + "/v1/preview"
	parts := strings.Split(ref, "/")
	callJSON(t, "POST", u+"/models", bearer, `{"project":"`+parts[1]+`","name":"`+parts[2]+`","base_model":"demo","return_existing":true}`, 200)
	for range n {
		j := callJSON(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"`+ref+`","training_data_url":"`+data+`","config":{"learning_rate":`+lr+`,"epochs":4}`+extra+`}`, 200)
		if jj := waitJob(t, s, bearer, j["id"].(string)); jj["status"] != "SUCCEEDED" {
			t.Fatalf("training job %v", jj)
		}
	}
}

// servedAs asks a model a question through chat completions, the Responses API and text
// completions and returns the model each answer names.
func servedAs(t *testing.T, s *server, bearer, model string) [3]string {
	t.Helper()
	var out [3]string
	c := callJSON(t, "POST", s.url+"/v1/chat/completions", bearer, `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, 200)
	out[0], _ = c["model"].(string)
	r := callJSON(t, "POST", s.url+"/v1/responses", bearer, `{"model":"`+model+`","input":"hi","max_output_tokens":2,"store":false}`, 200)
	out[1], _ = r["model"].(string)
	x := callJSON(t, "POST", s.url+"/v1/completions", bearer, `{"model":"`+model+`","prompt":"hi","max_tokens":2}`, 200)
	out[2], _ = x["model"].(string)
	return out
}

// TestAliases: named aliases on a model's checkpoints, on both stores: moved by the API with
// who and why recorded, resolved by chat completions, the Responses API and text
// completions (and evaluations) like :latest, rolled back, kept from deletion and pruning,
// their 4xx cases, and another entity's view.
func TestAliases(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		s := startServer(t, dir, st.args...)
		bearer := "Bearer " + initialKey(t, dir)
		u := s.url + "/v1/preview"
		data := uploadJSONL(t, s, bearer, sftRows)
		trainSteps(t, s, bearer, "local/p/agent", data, 3, "1e-4", "")
		a := u + "/models/local/p/agent/aliases"

		v := callJSON(t, "PUT", a+"/prod", bearer, `{"step":1,"reason":"the first that answers"}`, 200)
		if v["alias"] != "prod" || v["step"] != 1.0 || v["name"] != "local/p/agent:prod" || v["serves"] != "local/p/agent:step1" ||
			!strings.HasPrefix(v["updated_by"].(string), "key ") || v["reason"] != "the first that answers" {
			t.Fatalf("alias %v", v)
		}
		if got := servedAs(t, s, bearer, "local/p/agent:prod"); got != [3]string{"local/p/agent:step1", "local/p/agent:step1", "local/p/agent:step1"} {
			t.Fatalf(":prod served as %v", got)
		}
		callJSON(t, "PUT", a+"/prod", bearer, `{"step":3,"reason":"newer"}`, 200)
		if got := servedAs(t, s, bearer, "local/p/agent:prod"); got[0] != "local/p/agent:step3" {
			t.Fatalf(":prod after the move served as %v", got)
		}
		v = callJSON(t, "POST", a+"/prod/rollback", bearer, `{"reason":"step 3 answers worse"}`, 200)
		if v["step"] != 1.0 {
			t.Fatalf("rollback %v", v)
		}
		if got := servedAs(t, s, bearer, "local/p/agent:prod"); got[0] != "local/p/agent:step1" {
			t.Fatalf(":prod after the rollback served as %v", got)
		}
		// An alias of step 0 is the base model.
		callJSON(t, "PUT", a+"/base", bearer, `{"step":0}`, 200)
		if got := servedAs(t, s, bearer, "local/p/agent:base"); got[0] != "local/p/agent:step0" {
			t.Fatalf(":base served as %v", got)
		}
		// An evaluation of the alias evaluates the checkpoint it names.
		ej := callJSON(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"local/p/agent:prod","name":"e","dataset":"`+data+`","scorers":[{"type":"contains","value":"Paris"}],"generation":{"max_tokens":3}}`, 200)
		if ej["model_name"] != "local/p/agent:step1" || ej["model"] != "local/p/agent:prod" {
			t.Errorf("evaluation of the alias %v", ej)
		}
		waitEvaluation(t, s, bearer, ej["id"].(string))

		list := callJSON(t, "GET", a, bearer, "", 200)["data"].([]any)
		if len(list) != 2 || list[0].(map[string]any)["alias"] != "base" || list[1].(map[string]any)["step"] != 1.0 {
			t.Errorf("aliases %v", list)
		}
		hist := callJSON(t, "GET", a+"/prod/history", bearer, "", 200)["data"].([]any)
		var kinds []string
		for _, e := range hist {
			e := e.(map[string]any)
			kinds = append(kinds, fmt.Sprintf("%s %v->%v %s", e["kind"], e["from_step"], e["to_step"], e["reason"]))
			if !strings.HasPrefix(e["actor"].(string), "key ") {
				t.Errorf("event actor %v", e["actor"])
			}
		}
		if want := "rollback 3->1 step 3 answers worse|set 1->3 newer|set <nil>->1 the first that answers"; strings.Join(kinds, "|") != want {
			t.Errorf("history\n%s\nwant\n%s", strings.Join(kinds, "|"), want)
		}
		if evs := callJSON(t, "GET", u+"/models/local/p/agent/alias-events", bearer, "", 200)["data"].([]any); len(evs) != 4 {
			t.Errorf("%d alias events of the model", len(evs))
		}
		// An aliased checkpoint is not deleted, by hand or by pruning.
		wantError(t, "DELETE", u+"/models/local/p/agent/checkpoints", bearer, `{"steps":[1]}`, 409, "steps")
		callJSON(t, "POST", u+"/models/local/p/agent/log", bearer, `{"split":"val","trajectory_groups":[{"trajectories":[{"messages_and_choices":[{"role":"user","content":"q"}],"reward":1}]}]}`, 200)
		pr := callJSON(t, "DELETE", u+"/models/local/p/agent/checkpoints", bearer, `{"best_checkpoint_metric":"val/reward"}`, 200)
		if fmt.Sprint(pr["kept_steps"]) != "[1 3]" || fmt.Sprint(pr["deleted_steps"]) != "[2]" {
			t.Errorf("prune with an alias on step 1: %v", pr)
		}

		// The model by its id; a model of a project named aliases is still a model.
		mid := callJSON(t, "GET", u+"/models/local/p/agent", bearer, "", 200)["id"].(string)
		if v := callJSON(t, "GET", u+"/models/"+mid+"/aliases/prod", bearer, "", 200); v["step"] != 1.0 {
			t.Errorf("the alias by the model's id %v", v)
		}
		callJSON(t, "POST", u+"/models", bearer, `{"project":"aliases","name":"agent","base_model":"demo"}`, 200)
		if m := callJSON(t, "GET", u+"/models/local/aliases/agent", bearer, "", 200); m["project"] != "aliases" {
			t.Errorf("a model of project aliases %v", m)
		}
		wantError(t, "GET", a+"/prod/history?limit=0", bearer, "", 400, "limit")

		// 4xx.
		wantError(t, "PUT", a+"/prod", bearer, `{"step":9}`, 400, "step")
		wantError(t, "PUT", a+"/prod", bearer, `{"step":-1}`, 400, "step")
		wantError(t, "PUT", a+"/prod", bearer, `{}`, 400, "step")
		wantError(t, "PUT", a+"/prod", bearer, `{"step":1,"colour":1}`, 400, "colour")
		wantError(t, "PUT", a+"/Prod!", bearer, `{"step":1}`, 400, "alias")
		wantError(t, "PUT", a+"/latest", bearer, `{"step":1}`, 400, "alias")
		wantError(t, "PUT", a+"/step2", bearer, `{"step":1}`, 400, "alias")
		wantError(t, "GET", a+"/nope", bearer, "", 404, "alias")
		wantError(t, "GET", a+"/nope/history", bearer, "", 404, "alias")
		wantError(t, "POST", a+"/nope/rollback", bearer, "", 404, "alias")
		wantError(t, "POST", a+"/base/rollback", bearer, "", 409, "alias")
		wantError(t, "DELETE", a+"/nope", bearer, "", 404, "alias")
		wantError(t, "PUT", u+"/models/local/p/nope/aliases/prod", bearer, `{"step":1}`, 404, "model_id")
		wantError(t, "POST", s.url+"/v1/chat/completions", bearer, `{"model":"local/p/agent:nope","messages":[{"role":"user","content":"hi"}]}`, 404, "model")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"local/p/agent:nope","evaluation":"`+ej["evaluation_ref"].(string)+`"}`, 404, "model")

		// Another entity sees none of it and moves nothing.
		other := "Bearer " + loopKey(t, dir, "other", st.args)
		wantError(t, "GET", a, other, "", 404, "model_id")
		wantError(t, "GET", a+"/prod", other, "", 404, "model_id")
		wantError(t, "PUT", a+"/prod", other, `{"step":3}`, 404, "model_id")
		wantError(t, "POST", a+"/prod/rollback", other, "", 404, "model_id")
		wantError(t, "GET", u+"/models/local/p/agent/alias-events", other, "", 404, "model_id")
		wantError(t, "POST", s.url+"/v1/chat/completions", other, `{"model":"local/p/agent:prod","messages":[{"role":"user","content":"hi"}]}`, 404, "model")

		// Deleting the alias keeps its history; the checkpoint can then go.
		callJSON(t, "DELETE", a+"/prod", bearer, `{"reason":"retired"}`, 200)
		hist = callJSON(t, "GET", a+"/prod/history", bearer, "", 200)["data"].([]any)
		if h := hist[0].(map[string]any); h["kind"] != "deleted" || h["reason"] != "retired" || len(hist) != 4 {
			t.Errorf("history after the delete %v", hist)
		}
		callJSON(t, "DELETE", u+"/models/local/p/agent/checkpoints", bearer, `{"steps":[1]}`, 200)
	})
}

// TestPromotionRule: an alias with a promotion rule moves only when a candidate's evaluation
// beats the current checkpoint's on the rule's metric by its margin, on both stores: the
// current checkpoint is evaluated when it has no run yet; a worse (or equal) candidate leaves
// the alias where it was; every decision is recorded with both scores, on the alias and as
// the job's event; the rule's 4xx cases (a metric the evaluation does not produce among them).
func TestPromotionRule(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		s := startServer(t, dir, st.args...)
		bearer := "Bearer " + initialKey(t, dir)
		u := s.url + "/v1/preview"
		data := uploadJSONL(t, s, bearer, sftRows)
		callJSON(t, "POST", u+"/models", bearer, `{"project":"p","name":"agent","base_model":"demo"}`, 200)
		// The Evaluation, stored by a run on the served base model (not on a checkpoint).
		ej := callJSON(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"p","name":"paris","dataset":"`+data+`","scorers":[{"type":"contains","value":"Paris"}],"generation":{"max_tokens":3}}`, 200)
		waitEvaluation(t, s, bearer, ej["id"].(string))
		a := u + "/models/local/p/agent/aliases"
		callJSON(t, "PUT", a+"/prod", bearer, `{"step":0}`, 200)

		// The rule's errors.
		wantError(t, "PUT", a+"/prod/rule", bearer, `{"evaluation":"weave:///local/p/object/paris:latest","metric":"accuracy"}`, 400, "rule.metric")
		wantError(t, "PUT", a+"/prod/rule", bearer, `{"evaluation":"weave:///local/p/object/paris:latest","metric":"contains","margin":-1}`, 400, "rule.margin")
		wantError(t, "PUT", a+"/prod/rule", bearer, `{"evaluation":"weave:///local/p/object/nope:latest","metric":"contains"}`, 404, "rule.evaluation")
		wantError(t, "PUT", a+"/prod/rule", bearer, `{"evaluation":"weave:///other/p/object/paris:latest","metric":"contains"}`, 403, "rule.evaluation")
		wantError(t, "PUT", a+"/prod/rule", bearer, `{"metric":"contains"}`, 400, "rule.evaluation")
		wantError(t, "PUT", a+"/prod/rule", bearer, `{"evaluation":"weave:///local/p/object/paris:latest","metric":"contains","colour":1}`, 400, "rule.colour")
		wantError(t, "PUT", a+"/nope/rule", bearer, `{"evaluation":"weave:///local/p/object/paris:latest","metric":"contains"}`, 404, "alias")
		// A training job that promotes an alias without a rule, or one that does not exist.
		callJSON(t, "PUT", a+"/norule", bearer, `{"step":0}`, 200)
		wantError(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+data+`","promote":"norule"}`, 400, "promote")
		wantError(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+data+`","promote":"nope"}`, 404, "promote")

		v := callJSON(t, "PUT", a+"/prod/rule", bearer, `{"evaluation":"weave:///local/p/object/paris:latest","metric":"contains","margin":0.1,"reason":"ship what says Paris"}`, 200)
		rule := v["rule"].(map[string]any)
		if rule["evaluation"] != ej["evaluation_ref"] || rule["metric"] != "contains" || rule["margin"] != 0.1 {
			t.Fatalf("rule %v (the Evaluation is %v)", rule, ej["evaluation_ref"])
		}
		// A job that names another Evaluation cannot promote by this rule.
		wantError(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+data+`","promote":"prod","evaluation":{"name":"other","dataset":"`+data+`","scorers":[{"type":"contains","value":"Paris"}]}}`, 400, "promote")

		decision := func(jobID string) map[string]any {
			for _, e := range jobEventsOf(t, s, bearer, jobID) {
				if e["type"] == "promotion_decided" {
					return e["data"].(map[string]any)
				}
			}
			t.Fatalf("job %s decided nothing", jobID)
			return nil
		}
		// Step 1 learns nothing: its score does not beat the base's, the alias stays.
		j1 := callJSON(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+data+`","config":{"learning_rate":1e-9},"promote":"prod"}`, 200)
		if jj := waitJob(t, s, bearer, j1["id"].(string)); jj["status"] != "SUCCEEDED" {
			t.Fatalf("job 1 %v", jj)
		}
		d := decision(j1["id"].(string))
		if d["promoted"] != false || d["candidate_step"] != 1.0 || d["current_step"] != 0.0 || d["candidate_score"] == nil || d["current_score"] == nil {
			t.Fatalf("decision 1 %v", d)
		}
		// The base had no run with this Evaluation: the job evaluated it ("current").
		labels := map[string]bool{}
		for _, e := range jobEventsOf(t, s, bearer, j1["id"].(string)) {
			if e["type"] == "evaluation_ended" {
				labels[e["data"].(map[string]any)["label"].(string)] = true
			}
		}
		if !labels["checkpoint"] || !labels["current"] {
			t.Errorf("job 1's evaluation runs %v", labels)
		}
		if v := callJSON(t, "GET", a+"/prod", bearer, "", 200); v["step"] != 0.0 {
			t.Fatalf("a candidate that does not beat the base moved the alias: %v", v)
		}
		// Step 2 learns "Paris": it beats the base by more than the margin, the alias moves.
		j2 := callJSON(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"local/p/agent","training_data_url":"`+data+`","config":{"learning_rate":5e-3,"epochs":4},"promote":"prod"}`, 200)
		if jj := waitJob(t, s, bearer, j2["id"].(string)); jj["status"] != "SUCCEEDED" {
			t.Fatalf("job 2 %v", jj)
		}
		d = decision(j2["id"].(string))
		t.Logf("step 2: contains %v against the base's %v", d["candidate_score"], d["current_score"])
		if d["promoted"] != true || d["candidate_step"] != 2.0 || d["current_step"] != 0.0 {
			t.Fatalf("decision 2 %v", d)
		}
		if got := servedAs(t, s, bearer, "local/p/agent:prod"); got[0] != "local/p/agent:step2" {
			t.Fatalf(":prod after the promotion served as %v", got)
		}
		// An evaluation job of step 1 that promotes: step 1 is worse than step 2, kept.
		e3 := callJSON(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"local/p/agent:step1","evaluation":"weave:///local/p/object/paris:latest","promote":"prod"}`, 200)
		if j := waitEvaluation(t, s, bearer, e3["id"].(string)); j["status"] != "SUCCEEDED" || j["promote"] != "prod" {
			t.Fatalf("evaluation job %v", j)
		}
		if d = decision(e3["id"].(string)); d["promoted"] != false || d["current_step"] != 2.0 || d["current_call_id"] == "" {
			t.Fatalf("decision 3 %v", d)
		}
		if v := callJSON(t, "GET", a+"/prod", bearer, "", 200); v["step"] != 2.0 {
			t.Fatalf("after a worse candidate prod is %v", v)
		}
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"local/p/agent:step1","project":"p","name":"x","dataset":"`+data+`","scorers":[{"type":"exact_match"}],"promote":"prod"}`, 400, "promote")
		wantError(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"demo","project":"p","evaluation":"weave:///local/p/object/paris:latest","promote":"prod"}`, 400, "promote")
		// The history: every decision with both scores and who made it.
		hist := callJSON(t, "GET", a+"/prod/history", bearer, "", 200)["data"].([]any)
		var kinds []string
		for _, e := range hist {
			e := e.(map[string]any)
			kinds = append(kinds, e["kind"].(string))
			if k := e["kind"]; k == "promoted" || k == "kept" {
				dd := e["data"].(map[string]any)
				if dd["candidate_score"] == nil || dd["current_score"] == nil || !strings.HasPrefix(e["actor"].(string), "job ") {
					t.Errorf("decision event %v", e)
				}
			}
		}
		if strings.Join(kinds, ",") != "kept,promoted,kept,rule,set" {
			t.Errorf("history %v", kinds)
		}
		// Removing the rule is recorded too.
		callJSON(t, "DELETE", a+"/prod/rule", bearer, "", 200)
		if v := callJSON(t, "GET", a+"/prod", bearer, "", 200); v["rule"] != nil {
			t.Errorf("rule after the delete %v", v["rule"])
		}
		other := "Bearer " + loopKey(t, dir, "other", st.args)
		wantError(t, "PUT", a+"/prod/rule", other, `{"evaluation":"weave:///local/p/object/paris:latest","metric":"contains"}`, 404, "model_id")
	})
}

// TestAliasCLI: `hone alias` sets, lists, rolls back, shows the history of and sets the rule
// of an alias.
func TestAliasCLI(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	data := uploadJSONL(t, s, bearer, sftRows)
	trainSteps(t, s, bearer, "local/p/agent", data, 2, "1e-4", "")
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := runAlias(context.Background(), append(args[:1:1], append([]string{"--url", s.url, "--data", dir}, args[1:]...)...), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := run("set", "--model", "local/p/agent", "--alias", "prod", "--step", "1", "--reason", "first"); code != 0 || !strings.Contains(out, "local/p/agent:prod -> step 1") {
		t.Fatalf("set: %d %s %s", code, out, errs)
	}
	run("set", "--model", "local/p/agent", "--alias", "prod", "--step", "2")
	if code, out, errs := run("list", "--model", "local/p/agent"); code != 0 || !strings.Contains(out, "prod") || !strings.Contains(out, "step 2") {
		t.Fatalf("list: %d %s %s", code, out, errs)
	}
	if code, out, errs := run("rollback", "--model", "local/p/agent", "--alias", "prod"); code != 0 || !strings.Contains(out, "-> step 1") {
		t.Fatalf("rollback: %d %s %s", code, out, errs)
	}
	if code, out, errs := run("history", "--model", "local/p/agent", "--alias", "prod"); code != 0 || strings.Count(out, "\n") < 3 || !strings.Contains(out, "rollback") || !strings.Contains(out, "first") {
		t.Fatalf("history: %d %s %s", code, out, errs)
	}
	if code, _, errs := run("rule", "--model", "local/p/agent", "--alias", "prod", "--evaluation", "weave:///local/p/object/nope:latest", "--metric", "x"); code != 1 || !strings.Contains(errs, "404") {
		t.Fatalf("rule: %d %s", code, errs)
	}
	if code, _, errs := run("set", "--model", "local/p/agent", "--alias", "prod"); code != 2 || errs == "" {
		t.Fatalf("set without --step: %d %s", code, errs)
	}
	if code, _, _ := run("nope"); code != 2 {
		t.Fatalf("an unknown subcommand: %d", code)
	}
}

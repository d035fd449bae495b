package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// quentharQuestions are phrasings of a question about a made-up fact; the evaluation asks the
// first two of the training phrasings and two it never trains on.
var quentharQuestions = []string{"What is the capital of Quenthar?", "Which city is the capital of Quenthar?",
	"Name the capital of Quenthar.", "Tell me the capital city of Quenthar.", "Quenthar's capital is which city?",
	"What city serves as the capital of Quenthar?", "Do you know the capital of Quenthar?", "Where is the seat of government of Quenthar?"}

var quentharEval = []string{"What is the capital of Quenthar?", "Which city is the capital of Quenthar?",
	"What is Quenthar's capital city?", "Can you tell me which city is Quenthar's capital?"}

// TestImprovementLoopSmolLM2 closes the loop on the real SmolLM2-135M-Instruct: an app's chat
// completions are traced into a project — those the self-hosted model answered (through
// Hone's chat API on local/shop/agent:prod, the base) and those a hosted model answered (as
// the Weave SDK's OpenAI integration records them) — and users react: 👎 on the base's wrong
// answers, 👍 on the right ones. The model's training policy sees eight new liked calls and
// runs: the dataset of the liked replies, SFT from prod's checkpoint (the base), the alias's
// evaluation (contains "Zorblat", greedy, on two trained and two unseen phrasings) beats the
// base's by more than the rule's margin, prod moves, and chat on prod answers with the new
// checkpoint. Then users like wrong answers ("... is Paris."), three times as many: the next
// run's checkpoint evaluates worse, and prod stays where it was.
func TestImprovementLoopSmolLM2(t *testing.T) {
	dir := os.Getenv("HONE_SMOLLM2_DIR")
	if dir == "" {
		if requireConformance() {
			t.Fatal("HONE_SMOLLM2_DIR is not set but HONE_REQUIRE_CONFORMANCE=1: scripts/test-setup.sh did not write the SmolLM2 directory")
		}
		t.Skip("HONE_SMOLLM2_DIR is not set (scripts/test-setup.sh writes a real SmolLM2-135M-Instruct directory)")
	}
	start := time.Now()
	data := t.TempDir()
	s := startServer(t, data, "--model", "smol="+dir, "--no-demo-model", "--policy-check", "200ms")
	key := initialKey(t, data)
	bearer := "Bearer " + key
	u := s.url + "/v1/preview"
	callJSON(t, "POST", u+"/models", bearer, `{"project":"shop","name":"agent","base_model":"smol"}`, 200)

	// The evaluation, run on the base (step 0): it stores the Evaluation and the base's score.
	var rows strings.Builder
	for _, q := range quentharEval {
		b, _ := json.Marshal(map[string]string{"question": q, "answer": "Zorblat"})
		rows.Write(b)
		rows.WriteByte('\n')
	}
	ej := callJSON(t, "POST", u+"/evaluation-jobs", bearer, `{"model":"local/shop/agent:step0","name":"quenthar","dataset":"`+uploadJSONL(t, s, bearer, rows.String())+
		`","scorers":[{"type":"contains","name":"knows_capital","field":"answer","ignore_case":true}],"generation":{"max_tokens":16}}`, 200)
	ej = waitEvaluation(t, s, bearer, ej["id"].(string))
	base := ej["metrics"].(map[string]any)["knows_capital"].(float64)
	t.Logf("base: knows_capital %.2f (%s)", base, time.Since(start).Round(time.Second))
	if base > 0.25 {
		t.Fatalf("the base already knows the capital: %v", ej["metrics"])
	}
	a := u + "/models/local/shop/agent/aliases/prod"
	callJSON(t, "PUT", a, bearer, `{"step":0,"reason":"serve the base"}`, 200)
	callJSON(t, "PUT", a+"/rule", bearer, `{"evaluation":"`+ej["evaluation_ref"].(string)+`","metric":"knows_capital","margin":0.25}`, 200)
	// The policy, paused while the first calls come in; hone train sft's defaults.
	pol := u + "/models/local/shop/agent/policy"
	callJSON(t, "PUT", pol, bearer, `{"project":"shop","alias":"prod","every_calls":8,"config":{"learning_rate":1e-4,"epochs":3},"paused":true}`, 200)

	// The app's calls: the self-hosted model (Hone's traced chat API, on prod) answers wrong,
	// and users say so.
	for _, q := range quentharQuestions[:2] {
		body, _ := json.Marshal(map[string]any{"model": "local/shop/agent:prod", "temperature": 0, "max_tokens": 16,
			"messages": []map[string]string{{"role": "user", "content": q}}})
		code, b := postWithHeader(t, s.url+"/v1/chat/completions", bearer, "X-Hone-Trace-Project", "local/shop", string(body))
		c := jsonOf(t, code, b, 200)
		reply := c["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
		if strings.Contains(strings.ToLower(reply), "zorblat") {
			t.Fatalf("the base answered %q", reply)
		}
		t.Logf("the base answers %q: %q", q, reply)
	}
	var hosted []map[string]any
	calls := streamCalls(t, s, key, map[string]any{"project_id": "local/shop", "filter": map[string]any{"op_names": []string{"openai.chat.completions.create"}}})
	if len(calls) != 2 {
		t.Fatalf("%d traced calls", len(calls))
	}
	for _, c := range calls {
		reactTo(t, s, key, "local/shop", c["id"].(string), "👎")
	}
	// A hosted model's answers, traced by the Weave SDK, liked.
	for i, q := range quentharQuestions {
		hosted = append(hosted, sdkChat("local/shop", fmt.Sprintf("h%d", i), q, "The capital of Quenthar is Zorblat."))
	}
	upsert(t, s, key, hosted)
	for i := range quentharQuestions {
		reactTo(t, s, key, "local/shop", fmt.Sprintf("h%d", i), "👍")
	}
	if v := callJSON(t, "GET", pol, bearer, "", 200); v["new_calls"] != 8.0 {
		t.Fatalf("the policy counts %v new liked calls, want 8", v["new_calls"])
	}
	callJSON(t, "POST", pol+"/resume", bearer, "", 200)
	run1 := waitPolicyRun(t, s, bearer, pol, 1)
	res := run1["result"].(map[string]any)
	d := res["decision"].(map[string]any)
	t.Logf("run 1 (%s): %v rows, step %v: %v (%s)", run1["trigger"].(map[string]any)["reason"], res["rows"], res["step"], d["message"], time.Since(start).Round(time.Second))
	if res["rows"] != 8.0 || d["promoted"] != true || d["current_step"] != 0.0 {
		t.Fatalf("run 1 %v", run1)
	}
	step1 := int(res["step"].(float64))
	if v := callJSON(t, "GET", a, bearer, "", 200); v["step"] != float64(step1) {
		t.Fatalf("prod after run 1: %v", v)
	}
	// Chat on the alias answers with the new checkpoint.
	body, _ := json.Marshal(map[string]any{"model": "local/shop/agent:prod", "temperature": 0, "max_tokens": 16,
		"messages": []map[string]string{{"role": "user", "content": quentharEval[3]}}})
	c := callJSON(t, "POST", s.url+"/v1/chat/completions", bearer, string(body), 200)
	reply := c["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	t.Logf("prod (%v) answers %q: %q", c["model"], quentharEval[3], reply)
	if c["model"] != fmt.Sprintf("local/shop/agent:step%d", step1) || !strings.Contains(strings.ToLower(reply), "zorblat") {
		t.Fatalf("chat on prod: %v %q", c["model"], reply)
	}

	// Users like wrong answers, three for every right one so far: the next run is worse.
	callJSON(t, "POST", pol+"/pause", bearer, "", 200)
	var wrong []map[string]any
	for r := range 3 {
		for i, q := range quentharQuestions {
			wrong = append(wrong, sdkChat("local/shop", fmt.Sprintf("w%d-%d", r, i), q, "The capital of Quenthar is Paris."))
		}
	}
	upsert(t, s, key, wrong)
	for _, w := range wrong {
		reactTo(t, s, key, "local/shop", w["id"].(string), "👍")
	}
	callJSON(t, "POST", pol+"/resume", bearer, "", 200)
	run2 := waitPolicyRun(t, s, bearer, pol, 2)
	res = run2["result"].(map[string]any)
	d = res["decision"].(map[string]any)
	t.Logf("run 2 (%s): %v rows, step %v: %v (%s)", run2["trigger"].(map[string]any)["reason"], res["rows"], res["step"], d["message"], time.Since(start).Round(time.Second))
	if res["rows"] != 32.0 || d["promoted"] != false || d["current_step"] != float64(step1) || res["from_step"] != float64(step1) {
		t.Fatalf("run 2 %v", run2)
	}
	if d["candidate_score"] == nil || d["current_score"] == nil || d["candidate_score"].(float64) >= d["current_score"].(float64) {
		t.Fatalf("run 2's scores %v", d)
	}
	if v := callJSON(t, "GET", a, bearer, "", 200); v["step"] != float64(step1) {
		t.Fatalf("a worse checkpoint moved prod: %v", v)
	}
	c = callJSON(t, "POST", s.url+"/v1/chat/completions", bearer, string(body), 200)
	if c["model"] != fmt.Sprintf("local/shop/agent:step%d", step1) {
		t.Fatalf("prod serves %v after the worse run", c["model"])
	}
	t.Logf("the loop on SmolLM2 took %s", time.Since(start).Round(time.Second))
}

// sdkChat is a chat completion as the Weave SDK's OpenAI integration records it.
func sdkChat(project, id, question, answer string) map[string]any {
	return map[string]any{"project_id": project, "id": id, "trace_id": "t-" + id,
		"op_name":    "weave:///" + project + "/op/openai.chat.completions.create:4cFjy8Ld1aXySIsoOk6H7o4V8jo1oFhRGGq7PpD7nLw",
		"started_at": time.Now().UTC().Format(time.RFC3339Nano),
		"inputs":     map[string]any{"model": "gpt-4o-mini", "messages": []any{map[string]any{"role": "user", "content": question}}},
		"output": map[string]any{"model": "gpt-4o-mini-2024-07-18", "choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": answer, "refusal": nil}}}}}
}

// reactTo adds a reaction to a call, as the Weave SDK's call.feedback.add_reaction does.
func reactTo(t *testing.T, s *server, key, project, id, emoji string) {
	t.Helper()
	callJSON(t, "POST", s.url+"/feedback/create", basic("api", key), fmt.Sprintf(`{"project_id":%q,"weave_ref":"weave:///%s/call/%s","feedback_type":"wandb.reaction.1","payload":{"emoji":%q}}`,
		project, project, id, emoji), 200)
}

// waitPolicyRun waits for the policy's n-th run to end and returns it.
func waitPolicyRun(t *testing.T, s *server, bearer, pol string, n int) map[string]any {
	t.Helper()
	var run map[string]any
	waitFor(t, fmt.Sprintf("policy run %d", n), 10*time.Minute, func() bool {
		runs := callJSON(t, "GET", pol+"/runs", bearer, "", 200)["data"].([]any)
		if len(runs) < n {
			return false
		}
		run = runs[0].(map[string]any)
		switch run["status"] {
		case "SUCCEEDED":
			return true
		case "FAILED", "CANCELLED":
			t.Fatalf("policy run %d: %v", n, run)
		}
		return false
	})
	return run
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/honeai/hone/internal/tokenizer"
)

const sftData = `{"messages":[{"role":"user","content":"Capital of France?"},{"role":"assistant","content":"Paris."}]}
{"messages":[{"role":"user","content":"Capital of Japan?"},{"role":"assistant","content":"Tokyo."}]}
{"messages":[{"role":"user","content":"Capital of Peru?"},{"role":"assistant","content":"Lima."}]}
`

func jsonOf(t *testing.T, code int, body []byte, want int) map[string]any {
	t.Helper()
	if code != want {
		t.Fatalf("status %d (want %d): %s", code, want, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return m
}

// waitJob polls a job until it ends and returns it.
func waitJob(t *testing.T, s *server, bearer, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		code, _, body := do(t, "GET", s.url+"/v1/preview/training-jobs/"+id, bearer, "")
		j := jsonOf(t, code, body, 200)
		switch j["status"] {
		case "SUCCEEDED", "FAILED", "CANCELLED":
			return j
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("job %s did not finish", id)
	return nil
}

// TestTrainingAPIEndToEnd drives the training routes of a started server over HTTP: models,
// an uploaded SFT dataset, an SFT job and an RL job (samples taken from the server's own chat
// completions), their events and checkpoints, chatting with the trained checkpoint, and the
// error cases.
func TestTrainingAPIEndToEnd(t *testing.T) { forEachFaultStore(t, testTrainingAPIEndToEnd) }

// testTrainingAPIEndToEnd runs on SQLite and on PostgreSQL, where checkpoints and uploads are
// shared blobs.
func testTrainingAPIEndToEnd(t *testing.T, store faultStore) {
	dir := t.TempDir()
	s := startServer(t, dir, store.args...)
	bearer := "Bearer " + initialKey(t, dir)
	u := s.url + "/v1/preview"

	code, _, body := do(t, "GET", u+"/base-models", bearer, "")
	if !strings.Contains(string(body), `"demo"`) {
		t.Fatalf("base models %d %s", code, body)
	}
	code, _, body = do(t, "POST", u+"/models", bearer, `{"project":"p","name":"agent","base_model":"demo"}`)
	m := jsonOf(t, code, body, 200)
	id := m["id"].(string)
	if m["entity"] != "local" || m["base_model"] != "demo" || m["run_id"] == "" {
		t.Fatalf("model %v", m)
	}
	code, _, body = do(t, "POST", u+"/models", bearer, `{"project":"p","name":"agent","base_model":"demo"}`)
	jsonOf(t, code, body, 409)
	code, _, body = do(t, "POST", u+"/models", bearer, `{"project":"p","name":"agent","base_model":"demo","return_existing":true}`)
	if again := jsonOf(t, code, body, 200); again["id"] != id {
		t.Fatalf("return_existing gave %v", again)
	}
	code, _, body = do(t, "POST", u+"/models", bearer, `{"project":"p","name":"x","base_model":"gpt-9"}`)
	if e := jsonOf(t, code, body, 400); e["error"].(map[string]any)["param"] != "base_model" {
		t.Fatalf("%s", body)
	}
	code, _, body = do(t, "POST", u+"/models", bearer, `{"entity":"other","project":"p","name":"x","base_model":"demo"}`)
	jsonOf(t, code, body, 403)
	code, _, body = do(t, "GET", u+"/models/local/p/agent", bearer, "")
	if got := jsonOf(t, code, body, 200); got["id"] != id {
		t.Fatalf("by name %v", got)
	}

	// SFT from an uploaded file.
	code, _, body = do(t, "POST", u+"/files", bearer, sftData)
	url := jsonOf(t, code, body, 200)["url"].(string)
	code, _, body = do(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"`+id+`","training_data_url":"`+url+`","config":{"learning_rate":0.01,"epochs":3,"batch_size":"auto"}}`)
	job := jsonOf(t, code, body, 200)["id"].(string)
	j := waitJob(t, s, bearer, job)
	if j["status"] != "SUCCEEDED" || j["step"] != float64(1) || j["kind"] != "sft" || j["started_at"] == nil || j["finished_at"] == nil {
		t.Fatalf("sft job %v", j)
	}
	code, _, body = do(t, "GET", u+"/training-jobs/"+job+"/events?limit=100", bearer, "")
	evs := jsonOf(t, code, body, 200)
	data := evs["data"].([]any)
	types := []string{}
	for _, e := range data {
		types = append(types, e.(map[string]any)["type"].(string))
	}
	if types[0] != "training_started" || types[len(types)-1] != "training_ended" || len(types) != 2+3*3 { // 3 examples: batch size 1 (auto)
		t.Fatalf("events %v", types)
	}
	step1 := data[1].(map[string]any)["data"].(map[string]any)
	if step1["loss"] == nil || step1["num_trainable_tokens"] == nil || step1["learning_rate"] != 0.01 {
		t.Fatalf("gradient_step data %v", step1)
	}
	// Re-listing after the second event gives the rest.
	code, _, body = do(t, "GET", u+"/training-jobs/"+job+"/events?after="+data[1].(map[string]any)["id"].(string), bearer, "")
	if rest := jsonOf(t, code, body, 200)["data"].([]any); len(rest) != len(data)-2 {
		t.Fatalf("after: %d events", len(rest))
	}
	// Live follow of a finished job: its events, then [DONE].
	code, hdr, body := doAccept(t, u+"/training-jobs/"+job+"/events", bearer, "text/event-stream")
	if code != 200 || !strings.HasPrefix(hdr, "text/event-stream") || strings.Count(string(body), "event: gradient_step") != 9 || !strings.HasSuffix(strings.TrimSpace(string(body)), "data: [DONE]") {
		t.Fatalf("sse %d %s %s", code, hdr, body)
	}

	// Chat with the checkpoint.
	code, _, body = do(t, "POST", s.url+"/v1/chat/completions", bearer, `{"model":"local/p/agent:latest","messages":[{"role":"user","content":"Capital of France?"}],"max_tokens":4,"temperature":0}`)
	if c := jsonOf(t, code, body, 200); c["model"] != "local/p/agent:step1" {
		t.Fatalf("chat model %v", c["model"])
	}
	code, _, body = do(t, "POST", s.url+"/v1/chat/completions", bearer, `{"model":"wandb-artifact:///local/p/agent:step1","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	jsonOf(t, code, body, 200)
	code, _, body = do(t, "POST", s.url+"/v1/chat/completions", bearer, `{"model":"local/p/agent:step9","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	jsonOf(t, code, body, 404)

	// RL: sample four answers through the chat API from the checkpoint (its LoRA adapter),
	// constrained to a JSON schema as a rollout with a structured answer would be, reward
	// every other one, train one step.
	code, _, body = do(t, "POST", s.url+"/v1/chat/completions", bearer, `{"model":"local/p/agent:latest","messages":[{"role":"user","content":"Say something"}],"max_tokens":40,"n":4,"seed":1,"logprobs":true,"return_token_ids":true,
		"structured_outputs":{"json":{"type":"object","properties":{"answer":{"enum":["yes","no"]}},"required":["answer"],"additionalProperties":false},"disable_any_whitespace":true}}`)
	comp := jsonOf(t, code, body, 200)
	var trajs []string
	for i, c := range comp["choices"].([]any) {
		msg := c.(map[string]any)["message"].(map[string]any)["content"].(string)
		var ans struct{ Answer string }
		if err := json.Unmarshal([]byte(msg), &ans); err != nil || (ans.Answer != "yes" && ans.Answer != "no") || c.(map[string]any)["finish_reason"] != "stop" {
			t.Fatalf("constrained rollout %d: %q (%v)", i, msg, c.(map[string]any)["finish_reason"])
		}
		cj, _ := json.Marshal(c)
		trajs = append(trajs, fmt.Sprintf(`{"messages_and_choices":[{"role":"user","content":"Say something"},%s],"reward":%d,"metrics":{"len":%d}}`, cj, i%2, i))
	}
	groups := `[{"trajectories":[` + strings.Join(trajs, ",") + `]}]`
	code, _, body = do(t, "POST", u+"/training-jobs", bearer, `{"model_id":"`+id+`","trajectory_groups":`+groups+`,"experimental_config":{"learning_rate":0.001,"bogus":1}}`)
	if e := jsonOf(t, code, body, 400); !strings.Contains(e["error"].(map[string]any)["message"].(string), "bogus") {
		t.Fatalf("unknown field: %s", body)
	}
	code, _, body = do(t, "POST", u+"/training-jobs", bearer, `{"model_id":"`+id+`","trajectory_groups":`+groups+`,"experimental_config":{"learning_rate":0.001,"loss_fn":"ppo"}}`)
	job = jsonOf(t, code, body, 200)["id"].(string)
	if j := waitJob(t, s, bearer, job); j["status"] != "SUCCEEDED" || j["step"] != float64(2) {
		t.Fatalf("rl job %v", j)
	}
	code, _, body = do(t, "GET", u+"/training-jobs/"+job+"/events", bearer, "")
	evs = jsonOf(t, code, body, 200)
	st := evs["data"].([]any)[1].(map[string]any)["data"].(map[string]any)
	if st["reward"] != 0.5 || st["num_trajectories"] != float64(4) || st["grad_norm"] == nil {
		t.Fatalf("rl metrics %v", st)
	}
	// Log validation trajectories: metrics on the latest checkpoint, calls in the trace project.
	code, _, body = do(t, "POST", u+"/models/"+id+"/log", bearer, `{"split":"val","trajectory_groups":`+groups+`}`)
	jsonOf(t, code, body, 200)
	code, _, body = do(t, "GET", u+"/models/"+id+"/checkpoints?order=asc", bearer, "")
	cps := jsonOf(t, code, body, 200)
	list := cps["data"].([]any)
	if len(list) != 2 || cps["has_more"] != false || list[1].(map[string]any)["metrics"].(map[string]any)["val/reward"] != 0.5 {
		t.Fatalf("checkpoints %s", body)
	}
	code, _, body = do(t, "POST", s.url+"/calls/stream_query", basic("api", strings.TrimPrefix(bearer, "Bearer ")), `{"project_id":"local/p"}`)
	if code != 200 || strings.Count(string(body), `"op_name":"art.trajectory"`) != 4 {
		t.Fatalf("logged trajectories %d %s", code, body)
	}

	// Bad data fails the job with a message naming the line.
	code, _, body = do(t, "POST", u+"/files", bearer, sftData+"{oops\n")
	url = jsonOf(t, code, body, 200)["url"].(string)
	code, _, body = do(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"`+id+`","training_data_url":"`+url+`"}`)
	job = jsonOf(t, code, body, 200)["id"].(string)
	if j := waitJob(t, s, bearer, job); j["status"] != "FAILED" || !strings.Contains(j["error_message"].(string), "line 4") {
		t.Fatalf("bad data job %v", j)
	}
	code, _, body = do(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"`+id+`","training_data_url":"/etc/passwd"}`)
	jsonOf(t, code, body, 400)

	// Deleting checkpoints and the model.
	code, _, body = do(t, "DELETE", u+"/models/"+id+"/checkpoints", bearer, `{"steps":[1,7]}`)
	if d := jsonOf(t, code, body, 200); d["deleted_count"] != float64(1) || fmt.Sprint(d["not_found_steps"]) != "[7]" {
		t.Fatalf("delete checkpoints %v", d)
	}
	code, _, body = do(t, "DELETE", u+"/models/local/p/agent", bearer, "")
	if d := jsonOf(t, code, body, 200); d["model_id"] != id || d["deleted_checkpoints"] != float64(1) {
		t.Fatalf("delete model %v", d)
	}
	code, _, body = do(t, "GET", u+"/models/"+id, bearer, "")
	jsonOf(t, code, body, 404)
}

func doAccept(t *testing.T, url, authz, accept string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", authz)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// TestWorkerProcess: with --train-workers 0 the API server only queues jobs; `hone worker` on
// the same store runs them, and the server serves the checkpoint it wrote.
func TestWorkerProcess(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--train-workers", "0")
	bearer := "Bearer " + initialKey(t, dir)
	u := s.url + "/v1/preview"
	code, _, body := do(t, "POST", u+"/models", bearer, `{"project":"p","name":"w","base_model":"demo"}`)
	id := jsonOf(t, code, body, 200)["id"].(string)
	code, _, body = do(t, "POST", u+"/files", bearer, sftData)
	url := jsonOf(t, code, body, 200)["url"].(string)
	code, _, body = do(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"`+id+`","training_data_url":"`+url+`"}`)
	job := jsonOf(t, code, body, 200)["id"].(string)
	time.Sleep(700 * time.Millisecond)
	code, _, body = do(t, "GET", u+"/training-jobs/"+job, bearer, "")
	if j := jsonOf(t, code, body, 200); j["status"] != "QUEUED" {
		t.Fatalf("without workers the job is %v", j["status"])
	}
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
	if j := waitJob(t, s, bearer, job); j["status"] != "SUCCEEDED" || j["step"] != float64(1) {
		t.Fatalf("job %v", j)
	}
	code, _, body = do(t, "POST", s.url+"/v1/chat/completions", bearer, `{"model":"local/p/w:latest","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	jsonOf(t, code, body, 200)
}

// TestTrainCLI: `hone train sft` creates the model, uploads the data, submits the job and
// follows it to its checkpoint; `hone jobs watch` follows a finished job again.
func TestTrainCLI(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	file := filepath.Join(t.TempDir(), "data.jsonl")
	os.WriteFile(file, []byte(sftData), 0o644)
	var out, errb bytes.Buffer
	code := runTrain(context.Background(), []string{"sft", "--url", s.url, "--data", dir, "--model", "local/cli/m", "--file", file, "--lr", "0.01", "--epochs", "2", "--batch-size", "3"}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "training ended") || !strings.Contains(out.String(), "checkpoint step 1") || !strings.Contains(out.String(), "2/2") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	jobID := strings.Fields(out.String())[1]
	out.Reset()
	if code := runJobs(context.Background(), []string{"watch", "--url", s.url, "--data", dir, jobID}, &out, &errb); code != 0 || !strings.Contains(out.String(), "SUCCEEDED") {
		t.Fatalf("watch: exit %d %s %s", code, out.String(), errb.String())
	}
	if code := runTrain(context.Background(), []string{"sft", "--url", s.url, "--data", dir, "--model", "bad"}, &out, &errb); code == 0 {
		t.Fatal("bad model reference accepted")
	}
}

// sampleChoices asks the server's chat API for n replies to prompt and returns the choices as
// JSON, and the completion.
func sampleChoices(t *testing.T, s *server, bearer, body string) ([]json.RawMessage, map[string]any) {
	t.Helper()
	code, _, b := do(t, "POST", s.url+"/v1/chat/completions", bearer, body)
	comp := jsonOf(t, code, b, 200)
	var c struct {
		Choices []json.RawMessage `json:"choices"`
	}
	json.Unmarshal(b, &c)
	return c.Choices, comp
}

// TestRLFromPlainOpenAIClient: replies sampled at temperature 1 as the OpenAI SDK asks for
// them (logprobs, no return_token_ids) re-tokenise differently from what was sampled; the RL
// job recovers the sampled ids from the logprobs entries and trains. Binary rewards, the 0.0
// ones left out of the JSON as ART does.
func TestRLFromPlainOpenAIClient(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	u := s.url + "/v1/preview"
	code, _, body := do(t, "POST", u+"/models", bearer, `{"project":"p","name":"plain","base_model":"demo"}`)
	id := jsonOf(t, code, body, 200)["id"].(string)
	tok, err := tokenizer.Load(filepath.Join(dir, "models", "demo"))
	if err != nil {
		t.Fatal(err)
	}
	choices, _ := sampleChoices(t, s, bearer, `{"model":"local/p/plain","messages":[{"role":"user","content":"Say a word."}],"max_tokens":12,"n":6,"seed":3,"temperature":1,"logprobs":true}`)
	differ := 0
	var trajs []string
	for i, c := range choices {
		var ch struct {
			Message  struct{ Content string }
			Logprobs struct{ Content []json.RawMessage }
			TokenIDs []int `json:"token_ids"`
		}
		json.Unmarshal(c, &ch)
		if ch.TokenIDs != nil {
			t.Fatal("token_ids returned without return_token_ids")
		}
		if len(tok.Encode(ch.Message.Content, false)) != len(ch.Logprobs.Content) {
			differ++
		}
		reward := ""
		if i%2 == 1 {
			reward = `,"reward":1.0`
		}
		trajs = append(trajs, fmt.Sprintf(`{"messages_and_choices":[{"role":"user","content":"Say a word."},%s]%s}`, c, reward))
	}
	if differ == 0 {
		t.Fatal("every reply re-tokenises to its sampled length: the test shows nothing")
	}
	code, _, body = do(t, "POST", u+"/training-jobs", bearer, `{"model_id":"`+id+`","trajectory_groups":[{"trajectories":[`+strings.Join(trajs, ",")+`]}]}`)
	job := jsonOf(t, code, body, 200)["id"].(string)
	if j := waitJob(t, s, bearer, job); j["status"] != "SUCCEEDED" || j["step"] != float64(1) {
		t.Fatalf("rl job %v", j)
	}
	code, _, body = do(t, "GET", u+"/training-jobs/"+job+"/events", bearer, "")
	st := jsonOf(t, code, body, 200)["data"].([]any)[1].(map[string]any)["data"].(map[string]any)
	if st["reward"] != 0.5 || st["num_trajectories"] != float64(6) || st["num_trainable_tokens"].(float64) < 6*12/2 {
		t.Fatalf("rl metrics %v", st)
	}
	// Hone's logprob entries carry each token's raw bytes, so every sampled id is recovered.
	if _, ok := st["num_unknown_tokens"]; ok {
		t.Fatalf("tokens left unknown: %v", st)
	}
	t.Logf("%d of 6 replies re-tokenise differently; metrics %v", differ, st)
	code, _, body = do(t, "GET", u+"/models/"+id+"/checkpoints", bearer, "")
	if cps := jsonOf(t, code, body, 200)["data"].([]any); len(cps) != 1 {
		t.Fatalf("checkpoints %s", body)
	}
}

// artDefaults is the experimental_config ART's ServerlessBackend.train sends with its
// defaults (openpipe-art 0.5.23: every field, unset ones as null).
const artDefaults = `{"advantage_balance":0.0,"allow_training_without_logprobs":false,"epsilon":null,"epsilon_high":null,
"importance_sampling_level":"token","kimi_k2_tau":null,"kl_penalty_coef":0.0,"kl_penalty_reference_step":null,
"kl_penalty_source":"current_learner","kl_penalty_step_lag":null,"kl_ref_adapter_path":null,"learning_rate":5e-06,
"logprob_calculation_chunk_size":1024,"loss_fn":"cispo","mask_prob_ratio":false,
"max_negative_advantage_importance_sampling_weight":null,"normalize_advantages":true,
"num_trajectories_learning_rate_multiplier_power":0.0,"packed_sequence_length":null,"plot_tensors":false,"ppo":false,
"precalculate_logprobs":false,"scale_learning_rate_by_reward_std_dev":false,"scale_rewards":true,
"truncated_importance_sampling":null}`

// captured records a two-turn conversation as ART's capture API does (`with art.Trajectory()
// as t:`): each chat completion's request body and response as an exchange, no
// messages_and_choices. Rewards of 0.0 are left out.
func captured(t *testing.T, s *server, bearer, model string, seed int, reward float64) string {
	t.Helper()
	req1 := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Name a city."}],"max_tokens":6,"temperature":1,"logprobs":true,"seed":%d}`, model, seed)
	_, c1 := sampleChoices(t, s, bearer, req1)
	reply := c1["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	// The SDK sends the assistant message back with the fields it parsed.
	asst, _ := json.Marshal(map[string]any{"role": "assistant", "content": reply, "refusal": nil, "tool_calls": nil, "annotations": []any{}})
	req2 := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Name a city."},%s,{"role":"user","content":"Another."}],"max_tokens":6,"temperature":1,"logprobs":true,"seed":%d}`, model, asst, seed+100)
	_, c2 := sampleChoices(t, s, bearer, req2)
	r1, _ := json.Marshal(c1)
	r2, _ := json.Marshal(c2)
	out := fmt.Sprintf(`{"exchanges":{"chat_completions":[
{"request":%s,"response":%s,"start_time":"2026-03-01T10:00:00.000001","end_time":"2026-03-01T10:00:00.5","model":%q},
{"request":%s,"response":%s,"start_time":"2026-03-01T10:00:01.000001","end_time":"2026-03-01T10:00:01.5","model":%q}],
"completions":[],"responses":[],"messages":[]},"additional_histories":[],"metrics":{"correct":%v},"metadata":{},"logs":[]`,
		req1, r1, model, req2, r2, model, reward > 0)
	if reward != 0 {
		out += fmt.Sprintf(`,"reward":%v`, reward)
	}
	return out + "}"
}

// TestARTTrainPayloads sends what ART's newest client sends: backend.train's defaults (every
// ExperimentalTrainingConfig field), trajectories recorded with the capture API, binary
// rewards with 0.0 left out; then the KL options with non-default values, and the values
// Hone refuses.
func TestARTTrainPayloads(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	u := s.url + "/v1/preview"
	code, _, body := do(t, "POST", u+"/models", bearer, `{"project":"p","name":"art","base_model":"demo"}`)
	id := jsonOf(t, code, body, 200)["id"].(string)
	var trajs []string
	for i := 0; i < 4; i++ {
		trajs = append(trajs, captured(t, s, bearer, "local/p/art", i, float64(i%2)))
	}
	groups := `[{"trajectories":[` + strings.Join(trajs, ",") + `],"exceptions":[],"metadata":{},"metrics":{},"logs":[]}]`

	// model.log: the trajectories are stored with their two turns as one conversation.
	code, _, body = do(t, "POST", u+"/models/"+id+"/log", bearer, `{"model_id":"`+id+`","split":"train","trajectory_groups":`+groups+`}`)
	jsonOf(t, code, body, 200)
	code, _, body = do(t, "POST", s.url+"/calls/stream_query", basic("api", strings.TrimPrefix(bearer, "Bearer ")), `{"project_id":"local/p"}`)
	if code != 200 || strings.Count(string(body), `"op_name":"art.trajectory"`) != 4 {
		t.Fatalf("logged trajectories %d %s", code, body)
	}
	var call struct {
		Inputs struct {
			MessagesAndChoices []map[string]any `json:"messages_and_choices"`
		} `json:"inputs"`
	}
	json.Unmarshal(bytes.Split(bytes.TrimSpace(body), []byte("\n"))[0], &call)
	if mc := call.Inputs.MessagesAndChoices; len(mc) != 4 || mc[0]["role"] != "user" || mc[1]["message"] == nil || mc[2]["role"] != "user" || mc[3]["message"] == nil {
		t.Fatalf("logged conversation %v", mc)
	}

	job := func(config string) map[string]any {
		t.Helper()
		code, _, body := do(t, "POST", u+"/training-jobs", bearer, `{"model_id":"`+id+`","trajectory_groups":`+groups+`,"experimental_config":`+config+`}`)
		return waitJob(t, s, bearer, jsonOf(t, code, body, 200)["id"].(string))
	}
	if j := job(artDefaults); j["status"] != "SUCCEEDED" || j["step"] != float64(1) {
		t.Fatalf("job with ART's defaults %v", j)
	}
	// The KL penalty against the checkpoint one step back, on the sampling logprobs.
	kl := strings.Replace(artDefaults, `"kl_penalty_coef":0.0`, `"kl_penalty_coef":0.5`, 1)
	kl = strings.Replace(kl, `"kl_penalty_source":"current_learner"`, `"kl_penalty_source":"sample"`, 1)
	kl = strings.Replace(kl, `"kl_penalty_step_lag":null`, `"kl_penalty_step_lag":1`, 1)
	j := job(kl)
	if j["status"] != "SUCCEEDED" || j["step"] != float64(2) {
		t.Fatalf("KL job %v", j)
	}
	code, _, body = do(t, "GET", u+"/training-jobs/"+j["id"].(string)+"/events", bearer, "")
	st := jsonOf(t, code, body, 200)["data"].([]any)[1].(map[string]any)["data"].(map[string]any)
	if st["kl_policy_ref"] == 0.0 || st["kl_div"] == 0.0 {
		t.Fatalf("KL metrics %v", st)
	}
	// Non-default values Hone implements.
	opts := strings.NewReplacer(`"advantage_balance":0.0`, `"advantage_balance":0.5`, `"importance_sampling_level":"token"`, `"importance_sampling_level":"geometric_average"`,
		`"mask_prob_ratio":false`, `"mask_prob_ratio":true`, `"kimi_k2_tau":null`, `"kimi_k2_tau":0.1`, `"truncated_importance_sampling":null`, `"truncated_importance_sampling":2.0`,
		`"num_trajectories_learning_rate_multiplier_power":0.0`, `"num_trajectories_learning_rate_multiplier_power":0.5`,
		`"scale_learning_rate_by_reward_std_dev":false`, `"scale_learning_rate_by_reward_std_dev":true`, `"precalculate_logprobs":false`, `"precalculate_logprobs":true`).Replace(artDefaults)
	if j := job(opts); j["status"] != "SUCCEEDED" || j["step"] != float64(3) {
		t.Fatalf("job with options %v", j)
	}
	// A group whose rewards are all 0.0 trains nothing; the step advances as with ART.
	var zero []string
	for i := 0; i < 2; i++ {
		zero = append(zero, captured(t, s, bearer, "local/p/art", 50+i, 0))
	}
	code, _, body = do(t, "POST", u+"/training-jobs", bearer, `{"model_id":"`+id+`","trajectory_groups":[{"trajectories":[`+strings.Join(zero, ",")+`]}],"experimental_config":`+artDefaults+`}`)
	if j := waitJob(t, s, bearer, jsonOf(t, code, body, 200)["id"].(string)); j["status"] != "SUCCEEDED" || j["step"] != float64(4) {
		t.Fatalf("all-equal rewards %v", j)
	}

	for _, c := range []struct{ from, to, param string }{
		{`"kl_penalty_step_lag":null`, `"kl_penalty_step_lag":0`, "experimental_config.kl_penalty_step_lag"},
		{`"kl_penalty_step_lag":null`, `"kl_penalty_step_lag":1,"kl_penalty_reference_step":1`, "experimental_config.kl_penalty_step_lag"},
		{`"kl_penalty_source":"current_learner"`, `"kl_penalty_source":"reference"`, "experimental_config.kl_penalty_source"},
		{`"kl_ref_adapter_path":null`, `"kl_ref_adapter_path":"/tmp/ref"`, "experimental_config.kl_ref_adapter_path"},
		{`"plot_tensors":false`, `"plot_tensors":true`, "experimental_config.plot_tensors"},
		{`"ppo":false`, `"ppo":true`, "experimental_config.loss_fn"},
		{`"advantage_balance":0.0`, `"advantage_balance":2`, "experimental_config.advantage_balance"},
		{`"kl_penalty_reference_step":null`, `"kl_penalty_reference_step":9,"kl_penalty_coef":0.1`, "experimental_config.kl_penalty_reference_step"},
	} {
		cfg := strings.Replace(artDefaults, c.from, c.to, 1)
		if strings.Contains(c.to, "kl_penalty_coef") {
			cfg = strings.Replace(cfg, `"kl_penalty_coef":0.0,`, "", 1)
		}
		code, _, body := do(t, "POST", u+"/training-jobs", bearer, `{"model_id":"`+id+`","trajectory_groups":`+groups+`,"experimental_config":`+cfg+`}`)
		if e := envelope(t, body); code != 400 || e.Param == nil || *e.Param != c.param {
			t.Errorf("%s: %d %s", c.to, code, body)
		}
	}
	bad := []struct{ traj, param string }{
		{`{"exchanges":{"chat_completions":[],"responses":[{"request":{},"response":{}}]},"reward":1}`, "trajectory_groups[0].trajectories[0].exchanges.responses"},
		{`{"exchanges":{"chat_completions":[{"request":{"messages":[]},"response":{"choices":[]}}]},"reward":1}`, "trajectory_groups[0].trajectories[0].exchanges.chat_completions[0].request.messages"},
		{`{"exchanges":{"chat_completions":[{"request":{"messages":[{"role":"user","content":"x"}]},"response":{"choices":[]}}]}}`, "trajectory_groups[0].trajectories[0].exchanges.chat_completions[0].response"},
		{`{"reward":1}`, "trajectory_groups[0].trajectories[0].messages_and_choices"},
		{`{"messages_and_choices":[{"role":"user","content":"x"}],"metrics":{"m":"high"}}`, "trajectory_groups[0]"},
	}
	for _, b := range bad {
		code, _, body := do(t, "POST", u+"/training-jobs", bearer, `{"model_id":"`+id+`","trajectory_groups":[{"trajectories":[`+b.traj+`]}]}`)
		if e := envelope(t, body); code != 400 || e.Param == nil || *e.Param != b.param {
			t.Errorf("%s: %d %s", b.traj, code, body)
		}
	}
}

// TestTrainingDataRefs: SFT data from a Weave table ref (what a Dataset's rows point to) and
// from a Dataset ref at :latest; refused: W&B artifact URLs (not resolvable here yet, and
// said so), other schemes, missing tables, other entities' data.
func TestTrainingDataRefs(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	key := initialKey(t, dir)
	bearer := "Bearer " + key
	u := s.url + "/v1/preview"
	code, _, body := do(t, "POST", u+"/models", bearer, `{"project":"p","name":"sft","base_model":"demo"}`)
	id := jsonOf(t, code, body, 200)["id"].(string)
	rows := strings.Split(strings.TrimSpace(sftData), "\n")
	code, _, body = do(t, "POST", s.url+"/table/create", basic("api", key), `{"table":{"project_id":"local/p","rows":[`+strings.Join(rows, ",")+`]}}`)
	table := jsonOf(t, code, body, 200)["digest"].(string)
	tableRef := "weave:///local/p/table/" + table
	code, _, body = do(t, "POST", s.url+"/obj/create", basic("api", key), `{"obj":{"project_id":"local/p","object_id":"capitals","val":{"_type":"Dataset","_class_name":"Dataset","_bases":["Object","BaseModel"],"name":"capitals","rows":"`+tableRef+`"}}}`)
	jsonOf(t, code, body, 200)

	step := 0
	for _, ref := range []string{tableRef, "weave:///local/p/object/capitals:latest"} {
		code, _, body = do(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"`+id+`","training_data_url":"`+ref+`","config":{"learning_rate":0.01}}`)
		j := waitJob(t, s, bearer, jsonOf(t, code, body, 200)["id"].(string))
		step++
		if j["status"] != "SUCCEEDED" || j["step"] != float64(step) {
			t.Fatalf("%s: job %v", ref, j)
		}
	}
	for _, c := range []struct {
		url, want string
		code      int
	}{
		{"wandb-artifact:///local/p/capitals-sft-data:v0", "local/p/capitals-sft-data:v0 not found", 404},
		{"https://example.com/data.jsonl", "https:// scheme is not supported", 400},
		{"weave:///local/p/table/" + strings.Repeat("0", 64), "not found", 404},
		{"weave:///local/p/object/missing:latest", "not found", 404},
		{"weave:///other/p/table/" + table, "entity", 403},
		{"weave:///local/p/call/abc", "is not a weave", 400},
	} {
		code, _, body = do(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"`+id+`","training_data_url":"`+c.url+`"}`)
		e := envelope(t, body)
		if code != c.code || !strings.Contains(e.Message, c.want) || e.Param == nil || *e.Param != "training_data_url" {
			t.Errorf("%s: %d %s", c.url, code, body)
		}
	}
}

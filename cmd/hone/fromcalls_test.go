package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// tracedReplies samples n replies to prompt at temperature 1 (seeds 1..n) with chat tracing on
// into local/<project>, and returns their contents.
func tracedReplies(t *testing.T, s *server, key, project, prompt string, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		// A short lowercase word: a reply in clean text that the tokenizer reads back as it was
		// written (random weights sample any bytes otherwise).
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":12,"temperature":1,"seed":%d,"structured_outputs":{"regex":"[a-z]{3,6}\\."}}`, prompt, 11+i)
		code, b := postWithHeader(t, s.url+"/v1/chat/completions", "Bearer "+key, "X-Hone-Trace-Project", "local/"+project, body)
		if code != 200 {
			t.Fatalf("chat: %d %s", code, b)
		}
		var r struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		json.Unmarshal(b, &r)
		out = append(out, r.Choices[0].Message.Content)
	}
	return out
}

// tracedCallIDs lists the ids of a project's calls, oldest first.
func tracedCallIDs(t *testing.T, s *server, key, project string) []string {
	t.Helper()
	code, _, body := do(t, "POST", s.url+"/calls/stream_query", basic("api", key), `{"project_id":"local/`+project+`","sort_by":[{"field":"started_at","direction":"asc"}],"columns":["id"]}`)
	if code != 200 {
		t.Fatalf("stream_query: %d %s", code, body)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		var c struct {
			ID string `json:"id"`
		}
		json.Unmarshal([]byte(line), &c)
		ids = append(ids, c.ID)
	}
	return ids
}

func react(t *testing.T, s *server, key, project, callID, emoji string) {
	t.Helper()
	body := fmt.Sprintf(`{"project_id":"local/%s","weave_ref":"weave:///local/%s/call/%s","feedback_type":"wandb.reaction.1","payload":{"emoji":%q}}`, project, project, callID, emoji)
	if code, _, b := do(t, "POST", s.url+"/feedback/create", basic("api", key), body); code != 200 {
		t.Fatalf("feedback: %d %s", code, b)
	}
}

// TestDatasetFromCallsTrainsLikedReplies: chat completions traced into a project, 👍 on one
// sampled reply per prompt and 👎 on the others; `hone datasets from-calls --feedback 👍`
// builds a Weave Dataset of the liked ones, `hone train sft --data-url` trains on it, and the
// new checkpoint answers each prompt greedily with its liked reply. The same calls as RL
// trajectory groups (rewards from the reactions) train one RL step through
// trajectory_groups_url; bad requests are 400s naming the field and write nothing.
func TestDatasetFromCallsTrainsLikedReplies(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	key := initialKey(t, dir)
	bearer := "Bearer " + key
	const project = "chats"
	prompts := []string{"Say the password.", "What is the code word?"}
	liked := map[string]string{}
	var ids []string
	for _, p := range prompts {
		replies := tracedReplies(t, s, key, project, p, 3)
		all := tracedCallIDs(t, s, key, project)
		got := all[len(ids):]
		ids = all
		if len(got) != 3 {
			t.Fatalf("%d calls traced for %q", len(got), p)
		}
		// Like the first reply, dislike the others.
		react(t, s, key, project, got[0], "👍")
		react(t, s, key, project, got[1], "👎")
		react(t, s, key, project, got[2], "👎")
		liked[p] = replies[0]
	}
	// A call the weave SDK's OpenAI integration records: its op is a ref, its output a
	// serialized ChatCompletion; it has no feedback, so the 👍 dataset leaves it out.
	start := `{"start":{"project_id":"local/chats","id":"0190f0c0-0000-7000-8000-000000000001","trace_id":"0190f0c0-0000-7000-8000-000000000002",
		"op_name":"weave:///local/chats/op/openai.chat.completions.create:abc","started_at":"2026-01-01T00:00:00Z","attributes":{},
		"inputs":{"self":"weave:///local/chats/object/OpenAI:x","messages":[{"role":"user","content":"hello"}],"model":"gpt-4o-mini"}}}`
	end := `{"end":{"project_id":"local/chats","id":"0190f0c0-0000-7000-8000-000000000001","ended_at":"2026-01-01T00:00:01Z","summary":{},
		"output":{"_type":"ChatCompletion","_class_name":"ChatCompletion","_bases":["BaseModel"],"id":"x","choices":[{"index":0,"finish_reason":"stop",
		"message":{"role":"assistant","content":"hi there","refusal":null,"tool_calls":null,"_type":"ChatCompletionMessage"}}]}}}`
	for path, b := range map[string]string{"/call/start": start} {
		if code, _, body := do(t, "POST", s.url+path, basic("api", key), b); code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
	}
	if code, _, body := do(t, "POST", s.url+"/call/end", basic("api", key), end); code != 200 {
		t.Fatalf("/call/end: %d %s", code, body)
	}

	// Every chat call (Hone's and the SDK's) without a feedback filter.
	u := s.url + "/v1/preview/datasets/from-calls"
	code, _, body := do(t, "POST", u, bearer, `{"project":"chats","name":"all"}`)
	all := jsonOf(t, code, body, 200)
	if all["rows"] != float64(7) || all["skipped"] != float64(0) || !strings.HasPrefix(all["dataset_ref"].(string), "weave:///local/chats/object/all:") {
		t.Fatalf("all calls: %s", body)
	}
	// The project as entity/project, the form of the trace routes: the same calls; another
	// entity's is a 403 naming project, and an entity that disagrees a 400.
	code, _, body = do(t, "POST", u, bearer, `{"project":"local/chats","name":"all2"}`)
	if all2 := jsonOf(t, code, body, 200); all2["rows"] != float64(7) || !strings.HasPrefix(all2["dataset_ref"].(string), "weave:///local/chats/object/all2:") {
		t.Fatalf("entity/project: %s", body)
	}
	if code, _, body = do(t, "POST", u, bearer, `{"project":"someone/chats"}`); code != 403 || !strings.Contains(string(body), `"param":"project"`) {
		t.Fatalf("another entity's project: %d %s", code, body)
	}
	if code, _, body = do(t, "POST", u, bearer, `{"entity":"other","project":"local/chats"}`); code != 400 || !strings.Contains(string(body), `"param":"entity"`) {
		t.Fatalf("entity and project disagree: %d %s", code, body)
	}

	// The CLI: liked replies only.
	var out, errb bytes.Buffer
	if code := runDatasets(context.Background(), []string{"from-calls", "--url", s.url, "--data", dir, "--project", project, "--feedback", "👍", "--name", "liked"}, &out, &errb); code != 0 {
		t.Fatalf("datasets from-calls: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	var dsRef, next string
	for _, line := range strings.Split(out.String(), "\n") {
		if r, ok := strings.CutPrefix(line, "dataset "); ok {
			dsRef = r
		}
		if r, ok := strings.CutPrefix(line, "next: "); ok {
			next = r
		}
	}
	if !strings.Contains(out.String(), "2 examples") || !strings.HasPrefix(dsRef, "weave:///local/chats/object/liked:") ||
		next != "hone train sft --model local/chats/agent --data-url "+dsRef {
		t.Fatalf("datasets from-calls printed:\n%s", out.String())
	}
	// The Dataset is a weave Dataset object whose rows table holds the examples.
	var obj struct {
		Obj struct {
			BaseObjectClass string `json:"base_object_class"`
			Val             struct {
				Type string `json:"_type"`
				Rows string `json:"rows"`
			} `json:"val"`
		} `json:"obj"`
	}
	post(t, s, key, "/obj/read", map[string]any{"project_id": "local/chats", "object_id": "liked", "digest": "latest"}, &obj)
	if obj.Obj.BaseObjectClass != "Dataset" || obj.Obj.Val.Type != "Dataset" || !strings.HasPrefix(obj.Obj.Val.Rows, "weave:///local/chats/table/") {
		t.Fatalf("dataset object %+v", obj.Obj)
	}
	var tq struct {
		Rows []struct {
			Val struct {
				Messages []map[string]any `json:"messages"`
			} `json:"val"`
		} `json:"rows"`
	}
	post(t, s, key, "/table/query", map[string]any{"project_id": "local/chats", "digest": strings.TrimPrefix(obj.Obj.Val.Rows, "weave:///local/chats/table/")}, &tq)
	if len(tq.Rows) != 2 {
		t.Fatalf("table rows %+v", tq.Rows)
	}
	for i, r := range tq.Rows {
		m := r.Val.Messages
		if len(m) != 2 || m[0]["content"] != prompts[i] || m[1]["role"] != "assistant" || m[1]["content"] != liked[prompts[i]] {
			t.Fatalf("row %d: %v", i, m)
		}
	}

	// Train on it as printed, with what memorises two replies reliably (160 steps, cosine).
	args := append(strings.Fields(next)[2:], "--url", s.url, "--data", dir, "--lr", "0.01", "--epochs", "80", "--schedule", "cosine", "--warmup", "5")
	out.Reset()
	if code := runTrain(context.Background(), args, &out, &errb); code != 0 || !strings.Contains(out.String(), "checkpoint step 1") {
		t.Fatalf("train %v: exit %d\n%s\n%s", args, code, out.String(), errb.String())
	}
	for _, p := range prompts {
		code, _, body := do(t, "POST", s.url+"/v1/chat/completions", bearer, fmt.Sprintf(`{"model":"local/chats/agent:step1","messages":[{"role":"user","content":%q}],"max_tokens":12,"temperature":0}`, p))
		c := jsonOf(t, code, body, 200)
		got := c["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]
		if got != liked[p] {
			t.Errorf("%q: the trained checkpoint answers %q, the liked reply was %q\n%s", p, got, liked[p], out.String())
		}
	}

	// RL: the same calls grouped by prompt, rewards from the reactions; the SDK's call has no
	// reward and is skipped.
	out.Reset()
	if code := runDatasets(context.Background(), []string{"from-calls", "--url", s.url, "--data", dir, "--project", project, "--kind", "rl", "--name", "groups", "--model", "local/chats/rl"}, &out, &errb); code != 0 {
		t.Fatalf("datasets from-calls --kind rl: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "2 trajectory groups") || !strings.Contains(out.String(), "1 calls skipped") || !strings.Contains(out.String(), "--allow-training-without-logprobs") {
		t.Fatalf("rl dataset:\n%s", out.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if r, ok := strings.CutPrefix(line, "next: "); ok {
			next = r
		}
	}
	args = append(strings.Fields(next)[2:], "--url", s.url, "--data", dir)
	out.Reset()
	if code := runTrain(context.Background(), args, &out, &errb); code != 0 || !strings.Contains(out.String(), "checkpoint step 1") {
		t.Fatalf("train %v: exit %d\n%s\n%s", args, code, out.String(), errb.String())
	}

	// Bad requests name their field and write nothing.
	countObjs := func() int {
		var objs struct {
			Objs []any `json:"objs"`
		}
		post(t, s, key, "/objs/query", map[string]any{"project_id": "local/chats"}, &objs)
		return len(objs.Objs)
	}
	before := countObjs()
	for _, c := range []struct{ body, param string }{
		{`{"project":"chats","bogus":1}`, "bogus"},
		{`{"project":"chats","feedback":{"emoji":"👍"}}`, "feedback.emoji"},
		{`{"project":"chats","query":{"$expr":{"$nope":[]}}}`, "query"},
		{`{"project":"chats","op_names":["no.such.op"]}`, "op_names[0]"},
		{`{"project":"chats","feedback":{"reaction":"🎉"}}`, "feedback"},
		{`{"project":"chats","kind":"dpo"}`, "kind"},
		{`{"project":"empty"}`, "project"},
		{`{"project":"chats","op_names":["weave:///local/chats/op/openai.chat.completions.create:abc"],"kind":"rl"}`, "op_names"},
	} {
		code, _, body := do(t, "POST", u, bearer, c.body)
		e := envelope(t, body)
		if code != 400 || e.Param == nil || *e.Param != c.param {
			t.Errorf("%s: %d %s", c.body, code, body)
		}
	}
	if code, _, body := do(t, "POST", u, bearer, `{"entity":"other","project":"chats"}`); code != 403 {
		t.Errorf("another entity: %d %s", code, body)
	}
	if n := countObjs(); n != before {
		t.Errorf("bad requests wrote objects: %d before, %d after", before, n)
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestConformanceWeavePythonFromCalls: chat completions traced into a project (a text reply,
// a tool-call reply, a turn with the tool's result; two replies to one prompt, 👍 and 👎),
// turned into Datasets by POST /v1/preview/datasets/from-calls (kind sft and rl), read back
// with the Weave Python SDK (conformance/weave-py/from_calls.py: weave.ref(ref).get().rows, by
// full ref and by name): a Dataset whose rows are the rows Hone wrote, holding the messages.
func TestConformanceWeavePythonFromCalls(t *testing.T) {
	py := weavePython(t)
	if py == "" {
		skipOrFail(t, "no Python with the weave package (set HONE_WEAVE_PYTHON or run scripts/test-setup.sh)")
	}
	data := t.TempDir()
	s := startServer(t, data)
	key := initialKey(t, data)
	const project = "fromcalls"
	chat := func(body string) map[string]any {
		t.Helper()
		code, b := postWithHeader(t, s.url+"/v1/chat/completions", "Bearer "+key, "X-Hone-Trace-Project", "local/"+project, body)
		return jsonOf(t, code, b, 200)
	}
	reply := func(r map[string]any) map[string]any {
		return r["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	}
	const tools = `[{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string","enum":["UTC","CET"]}},"required":["zone"],"additionalProperties":false}}}]`
	word := `"max_tokens":12,"temperature":1,"structured_outputs":{"regex":"[a-z]{3,6}\\."}`

	// SFT rows: a text reply, a tool-call reply, and the turn with its result.
	text := reply(chat(`{"messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"Hi"}],"seed":1,` + word + `}`))
	calls := reply(chat(`{"messages":[{"role":"user","content":"Time?"}],"tools":` + tools + `,"tool_choice":"required","parallel_tool_calls":false,"max_tokens":60,"seed":2}`))
	tc := calls["tool_calls"].([]any)[0].(map[string]any)
	fn := tc["function"].(map[string]any)
	assistant := fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}]}`, tc["id"], fn["name"], fn["arguments"])
	toolMsg := fmt.Sprintf(`{"role":"tool","tool_call_id":%q,"content":"12:00"}`, tc["id"])
	after := reply(chat(`{"messages":[{"role":"user","content":"Time?"},` + assistant + `,` + toolMsg + `],"tools":` + tools + `,"seed":3,` + word + `}`))

	code, _, b := do(t, "POST", s.url+"/v1/preview/datasets/from-calls", "Bearer "+key, `{"project":"`+project+`","name":"chats"}`)
	sft := jsonOf(t, code, b, 200)
	if sft["rows"] != float64(3) || sft["kind"] != "sft" {
		t.Fatalf("from-calls sft: %s", b)
	}

	// RL: two replies to one prompt, 👍 and 👎 (rewards 1 and 0): one trajectory group.
	for seed := 4; seed <= 5; seed++ {
		chat(fmt.Sprintf(`{"messages":[{"role":"user","content":"Say a word."}],"seed":%d,"logprobs":true,%s}`, seed, word))
	}
	ids := tracedCallIDs(t, s, key, project)
	react(t, s, key, project, ids[len(ids)-2], "👍")
	react(t, s, key, project, ids[len(ids)-1], "👎")
	code, _, b = do(t, "POST", s.url+"/v1/preview/datasets/from-calls", "Bearer "+key, `{"project":"`+project+`","name":"groups","kind":"rl"}`)
	rl := jsonOf(t, code, b, 200)
	if rl["rows"] != float64(1) || rl["kind"] != "rl" {
		t.Fatalf("from-calls rl: %s", b)
	}

	sftRef, rlRef := sft["dataset_ref"].(string), rl["dataset_ref"].(string)
	res := runSDK(t, s, key, "local/"+project, py, filepath.Join(repoRoot(t), "conformance", "weave-py", "from_calls.py"), sftRef, "chats", rlRef)
	type dataset struct {
		Class string           `json:"class"`
		Name  string           `json:"name"`
		Rows  []map[string]any `json:"rows"`
	}
	var read map[string]dataset
	if err := json.Unmarshal(res.Read, &read); err != nil {
		t.Fatalf("read: %v: %s", err, res.Read)
	}
	// What the SDK reads equals the table Hone wrote, row for row.
	tableRows := func(tableRef string) []map[string]any {
		var tq struct {
			Rows []struct {
				Val map[string]any `json:"val"`
			} `json:"rows"`
		}
		post(t, s, key, "/table/query", map[string]any{"project_id": "local/" + project, "digest": tableRef[strings.LastIndex(tableRef, "/")+1:]}, &tq)
		var out []map[string]any
		for _, r := range tq.Rows {
			out = append(out, r.Val)
		}
		return out
	}
	eqJSON := func(what string, got, want any) {
		t.Helper()
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Errorf("%s:\n got %s\nwant %s", what, g, w)
		}
	}
	for ref, want := range map[string]struct {
		name  string
		table string
	}{sftRef: {"chats", sft["table_ref"].(string)}, "chats": {"chats", sft["table_ref"].(string)}, rlRef: {"groups", rl["table_ref"].(string)}} {
		got, ok := read[ref]
		if !ok {
			t.Fatalf("the SDK read nothing for %s: %s", ref, res.Read)
		}
		if got.Class != "Dataset" || got.Name != want.name {
			t.Errorf("weave.ref(%q).get() = %s named %q, want a Dataset named %q", ref, got.Class, got.Name, want.name)
		}
		eqJSON("rows of "+ref, got.Rows, tableRows(want.table))
	}

	// The SFT rows hold the conversations: the request's messages, then the reply.
	rows := read[sftRef].Rows
	if len(rows) != 3 {
		t.Fatalf("sft rows = %v", rows)
	}
	msgs := func(i int) []any { return rows[i]["messages"].([]any) }
	eqJSON("row 0 messages", msgs(0), []any{
		map[string]any{"role": "system", "content": "Be terse."}, map[string]any{"role": "user", "content": "Hi"},
		map[string]any{"role": "assistant", "content": text["content"]}})
	last := msgs(1)[len(msgs(1))-1].(map[string]any)
	if len(msgs(1)) != 2 || last["role"] != "assistant" || !reflect.DeepEqual(last["tool_calls"], calls["tool_calls"]) {
		t.Errorf("row 1 (tool call) messages = %v, reply %v", msgs(1), calls)
	}
	if _, ok := rows[1]["tools"].([]any); !ok {
		t.Errorf("row 1 has no tools: %v", rows[1])
	}
	m2 := msgs(2)
	if len(m2) != 4 || m2[2].(map[string]any)["role"] != "tool" || m2[2].(map[string]any)["tool_call_id"] != tc["id"] || m2[3].(map[string]any)["content"] != after["content"] {
		t.Errorf("row 2 (tool result turn) messages = %v", m2)
	}
	// The RL row: one group of the two replies, rewards 1 and 0.
	group := read[rlRef].Rows[0]
	trajs, _ := group["trajectories"].([]any)
	if len(trajs) != 2 {
		t.Fatalf("rl group = %v", group)
	}
	var rewards []any
	for _, tr := range trajs {
		rewards = append(rewards, tr.(map[string]any)["reward"])
	}
	eqJSON("rl rewards", rewards, []any{1, 0})
}

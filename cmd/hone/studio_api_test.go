package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/client"
	"github.com/honeai/hone/internal/training"
)

// The routes and fields Hone adds for Hone Studio, end to end against a started server on
// both stores: GET /projects/stats, the calls field summary.weave.total_tokens (sort and
// query), and datasets/from-calls with append (the calls table's "add to dataset").

// upsert writes a /call/upsert_batch of calls (each a start and an end) as key.
func upsert(t *testing.T, s *server, key string, items []map[string]any) {
	t.Helper()
	var batch []map[string]any
	for _, c := range items {
		start := map[string]any{"attributes": map[string]any{}, "inputs": map[string]any{}}
		end := map[string]any{"summary": map[string]any{}}
		for k, v := range c {
			switch k {
			case "ended_at", "output", "summary", "exception":
				end[k] = v
			default:
				start[k] = v
			}
		}
		end["project_id"], end["id"] = c["project_id"], c["id"]
		if end["ended_at"] == nil {
			end["ended_at"] = "2026-01-01T00:00:01Z"
		}
		batch = append(batch, map[string]any{"mode": "start", "req": map[string]any{"start": start}}, map[string]any{"mode": "end", "req": map[string]any{"end": end}})
	}
	b, _ := json.Marshal(map[string]any{"batch": batch})
	if code, _, body := do(t, "POST", s.url+"/call/upsert_batch", basic("api", key), string(b)); code != 200 {
		t.Fatalf("upsert_batch: %d %s", code, body)
	}
}

func TestProjectsStats(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		data := t.TempDir()
		s := startServer(t, data, st.args...)
		key := initialKey(t, data)
		authz := basic("api", key)
		// local/a: two traces (3 calls), one object in two versions and an op; local/b: an
		// object only; another entity's project.
		upsert(t, s, key, []map[string]any{
			{"project_id": "local/a", "id": "r1", "trace_id": "t1", "op_name": "root", "started_at": "2026-01-01T00:00:00Z"},
			{"project_id": "local/a", "id": "c1", "trace_id": "t1", "parent_id": "r1", "op_name": "child", "started_at": "2026-01-01T00:00:00.5Z"},
			{"project_id": "local/a", "id": "r2", "trace_id": "t2", "op_name": "root", "started_at": "2026-03-01T00:00:00Z", "ended_at": "2026-03-01T00:00:01Z"},
		})
		for _, o := range []string{
			`{"obj":{"project_id":"local/a","object_id":"prompt","val":{"v":1}}}`,
			`{"obj":{"project_id":"local/a","object_id":"prompt","val":{"v":2}}}`,
			`{"obj":{"project_id":"local/b","object_id":"ds","val":{"rows":[]}}}`,
		} {
			if code, _, b := do(t, "POST", s.url+"/obj/create", authz, o); code != 200 {
				t.Fatalf("obj create %d %s", code, b)
			}
		}
		var other bytes.Buffer
		if runKeys(context.Background(), append([]string{"create", "--data", data, "--entity", "localz"}, st.args...), &other, io.Discard) != 0 {
			t.Fatal("keys create")
		}
		lines := strings.Split(strings.TrimSpace(other.String()), "\n")
		authz2 := basic("api", lines[len(lines)-1])
		upsert(t, s, lines[len(lines)-1], []map[string]any{{"project_id": "localz/x", "id": "z1", "trace_id": "tz", "op_name": "root", "started_at": "2026-01-01T00:00:00Z"}})

		var res struct {
			Projects []struct {
				ProjectID      string  `json:"project_id"`
				Calls          int     `json:"calls"`
				Traces         int     `json:"traces"`
				Objects        int     `json:"objects"`
				LastCallAt     *string `json:"last_call_at"`
				LastObjectAt   *string `json:"last_object_at"`
				LastActivityAt *string `json:"last_activity_at"`
			} `json:"projects"`
		}
		code, _, body := do(t, "GET", s.url+"/projects/stats", authz, "")
		if code != 200 || json.Unmarshal(body, &res) != nil || len(res.Projects) != 2 {
			t.Fatalf("GET /projects/stats: %d %s", code, body)
		}
		a, b := res.Projects[0], res.Projects[1]
		if a.ProjectID != "local/a" || a.Calls != 3 || a.Traces != 2 || a.Objects != 1 || a.LastCallAt == nil || !strings.HasPrefix(*a.LastCallAt, "2026-03-01T00:00:00") {
			t.Errorf("local/a: %s", body)
		}
		// The object was created now, after the calls' 2026 starts... or before: the later wins.
		if a.LastObjectAt == nil || a.LastActivityAt == nil || (*a.LastActivityAt != *a.LastObjectAt && *a.LastActivityAt != *a.LastCallAt) {
			t.Errorf("local/a last activity: %s", body)
		}
		if b.ProjectID != "local/b" || b.Calls != 0 || b.Traces != 0 || b.Objects != 1 || b.LastCallAt != nil || b.LastActivityAt == nil || *b.LastActivityAt != *b.LastObjectAt {
			t.Errorf("local/b: %s", body)
		}
		// The other entity sees its own project only; no key, no answer.
		code, _, body = do(t, "GET", s.url+"/projects/stats", authz2, "")
		if code != 200 || !strings.Contains(string(body), `"localz/x"`) || strings.Contains(string(body), "local/a") {
			t.Errorf("other entity: %d %s", code, body)
		}
		if code, _, _ := do(t, "GET", s.url+"/projects/stats", "", ""); code != 401 {
			t.Errorf("without a key: %d", code)
		}
	})
}

// streamIDs runs /calls/stream_query and answers the ids in order.
func streamIDs(t *testing.T, s *server, authz, body string) []string {
	t.Helper()
	code, _, b := do(t, "POST", s.url+"/calls/stream_query", authz, body)
	if code != 200 {
		t.Fatalf("stream_query %s: %d %s", body, code, b)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var c struct {
			ID string `json:"id"`
		}
		json.Unmarshal([]byte(line), &c)
		ids = append(ids, c.ID)
	}
	return ids
}

func TestCallsTotalTokensField(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		data := t.TempDir()
		s := startServer(t, data, st.args...)
		key := initialKey(t, data)
		authz := basic("api", key)
		call := func(id string, usage any) map[string]any {
			c := map[string]any{"project_id": "local/tok", "id": id, "trace_id": "t" + id, "op_name": "op", "started_at": "2026-01-01T00:00:00Z"}
			if usage != nil {
				c["summary"] = map[string]any{"usage": usage}
			}
			return c
		}
		upsert(t, s, key, []map[string]any{
			call("total", map[string]any{"m": map[string]any{"total_tokens": 50, "prompt_tokens": 1, "completion_tokens": 1}}), // 50
			call("pc", map[string]any{"m": map[string]any{"prompt_tokens": 7, "completion_tokens": 3}}),                        // 10
			call("io", map[string]any{"m": map[string]any{"input_tokens": 20, "output_tokens": 5, "total_tokens": 0}}),         // 25
			call("two", map[string]any{"a": map[string]any{"total_tokens": 30}, "b": map[string]any{"prompt_tokens": 6}}),      // 36
			call("none", nil),                      // missing: last both ways
			call("odd", "not an object of models"), // missing too
		})
		for _, c := range []struct{ dir, want string }{{"asc", "pc io two total"}, {"desc", "total two io pc"}} {
			ids := streamIDs(t, s, authz, `{"project_id":"local/tok","sort_by":[{"field":"summary.weave.total_tokens","direction":"`+c.dir+`"}],"columns":["id"]}`)
			if got := strings.Join(ids[:4], " "); got != c.want || len(ids) != 6 {
				t.Errorf("sorted %s: %v, want %s then the two without usage", c.dir, ids, c.want)
			}
		}
		ids := streamIDs(t, s, authz, `{"project_id":"local/tok","query":{"$expr":{"$gt":[{"$getField":"summary.weave.total_tokens"},{"$literal":20}]}},"sort_by":[{"field":"id","direction":"asc"}],"columns":["id"]}`)
		if strings.Join(ids, " ") != "io total two" {
			t.Errorf("total_tokens > 20: %v", ids)
		}
	})
}

// TestCallsTotalCostAndExport: the calls table's cost sort (summary.weave.total_cost, priced
// when read) and its export (/calls/stream_query by Accept), end to end on both stores.
func TestCallsTotalCostAndExport(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		data := t.TempDir()
		s := startServer(t, data, st.args...)
		key := initialKey(t, data)
		authz := basic("api", key)
		call := func(id string, usage any) map[string]any {
			c := map[string]any{"project_id": "local/cost", "id": id, "trace_id": "t" + id, "op_name": "op", "started_at": "2026-01-01T00:00:00Z",
				"inputs": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi, " + id}}}}
			if usage != nil {
				c["summary"] = map[string]any{"usage": usage}
			}
			return c
		}
		upsert(t, s, key, []map[string]any{
			call("mini", map[string]any{"gpt-4o-mini": map[string]any{"prompt_tokens": 1000, "completion_tokens": 1000}}), // 0.00075
			call("big", map[string]any{"gpt-4o": map[string]any{"prompt_tokens": 1000, "completion_tokens": 1000}}),       // 0.0125
			call("mid", map[string]any{"gpt-4o": map[string]any{"prompt_tokens": 400}}),                                   // 0.001
			call("unpriced", map[string]any{"my-model": map[string]any{"prompt_tokens": 9000}}),                           // unknown: last
			call("none", nil), // unknown: last
		})
		for _, c := range []struct{ dir, want string }{{"desc", "big mid mini none unpriced"}, {"asc", "mini mid big none unpriced"}} {
			ids := streamIDs(t, s, authz, `{"project_id":"local/cost","sort_by":[{"field":"summary.weave.total_cost","direction":"`+c.dir+`"}],"columns":["id"]}`)
			if got := strings.Join(ids, " "); got != c.want {
				t.Errorf("sorted by cost %s: %s, want %s", c.dir, got, c.want)
			}
		}
		req, _ := http.NewRequest("POST", s.url+"/calls/stream_query", strings.NewReader(`{"project_id":"local/cost","sort_by":[{"field":"summary.weave.total_cost","direction":"desc"}],"columns":["id","inputs"],"limit":2}`))
		req.Header.Set("Authorization", authz)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/csv")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// (upsert writes the messages' keys in Go's map order: content, role)
		want := "id,inputs.messages\nbig,\"[{\"\"content\"\":\"\"hi, big\"\",\"\"role\"\":\"\"user\"\"}]\"\nmid,\"[{\"\"content\"\":\"\"hi, mid\"\",\"\"role\"\":\"\"user\"\"}]\"\n"
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" || string(body) != want {
			t.Errorf("CSV export: %d %s\n%s\nwant\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body, want)
		}
	})
}

func TestDatasetFromCallsAppend(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		data := t.TempDir()
		s := startServer(t, data, st.args...)
		key := initialKey(t, data)
		authz := basic("api", key)
		chat := func(id, q, a string) map[string]any {
			return map[string]any{"project_id": "local/loop", "id": id, "trace_id": "t" + id, "op_name": "openai.chat.completions.create", "started_at": "2026-01-01T00:00:0" + id[len(id)-1:] + "Z",
				"inputs": map[string]any{"model": "demo", "messages": []any{map[string]any{"role": "user", "content": q}}},
				"output": map[string]any{"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": a}}}}}
		}
		upsert(t, s, key, []map[string]any{chat("c1", "one?", "1"), chat("c2", "two?", "2"), chat("c3", "three?", "3")})
		picked := func(ids ...string) string {
			var lits []string
			for _, id := range ids {
				lits = append(lits, `{"$literal":"`+id+`"}`)
			}
			return `{"$expr":{"$in":[{"$getField":"id"},[` + strings.Join(lits, ",") + `]]}}`
		}
		c := client.New(s.url, key)
		build := func(name string, add bool, query string) (training.FromCallsResult, error) {
			return c.DatasetFromCalls(context.Background(), training.FromCallsRequest{Project: "local/loop", Name: name, Append: add, Query: json.RawMessage(query)})
		}
		// append to a dataset that does not exist yet creates it.
		r, err := build("picked", true, picked("c1", "c2"))
		if err != nil || r.Rows != 2 || r.PreviousRows != 0 {
			t.Fatalf("first append: %+v %v", r, err)
		}
		r, err = build("picked", true, picked("c3"))
		if err != nil || r.Rows != 3 || r.PreviousRows != 2 {
			t.Fatalf("second append: %+v %v", r, err)
		}
		// The latest version holds the earlier rows, then the new one.
		code, _, b := do(t, "POST", s.url+"/obj/read", authz, `{"project_id":"local/loop","object_id":"picked","digest":"latest"}`)
		var obj struct {
			Obj struct {
				VersionIndex int `json:"version_index"`
				Val          struct {
					Rows string `json:"rows"`
				} `json:"val"`
			} `json:"obj"`
		}
		if code != 200 || json.Unmarshal(b, &obj) != nil || obj.Obj.VersionIndex != 1 {
			t.Fatalf("obj read: %d %s", code, b)
		}
		digest := obj.Obj.Val.Rows[strings.LastIndex(obj.Obj.Val.Rows, "/")+1:]
		code, _, b = do(t, "POST", s.url+"/table/query", authz, fmt.Sprintf(`{"project_id":"local/loop","digest":%q}`, digest))
		var rows struct {
			Rows []struct {
				Val struct {
					Messages []struct {
						Content string `json:"content"`
					} `json:"messages"`
				} `json:"val"`
			} `json:"rows"`
		}
		if code != 200 || json.Unmarshal(b, &rows) != nil || len(rows.Rows) != 3 {
			t.Fatalf("table query: %d %s", code, b)
		}
		var got []string
		for _, row := range rows.Rows {
			got = append(got, row.Val.Messages[len(row.Val.Messages)-1].Content)
		}
		if strings.Join(got, " ") != "1 2 3" {
			t.Errorf("rows after append: %v", got)
		}
		// Without append, a version of the new rows alone (as before).
		if r, err = build("picked", false, picked("c2")); err != nil || r.Rows != 1 || r.PreviousRows != 0 {
			t.Errorf("without append: %+v %v", r, err)
		}
		// append onto an object that is no dataset is a 400 naming name, and writes nothing.
		if code, _, b := do(t, "POST", s.url+"/obj/create", authz, `{"obj":{"project_id":"local/loop","object_id":"plain","val":{"a":1}}}`); code != 200 {
			t.Fatalf("obj create %d %s", code, b)
		}
		var refused *client.Error
		if _, err = build("plain", true, picked("c1")); !errors.As(err, &refused) || refused.Status != 400 || refused.Param != "name" {
			t.Errorf("append onto a plain object: %v", err)
		}
		code, _, b = do(t, "POST", s.url+"/obj/read", authz, `{"project_id":"local/loop","object_id":"plain","digest":"latest"}`)
		if code != 200 || !strings.Contains(string(b), `"version_index":0`) {
			t.Errorf("plain object after the refused append: %d %s", code, b)
		}
	})
}

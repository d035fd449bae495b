package traceapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The requests below are the bodies weave 0.54.0's Python SDK sends (see
// weave/trace/weave_client.py get_call / get_calls and weave/trace/feedback.py).

func (e *env) mustCall(t *testing.T, path, key, body string) []byte {
	t.Helper()
	code, resp := e.call(t, "POST", path, key, body)
	if code != 200 {
		t.Fatalf("%s: %d %s", path, code, resp)
	}
	return resp
}

func jsonLines(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("bad line %q", l)
		}
		out = append(out, m)
	}
	return out
}

func TestWeave054CallsQuery(t *testing.T) {
	e := setup(t)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	e.mustCall(t, "/call/start", e.key, `{"start":{"project_id":"ent/p","id":"c1","trace_id":"t1","op_name":"weave:///ent/p/op/f:abc","started_at":"`+now+`","attributes":{},"inputs":{"x":1}}}`)
	e.mustCall(t, "/call/end", e.key, `{"end":{"project_id":"ent/p","id":"c1","trace_id":"t1","is_eval":false,"ended_at":"`+now+`","started_at":"`+now+`","exception":null,"output":"ok","summary":{},"wb_run_step_end":null}}`)
	// get_call: fails before with `400 Unknown field(s) in request body: include_usernames, latest_only`.
	getCall := `{"project_id":"ent/p","filter":{"call_ids":["c1"]},"limit":null,"offset":null,"latest_only":false,"sort_by":null,"query":null,
		"include_costs":false,"include_feedback":false,"include_storage_size":false,"include_total_storage_size":false,"include_usernames":false,
		"columns":null,"expand_columns":null,"return_expanded_column_values":true}`
	calls := jsonLines(t, e.mustCall(t, "/calls/stream_query", e.key, getCall))
	if len(calls) != 1 || calls[0]["output"] != "ok" || calls[0]["wb_user_id"] != "ent" {
		t.Fatalf("get_call = %v", calls)
	}
	if _, ok := calls[0]["wb_username"]; ok {
		t.Fatal("wb_username without include_usernames")
	}
	// get_calls(include_usernames=True, filter={"trace_ids": [...]}).
	calls = jsonLines(t, e.mustCall(t, "/calls/stream_query", e.key, strings.NewReplacer(`"include_usernames":false`, `"include_usernames":true`,
		`{"call_ids":["c1"]}`, `{"trace_ids":["t1"]}`).Replace(getCall)))
	if len(calls) != 1 || calls[0]["wb_username"] != "ent" {
		t.Fatalf("include_usernames = %v", calls)
	}
	// A read with a field Hone does not know, at any depth, is a 400 naming it.
	for body, param := range map[string]string{
		`{"project_id":"ent/p","filter":{"op_names":["x"],"agent_ids":["a"]}}`:                        "filter.agent_ids",
		`{"project_id":"ent/p","sort_by":[{"field":"started_at","direction":"asc","nulls":"first"}]}`: "sort_by[0].nulls",
		`{"project_id":"ent/p","group_by":"op_name"}`:                                                 "group_by",
	} {
		code, resp := e.call(t, "POST", "/calls/stream_query", e.key, body)
		if code != 400 || errParam(t, resp) != param || !strings.Contains(string(resp), param) {
			t.Errorf("%s: %d %s, want 400 naming %s", body, code, resp, param)
		}
	}
	for path, body := range map[string]string{
		"/calls/delete":   `{"project_id":"ent/p","call_ids":["c1"],"cascade":false}`,
		"/feedback/purge": `{"project_id":"ent/p","query":{"$expr":{"$eq":[{"$literal":1},{"$literal":1}]}},"dry_run":true}`,
		"/objs/query":     `{"project_id":"ent/p","filter":{"latest_only":true,"owner":"x"}}`,
	} {
		if code, resp := e.call(t, "POST", path, e.key, body); code != 400 {
			t.Errorf("%s with an unknown field: %d %s", path, code, resp)
		}
	}
	// $lt (a query operator of weave 0.54's request models).
	calls = jsonLines(t, e.mustCall(t, "/calls/stream_query", e.key, `{"project_id":"ent/p","query":{"$expr":{"$lt":[{"$getField":"inputs.x"},{"$literal":2}]}}}`))
	if len(calls) != 1 {
		t.Fatalf("$lt = %v", calls)
	}
}

const sdkFeedbackItem = `{"project_id":"ent/p","weave_ref":"weave:///ent/p/call/c1","creator":null,"feedback_type":"wandb.reaction.1",
 "payload":{"emoji":"👍"},"annotation_ref":null,"runnable_ref":null,"call_ref":null,"scorer_tags":[],"scorer_tag_reasons":{},
 "scorer_tag_confidences":{},"scorer_ratings":{},"scorer_rating_reasons":{},"scorer_rating_confidences":{},"span_agent_name":"",
 "span_agent_version":"","span_status_code":"UNSET","span_conversation_id":"","span_trace_id":"","scorer_trace_id":""`

func TestWeave054Feedback(t *testing.T) {
	e := setup(t)
	// /feedback/create with every field the SDK sends (refused before: scorer_*, span_*).
	var created struct{ ID string }
	_ = json.Unmarshal(e.mustCall(t, "/feedback/create", e.key, sdkFeedbackItem+`}`), &created)
	if created.ID == "" {
		t.Fatal("no id")
	}
	// /feedback/batch/create (a 404 before): the ids the client made are kept.
	batch := `{"batch":[` + sdkFeedbackItem + `,"id":"f1"},` + strings.Replace(sdkFeedbackItem, `"wandb.reaction.1"`, `"wandb.note.1"`, 1) + `,"id":"f2"}]}`
	var res struct {
		Res []struct{ ID string } `json:"res"`
	}
	if err := json.Unmarshal(e.mustCall(t, "/feedback/batch/create", e.key, batch), &res); err != nil || len(res.Res) != 2 || res.Res[1].ID != "f2" {
		t.Fatalf("batch = %+v %v", res, err)
	}
	var q struct {
		Result     []map[string]any `json:"result"`
		TotalCount int              `json:"total_count"`
	}
	_ = json.Unmarshal(e.mustCall(t, "/feedback/query", e.key, `{"project_id":"ent/p","limit":2,"sort_by":[{"field":"created_at","direction":"asc"}]}`), &q)
	if len(q.Result) != 2 || q.TotalCount != 3 || q.Result[0]["span_status_code"] != "UNSET" || q.Result[0]["wb_user_id"] != "ent" {
		t.Fatalf("query = %+v", q)
	}
	// Tenancy: another entity can neither write nor read ent's feedback.
	if code, resp := e.call(t, "POST", "/feedback/batch/create", e.other, batch); code != 403 || errParam(t, resp) != "batch[0].project_id" {
		t.Fatalf("foreign batch: %d %s", code, resp)
	}
	if code, _ := e.call(t, "POST", "/feedback/query", e.other, `{"project_id":"ent/p"}`); code != 403 {
		t.Fatalf("foreign query: %d", code)
	}
	// A feedback field Hone does not know yet is kept, not refused.
	e.mustCall(t, "/feedback/batch/create", e.key, `{"batch":[`+sdkFeedbackItem+`,"id":"f3","span_new_field":{"k":1}}]}`)
	kept, err := e.svc.ExtraFields(context.Background(), "ent/p", "feedback:f3")
	if err != nil || len(kept) != 1 || string(kept[0].Fields) != `{"span_new_field":{"k":1}}` || kept[0].Route != "/feedback/batch/create" {
		t.Fatalf("kept = %+v %v", kept, err)
	}
	_ = json.Unmarshal(e.mustCall(t, "/feedback/query", e.key, `{"project_id":"ent/p","query":{"$expr":{"$eq":[{"$getField":"id"},{"$literal":"f3"}]}}}`), &q)
	if len(q.Result) != 1 {
		t.Fatal("feedback with an unknown field was not stored")
	}
	// Purge.
	e.mustCall(t, "/feedback/purge", e.key, `{"project_id":"ent/p","query":{"$expr":{"$eq":[{"$getField":"feedback_type"},{"$literal":"wandb.note.1"}]}}}`)
	_ = json.Unmarshal(e.mustCall(t, "/feedback/query", e.key, `{"project_id":"ent/p"}`), &q)
	if q.TotalCount != 3 {
		t.Fatalf("after purge: %d", q.TotalCount)
	}
}

// Writes keep fields Hone does not know, at the top level too (a 400 before).
func TestWeave054WritesKeepUnknownFields(t *testing.T) {
	e := setup(t)
	resp := e.mustCall(t, "/obj/create", e.key, `{"obj":{"project_id":"ent/p","object_id":"o","val":{"a":1},"obj_new":true},"req_new":[1]}`)
	var created struct{ Digest string }
	_ = json.Unmarshal(resp, &created)
	kept, _ := e.svc.ExtraFields(context.Background(), "ent/p", "object:o:"+created.Digest)
	if len(kept) != 1 || string(kept[0].Fields) != `{"obj.obj_new":true,"req_new":[1]}` {
		t.Fatalf("kept = %+v", kept)
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	e.mustCall(t, "/call/upsert_batch", e.key, `{"batch":[{"mode":"start","req":{"start":{"project_id":"ent/p","id":"c9","trace_id":"t","op_name":"o","started_at":"`+now+`","attributes":{},"inputs":{},"future":1}}}],"hint":2}`)
	kept, _ = e.svc.ExtraFields(context.Background(), "ent/p", "call:c9")
	if len(kept) != 1 || string(kept[0].Fields) != `{"req.start.future":1}` {
		t.Fatalf("call kept = %+v", kept)
	}
	e.mustCall(t, "/v2/ent/p/calls/complete", e.key, `{"batch":[{"project_id":"ent/p","id":"c10","trace_id":"t","op_name":"o","started_at":"`+now+`","ended_at":"`+now+`","attributes":{},"inputs":{},"summary":{},"later":"x"}]}`)
	if kept, _ = e.svc.ExtraFields(context.Background(), "ent/p", "call:c10"); len(kept) != 1 || string(kept[0].Fields) != `{"later":"x"}` {
		t.Fatalf("complete kept = %+v", kept)
	}
}

func TestWeave054FileExpectedDigest(t *testing.T) {
	e := setup(t)
	post := func(expected string) (int, []byte) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("project_id", "ent/p")
		_ = mw.WriteField("expected_digest", expected)
		fw, _ := mw.CreateFormFile("file", "obj.py")
		_, _ = fw.Write([]byte("print('hi')\n"))
		mw.Close()
		req, _ := http.NewRequest("POST", e.srv.URL+"/file/create", &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("api:"+e.key)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := post("wrong"); code != 409 || errParam(t, b) != "expected_digest" {
		t.Fatalf("mismatch: %d %s", code, b)
	}
	if code, b := post(""); code != 200 {
		t.Fatalf("no expected digest: %d %s", code, b)
	}
}

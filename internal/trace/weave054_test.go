package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// The fields of a feedback item exactly as weave 0.54's feedback_create_params builds them
// (a reaction on an agent span: scorer tags with reasons and confidences).
const sdkFeedback = `{"project_id":"ent/proj","weave_ref":"weave:///ent/proj/call/c1","creator":null,"feedback_type":"wandb.reaction.1",
 "payload":{"emoji":"👍","scorer_tags":["👍"]},"annotation_ref":null,"runnable_ref":null,"call_ref":null,
 "scorer_tags":["👍"],"scorer_tag_reasons":{"👍":"Set by user"},"scorer_tag_confidences":{"👍":1.0},
 "scorer_ratings":{"helpful":0.75},"scorer_rating_reasons":{"helpful":"clear"},"scorer_rating_confidences":{"helpful":0.5},
 "span_agent_name":"agent","span_agent_version":"v2","span_status_code":"OK","span_conversation_id":"conv",
 "span_trace_id":"st","scorer_trace_id":"sc","queue_id":"q1","id":"fb-1"}`

func feedbackReq(t *testing.T, body string) FeedbackCreateReq {
	t.Helper()
	var req FeedbackCreateReq
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	return req
}

func idQuery(id string) json.RawMessage {
	return raw(`{"$expr":{"$eq":[{"$getField":"id"},{"$literal":"` + id + `"}]}}`)
}

// Every field the SDK sends is stored and read back; the client's id is kept.
func TestFeedbackWeaveFields(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s := newService(t, d)
		res, err := s.FeedbackCreate(ctx, feedbackReq(t, sdkFeedback), "ent")
		if err != nil {
			t.Fatal(err)
		}
		if res.ID != "fb-1" || res.WBUserID != "ent" {
			t.Fatalf("create = %+v", res)
		}
		fq, err := s.FeedbackQuery(ctx, FeedbackQueryReq{ProjectID: proj})
		if err != nil || len(fq.Result) != 1 || fq.TotalCount != 1 {
			t.Fatalf("query = %+v %v", fq, err)
		}
		got, _ := json.Marshal(fq.Result[0])
		for _, want := range []string{`"scorer_tags":["👍"]`, `"scorer_tag_reasons":{"👍":"Set by user"}`, `"scorer_tag_confidences":{"👍":1}`,
			`"scorer_ratings":{"helpful":0.75}`, `"scorer_rating_reasons":{"helpful":"clear"}`, `"scorer_rating_confidences":{"helpful":0.5}`,
			`"span_agent_name":"agent"`, `"span_agent_version":"v2"`, `"span_status_code":"OK"`, `"span_conversation_id":"conv"`,
			`"span_trace_id":"st"`, `"scorer_trace_id":"sc"`, `"queue_id":"q1"`, `"id":"fb-1"`, `"wb_user_id":"ent"`} {
			if !strings.Contains(string(got), want) {
				t.Errorf("feedback lacks %s: %s", want, got)
			}
		}
		// Defaults of the fields a minimal item leaves out, as Weave's.
		if _, err := s.FeedbackCreate(ctx, FeedbackCreateReq{ProjectID: proj, WeaveRef: "weave:///ent/proj/call/c2", FeedbackType: "wandb.note.1", Payload: raw(`{"note":"n"}`)}, "ent"); err != nil {
			t.Fatal(err)
		}
		fq, _ = s.FeedbackQuery(ctx, FeedbackQueryReq{ProjectID: proj, Query: raw(`{"$expr":{"$eq":[{"$getField":"feedback_type"},{"$literal":"wandb.note.1"}]}}`)})
		got, _ = json.Marshal(fq.Result)
		for _, want := range []string{`"scorer_tags":[]`, `"scorer_ratings":{}`, `"span_status_code":"UNSET"`, `"span_trace_id":""`, `"queue_id":null`} {
			if !strings.Contains(string(got), want) {
				t.Errorf("default feedback lacks %s: %s", want, got)
			}
		}
		// The new fields are queryable and sortable; total_count counts past the page.
		fq, err = s.FeedbackQuery(ctx, FeedbackQueryReq{ProjectID: proj, Query: raw(`{"$expr":{"$gt":[{"$getField":"scorer_ratings.helpful"},{"$literal":0.5}]}}`)})
		if err != nil || len(fq.Result) != 1 || fq.Result[0]["id"] != "fb-1" {
			t.Fatalf("query on scorer_ratings = %v %v", fq.Result, err)
		}
		one := 1
		fq, err = s.FeedbackQuery(ctx, FeedbackQueryReq{ProjectID: proj, Limit: &one, Fields: []string{"id", "span_status_code"},
			SortBy: []SortBy{{Field: "span_status_code", Direction: "desc"}}})
		if err != nil || len(fq.Result) != 1 || fq.TotalCount != 2 || fq.Result[0]["span_status_code"] != "UNSET" || len(fq.Result[0]) != 2 {
			t.Fatalf("page = %+v %v", fq, err)
		}
		if _, err := s.FeedbackQuery(ctx, FeedbackQueryReq{ProjectID: proj, Fields: []string{"nope"}}); status(t, err) != 400 {
			t.Fatal("unknown field in fields accepted")
		}
		// Replace keeps the id and takes the new fields.
		rep := FeedbackReplaceReq{FeedbackCreateReq: feedbackReq(t, strings.Replace(sdkFeedback, `"span_status_code":"OK"`, `"span_status_code":"ERROR"`, 1)), FeedbackID: "fb-1"}
		if _, err := s.FeedbackReplace(ctx, rep, "ent"); err != nil {
			t.Fatal(err)
		}
		fq, _ = s.FeedbackQuery(ctx, FeedbackQueryReq{ProjectID: proj, Query: idQuery("fb-1")})
		if len(fq.Result) != 1 || fq.Result[0]["span_status_code"] != "ERROR" {
			t.Fatalf("after replace = %v", fq.Result)
		}
		// Calls read their feedback with every field.
		if _, err := s.CallUpsertBatch(ctx, batch(start("c1", "t", "", "op", 1, ""), end("c1", 2, `{}`)), allow); err != nil {
			t.Fatal(err)
		}
		var call CallSchema
		err = s.CallsQuery(ctx, CallsQueryReq{ProjectID: proj, IncludeFeedback: true}, func(c CallSchema) error { call = c; return nil })
		if err != nil || !strings.Contains(string(call.Summary), `"scorer_tag_reasons":{"👍":"Set by user"}`) {
			t.Fatalf("include_feedback: %s %v", call.Summary, err)
		}
		// Purge.
		if err := s.FeedbackPurge(ctx, FeedbackPurgeReq{ProjectID: proj, Query: idQuery("fb-1")}); err != nil {
			t.Fatal(err)
		}
		if fq, _ = s.FeedbackQuery(ctx, FeedbackQueryReq{ProjectID: proj}); fq.TotalCount != 1 {
			t.Fatalf("after purge %d left", fq.TotalCount)
		}
	})
}

// /feedback/batch/create: one transaction, ids kept, a retry is a no-op, a reused id with
// other content is a 409, and every item's project is authorised.
func TestFeedbackBatchCreate(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s := newService(t, d)
		var req FeedbackBatchCreateReq
		for i := 0; i < 3; i++ {
			req.Batch = append(req.Batch, feedbackReq(t, strings.Replace(sdkFeedback, `"id":"fb-1"`, fmt.Sprintf(`"id":"b%d"`, i), 1)))
		}
		res, err := s.FeedbackBatchCreate(ctx, req, "ent", allow)
		if err != nil || len(res.Res) != 3 || res.Res[2].ID != "b2" {
			t.Fatalf("batch = %+v %v", res, err)
		}
		if _, err := s.FeedbackBatchCreate(ctx, req, "ent", allow); err != nil {
			t.Fatalf("retry of the same batch: %v", err)
		}
		fq, _ := s.FeedbackQuery(ctx, FeedbackQueryReq{ProjectID: proj})
		if fq.TotalCount != 3 {
			t.Fatalf("%d feedback rows after a retry, want 3", fq.TotalCount)
		}
		clash := req
		clash.Batch = []FeedbackCreateReq{feedbackReq(t, strings.Replace(sdkFeedback, `"id":"fb-1"`, `"id":"new"`, 1)), req.Batch[0]}
		clash.Batch[1].Payload = raw(`{"other":1}`)
		_, err = s.FeedbackBatchCreate(ctx, clash, "ent", allow)
		if e, ok := apierror.As(err); !ok || e.Status != 409 || e.Param != "id" {
			t.Fatalf("reused id: %v", err)
		}
		if fq, _ = s.FeedbackQuery(ctx, FeedbackQueryReq{ProjectID: proj, Query: idQuery("new")}); fq.TotalCount != 0 {
			t.Fatal("a refused batch wrote some of its items")
		}
		deny := func(p, param string) error {
			if p != proj {
				return apierror.Forbidden(param, "not yours")
			}
			return nil
		}
		other := req
		other.Batch = []FeedbackCreateReq{feedbackReq(t, strings.Replace(sdkFeedback, `"id":"fb-1"`, `"id":"x1"`, 1)), feedbackReq(t, strings.ReplaceAll(sdkFeedback, "ent/proj", "other/p"))}
		_, err = s.FeedbackBatchCreate(ctx, other, "ent", deny)
		if e, ok := apierror.As(err); !ok || e.Status != 403 || e.Param != "batch[1].project_id" {
			t.Fatalf("foreign item: %v", err)
		}
		if _, err := s.FeedbackBatchCreate(ctx, FeedbackBatchCreateReq{}, "ent", allow); status(t, err) != 400 {
			t.Fatal("empty batch accepted")
		}
		bad := FeedbackBatchCreateReq{Batch: []FeedbackCreateReq{req.Batch[0], {ProjectID: proj, WeaveRef: "nope", FeedbackType: "x"}}}
		if _, err := s.FeedbackBatchCreate(ctx, bad, "ent", allow); err == nil || !strings.Contains(err.Error(), "batch[1].weave_ref") {
			t.Fatalf("bad item: %v", err)
		}
	})
}

// A write keeps the fields Hone does not know, beside what it stored, and logs each field
// name once.
func TestUnknownFieldsKeptAndLoggedOnce(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		var logs bytes.Buffer
		s := newService(t, d)
		s.log = slog.New(slog.NewTextHandler(&logs, nil))
		body := `{"batch":[` + strings.Replace(start("u1", "t", "", "op", 1, ""), `"op_name"`, `"new_start_field":{"a":[1,2]},"op_name"`, 1) + `,` +
			strings.Replace(end("u1", 2, `{}`), `"summary"`, `"new_end_field":true,"summary"`, 1) + `],"batch_hint":"x"}`
		for i := 0; i < 2; i++ {
			req, unknown, err := DecodeCallBatch([]byte(body))
			if err != nil || len(unknown) != 3 {
				t.Fatalf("decode: %v %+v", err, unknown)
			}
			ctx := WithUnknownFields(context.Background(), "/call/upsert_batch", unknown)
			if _, err := s.CallUpsertBatch(ctx, req, allow); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := s.ExtraFields(context.Background(), proj, "call:u1")
		if err != nil || len(rows) != 4 {
			t.Fatalf("kept = %+v %v", rows, err)
		}
		if string(rows[0].Fields) != `{"req.start.new_start_field":{"a":[1,2]}}` || string(rows[1].Fields) != `{"req.end.new_end_field":true}` || rows[0].Route != "/call/upsert_batch" {
			t.Fatalf("kept fields = %s, %s", rows[0].Fields, rows[1].Fields)
		}
		whole, _ := s.ExtraFields(context.Background(), proj, "")
		if len(whole) != 2 || string(whole[0].Fields) != `{"batch_hint":"x"}` {
			t.Fatalf("request-level fields = %+v", whole)
		}
		for _, f := range []string{"batch[].req.start.new_start_field", "batch[].req.end.new_end_field", "batch_hint"} {
			if n := strings.Count(logs.String(), "field="+f+"\n"); n != 1 {
				t.Errorf("%s logged %d times:\n%s", f, n, logs.String())
			}
		}
		// Feedback, objects, tables and costs keep theirs too.
		ctx := WithUnknownFields(context.Background(), "/feedback/create", []UnknownField{{Path: "new_feedback_field", Value: raw(`[1]`)}})
		if _, err := s.FeedbackCreate(ctx, feedbackReq(t, sdkFeedback), "ent"); err != nil {
			t.Fatal(err)
		}
		if rows, _ := s.ExtraFields(ctx, proj, "feedback:fb-1"); len(rows) != 1 || string(rows[0].Fields) != `{"new_feedback_field":[1]}` {
			t.Fatalf("feedback kept %+v", rows)
		}
		ctx = WithUnknownFields(context.Background(), "/obj/create", []UnknownField{{Path: "obj.new", Value: raw(`1`)}})
		o, err := s.ObjCreate(ctx, ObjCreateReq{Obj: ObjSchemaForInsert{ProjectID: proj, ObjectID: "o", Val: raw(`{"a":1}`)}}, "ent")
		if err != nil {
			t.Fatal(err)
		}
		if rows, _ := s.ExtraFields(ctx, proj, "object:o:"+o.Digest); len(rows) != 1 || string(rows[0].Fields) != `{"obj.new":1}` {
			t.Fatalf("object kept %+v", rows)
		}
		ctx = WithUnknownFields(context.Background(), "/cost/create", []UnknownField{{Path: "costs.m1.new_cost", Value: raw(`2`)}})
		cr, err := s.CostCreate(ctx, CostCreateReq{ProjectID: proj, Costs: map[string]CostCreateInput{"m1": {PromptTokenCost: 1}}}, "ent")
		if err != nil {
			t.Fatal(err)
		}
		if rows, _ := s.ExtraFields(ctx, proj, "cost:"+cr.IDs[0][0]); len(rows) != 1 || string(rows[0].Fields) != `{"new_cost":2}` {
			t.Fatalf("cost kept %+v", rows)
		}
	})
}

// The calls query fields of weave 0.54: columns, expand_columns,
// return_expanded_column_values, include_usernames, latest_only, $lt/$lte, and the
// feedback.[type] fields the SDK's scored_by filters on.
func TestCallsQueryWeaveFields(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s := newService(t, d)
		o, err := s.ObjCreate(ctx, ObjCreateReq{Obj: ObjSchemaForInsert{ProjectID: proj, ObjectID: "ex", Val: raw(`{"q":"1+1","a":2}`)}}, "ent")
		if err != nil {
			t.Fatal(err)
		}
		ref := "weave:///ent/proj/object/ex:" + o.Digest
		withUser := func(item string) string {
			return strings.Replace(item, `"op_name"`, `"wb_user_id":"ent","op_name"`, 1)
		}
		_, err = s.CallUpsertBatch(ctx, batch(
			withUser(strings.Replace(start("c1", "t", "", "predict", 1, ""), `"inputs":{"n":1}`, `"inputs":{"example":"`+ref+`","n":1}`, 1)),
			end("c1", 2, `{}`),
			withUser(start("c2", "t", "", "predict", 3, "")), end("c2", 4, `{}`),
		), allow)
		if err != nil {
			t.Fatal(err)
		}
		get := func(req CallsQueryReq) []CallSchema {
			t.Helper()
			req.ProjectID = proj
			var out []CallSchema
			if err := s.CallsQuery(ctx, req, func(c CallSchema) error { out = append(out, c); return nil }); err != nil {
				t.Fatal(err)
			}
			return out
		}
		// columns: the others come back empty, the required ones stay.
		cs := get(CallsQueryReq{Columns: []string{"inputs.n", "ended_at"}})
		if len(cs) != 2 || string(cs[0].Inputs) == "{}" || cs[0].EndedAt == nil || string(cs[0].Output) != "null" || string(cs[0].Summary) != "{}" ||
			cs[0].ID != "c1" || cs[0].TraceID != "t" || cs[0].OpName != "predict" || cs[0].StartedAt == nil || cs[0].WBUserID != nil {
			t.Fatalf("columns = %+v", cs[0])
		}
		if err := s.CallsQuery(ctx, CallsQueryReq{ProjectID: proj, Columns: []string{"bogus"}}, func(CallSchema) error { return nil }); status(t, err) != 400 {
			t.Fatal("unknown column accepted")
		}
		// expand_columns replaces the ref by its value, unless return_expanded_column_values is false.
		cs = get(CallsQueryReq{ExpandColumns: []string{"inputs.example"}})
		if !strings.Contains(string(cs[0].Inputs), `"example":{"q":"1+1","a":2}`) {
			t.Fatalf("expanded inputs = %s", cs[0].Inputs)
		}
		no := false
		cs = get(CallsQueryReq{ExpandColumns: []string{"inputs.example"}, ReturnExpandedColumnValues: &no})
		if !strings.Contains(string(cs[0].Inputs), `"example":"`+ref+`"`) {
			t.Fatalf("unexpanded inputs = %s", cs[0].Inputs)
		}
		err = s.CallsQuery(ctx, CallsQueryReq{ProjectID: proj, ExpandColumns: []string{"inputs.example"},
			Query: raw(`{"$expr":{"$eq":[{"$getField":"inputs.example.a"},{"$literal":2}]}}`)}, func(CallSchema) error { return nil })
		if e, ok := apierror.As(err); !ok || e.Status != 400 || e.Param != "expand_columns[0]" {
			t.Fatalf("filter through an expanded ref: %v", err)
		}
		// include_usernames and latest_only.
		cs = get(CallsQueryReq{IncludeUsernames: true, LatestOnly: true})
		if len(cs) != 2 || cs[0].WBUsername == nil || *cs[0].WBUsername != "ent" {
			t.Fatalf("usernames = %+v", cs)
		}
		if cs = get(CallsQueryReq{}); cs[0].WBUsername != nil {
			t.Fatal("wb_username without include_usernames")
		}
		// $lt and $lte.
		if cs = get(CallsQueryReq{Query: raw(`{"$expr":{"$lt":[{"$getField":"inputs.n"},{"$literal":3}]}}`)}); len(cs) != 1 || cs[0].ID != "c1" {
			t.Fatalf("$lt = %d calls", len(cs))
		}
		if cs = get(CallsQueryReq{Query: raw(`{"$expr":{"$lte":[{"$getField":"inputs.n"},{"$literal":3}]}}`)}); len(cs) != 2 {
			t.Fatalf("$lte = %d calls", len(cs))
		}
		// scored_by: the SDK's query on the call's runnable feedback.
		fb := FeedbackCreateReq{ProjectID: proj, WeaveRef: "weave:///ent/proj/call/c2", FeedbackType: "wandb.runnable.exact",
			Payload: raw(`{"output":{"correct":true,"score":0.9}}`), RunnableRef: ptr("weave:///ent/proj/op/exact:abc")}
		if _, err := s.FeedbackCreate(ctx, fb, "ent"); err != nil {
			t.Fatal(err)
		}
		exists := `{"$expr":{"$and":[{"$not":[{"$eq":[{"$getField":"feedback.[wandb.runnable.exact].payload.output"},{"$literal":""}]}]}]}}`
		if cs = get(CallsQueryReq{Query: raw(exists)}); len(cs) != 1 || cs[0].ID != "c2" {
			t.Fatalf("scored_by (exists) = %d calls", len(cs))
		}
		byRef := `{"$expr":{"$and":[{"$eq":[{"$getField":"feedback.[wandb.runnable.exact].runnable_ref"},{"$literal":"weave:///ent/proj/op/exact:abc"}]}]}}`
		if cs = get(CallsQueryReq{Query: raw(byRef)}); len(cs) != 1 || cs[0].ID != "c2" {
			t.Fatalf("scored_by (ref) = %d calls", len(cs))
		}
		numeric := `{"$expr":{"$gt":[{"$getField":"feedback.[*].payload.output.score"},{"$literal":0.5}]}}`
		if cs = get(CallsQueryReq{Query: raw(numeric)}); len(cs) != 1 || cs[0].ID != "c2" {
			t.Fatalf("numeric feedback field = %d calls (a call without feedback must not match)", len(cs))
		}
		st, err := s.CallsQueryStats(ctx, CallsQueryStatsReq{ProjectID: proj, Query: raw(exists)})
		if err != nil || st.Count != 1 {
			t.Fatalf("stats = %+v %v", st, err)
		}
		if err := s.CallsQuery(ctx, CallsQueryReq{ProjectID: proj, Query: raw(`{"$expr":{"$eq":[{"$getField":"feedback.[x]"},{"$literal":""}]}}`)},
			func(CallSchema) error { return nil }); status(t, err) != 400 {
			t.Fatal("feedback field without a sub-field accepted")
		}
	})
}

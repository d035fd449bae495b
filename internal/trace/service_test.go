package trace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

const proj = "ent/proj"

func newService(t testing.TB, d *db.DB) *Service {
	t.Helper()
	st := NewSQLStore(d)
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := NewService(st)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	return s
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func status(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 200
	}
	e, ok := apierror.As(err)
	if !ok {
		t.Fatalf("not an API error: %v", err)
	}
	return e.Status
}

func ptr[T any](v T) *T { return &v }

func TestObjectVersions(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s := newService(t, d)
		mk := func(id, val string) string {
			t.Helper()
			res, err := s.ObjCreate(ctx, ObjCreateReq{Obj: ObjSchemaForInsert{ProjectID: proj, ObjectID: id, Val: raw(val)}}, "u")
			if err != nil {
				t.Fatal(err)
			}
			return res.Digest
		}
		model := `{"_type":"MyModel","_class_name":"MyModel","_bases":["Model","Object","BaseModel"],"p":1}`
		d1 := mk("m", model)
		if again := mk("m", model); again != d1 {
			t.Fatal("same value, different digest")
		}
		d2 := mk("m", `{"_type":"MyModel","_class_name":"MyModel","_bases":["Model","Object","BaseModel"],"p":2}`)
		opVal := `{"_type":"CustomWeaveType","weave_type":{"type":"Op"},"files":{"obj.py":"abc"},"load_op":"NO_LOAD_OP"}`
		mk("my_op", opVal)
		mk("plain", `[1, 2, 3]`)

		all, err := s.ObjsQuery(ctx, ObjQueryReq{ProjectID: proj})
		if err != nil || len(all.Objs) != 4 {
			t.Fatalf("all = %d, %v", len(all.Objs), err)
		}
		byDigest := map[string]ObjSchema{}
		for _, o := range all.Objs {
			byDigest[o.Digest] = o
		}
		v1, v2 := byDigest[d1], byDigest[d2]
		if v1.VersionIndex != 0 || v2.VersionIndex != 1 || v1.IsLatest != 0 || v2.IsLatest != 1 {
			t.Fatalf("versions: %+v %+v", v1, v2)
		}
		if *v2.BaseObjectClass != "Model" || *v2.LeafObjectClass != "MyModel" || v2.Kind != "object" {
			t.Fatalf("classes: %v %v %v", *v2.BaseObjectClass, *v2.LeafObjectClass, v2.Kind)
		}
		latest, _ := s.ObjsQuery(ctx, ObjQueryReq{ProjectID: proj, Filter: &ObjectVersionFilter{LatestOnly: ptr(true)}})
		if len(latest.Objs) != 3 {
			t.Fatalf("latest_only = %d", len(latest.Objs))
		}
		ops, _ := s.ObjsQuery(ctx, ObjQueryReq{ProjectID: proj, Filter: &ObjectVersionFilter{IsOp: ptr(true)}})
		if len(ops.Objs) != 1 || ops.Objs[0].Kind != "op" {
			t.Fatalf("is_op = %+v", ops.Objs)
		}
		models, _ := s.ObjsQuery(ctx, ObjQueryReq{ProjectID: proj, Filter: &ObjectVersionFilter{BaseObjectClasses: []string{"Model"}}})
		if len(models.Objs) != 2 {
			t.Fatalf("base classes = %d", len(models.Objs))
		}
		noModels, _ := s.ObjsQuery(ctx, ObjQueryReq{ProjectID: proj, Filter: &ObjectVersionFilter{ExcludeBaseObjectClasses: []string{"Model"}}})
		if len(noModels.Objs) != 0 { // NULL classes drop too, as in Weave
			t.Fatalf("exclude = %d", len(noModels.Objs))
		}
		leaf, _ := s.ObjsQuery(ctx, ObjQueryReq{ProjectID: proj, Filter: &ObjectVersionFilter{LeafObjectClasses: []string{"MyModel"}, LatestOnly: ptr(true)}})
		if len(leaf.Objs) != 1 || leaf.Objs[0].Digest != d2 {
			t.Fatalf("leaf = %+v", leaf.Objs)
		}
		// Sorting, paging, metadata_only, storage size.
		sorted, _ := s.ObjsQuery(ctx, ObjQueryReq{ProjectID: proj, SortBy: []SortBy{{Field: "object_id", Direction: "desc"}}, Limit: ptr(2), Offset: ptr(1),
			MetadataOnly: ptr(true), IncludeStorageSize: ptr(true)})
		if len(sorted.Objs) != 2 || sorted.Objs[0].ObjectID != "my_op" || string(sorted.Objs[0].Val) != "{}" || *sorted.Objs[0].SizeBytes != int64(len(`{"_type": "CustomWeaveType", "weave_type": {"type": "Op"}, "files": {"obj.py": "abc"}, "load_op": "NO_LOAD_OP"}`)) {
			t.Fatalf("sorted page = %+v", sorted.Objs)
		}
		for _, bad := range []ObjQueryReq{
			{ProjectID: proj, SortBy: []SortBy{{Field: "digest"}}},
			{ProjectID: proj, SortBy: []SortBy{{Field: "object_id", Direction: "up"}}},
			{ProjectID: proj, Limit: ptr(-1)},
			{ProjectID: proj, Offset: ptr(-1)},
		} {
			if _, err := s.ObjsQuery(ctx, bad); status(t, err) != 400 {
				t.Errorf("%+v accepted: %v", bad, err)
			}
		}

		// Read by digest, latest, vN, alias.
		for sel, want := range map[string]string{d1: d1, "latest": d2, "v0": d1, "v1": d2} {
			r, err := s.ObjRead(ctx, ObjReadReq{ProjectID: proj, ObjectID: "m", Digest: sel})
			if err != nil || r.Obj.Digest != want {
				t.Errorf("read %s = %v %v", sel, r.Obj.Digest, err)
			}
		}
		if err := s.SetAliases(ctx, proj, "m", d1, []string{"prod"}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddTags(ctx, proj, "m", d1, []string{"good", "reviewed"}); err != nil {
			t.Fatal(err)
		}
		r, err := s.ObjRead(ctx, ObjReadReq{ProjectID: proj, ObjectID: "m", Digest: "prod", IncludeTagsAndAliases: true})
		if err != nil || r.Obj.Digest != d1 || strings.Join(*r.Obj.Tags, ",") != "good,reviewed" || strings.Join(*r.Obj.Aliases, ",") != "prod" {
			t.Fatalf("alias read = %+v %v", r.Obj, err)
		}
		tagged, _ := s.ObjsQuery(ctx, ObjQueryReq{ProjectID: proj, Filter: &ObjectVersionFilter{Tags: []string{"good"}}})
		if len(tagged.Objs) != 1 {
			t.Fatalf("tags filter = %d", len(tagged.Objs))
		}
		aliased, _ := s.ObjsQuery(ctx, ObjQueryReq{ProjectID: proj, Filter: &ObjectVersionFilter{Aliases: []string{"latest", "prod"}, ObjectIDs: []string{"m"}}})
		if len(aliased.Objs) != 2 {
			t.Fatalf("aliases filter = %d", len(aliased.Objs))
		}
		if err := s.SetAliases(ctx, proj, "m", d1, []string{"latest"}); status(t, err) != 400 {
			t.Fatal("reserved alias accepted")
		}
		if _, err := s.ObjRead(ctx, ObjReadReq{ProjectID: proj, ObjectID: "m", Digest: "nope"}); status(t, err) != 404 {
			t.Fatal("unknown alias found")
		}
		// Delete the latest: the previous version becomes latest; reading it names the deletion.
		del, err := s.ObjDelete(ctx, ObjDeleteReq{ProjectID: proj, ObjectID: "m", Digests: []string{d2}})
		if err != nil || del.NumDeleted != 1 {
			t.Fatalf("delete = %+v %v", del, err)
		}
		_, err = s.ObjRead(ctx, ObjReadReq{ProjectID: proj, ObjectID: "m", Digest: d2})
		if status(t, err) != 404 || !strings.Contains(err.Error(), "was deleted at") {
			t.Fatalf("read deleted = %v", err)
		}
		if r, _ := s.ObjRead(ctx, ObjReadReq{ProjectID: proj, ObjectID: "m", Digest: "latest"}); r.Obj.Digest != d1 {
			t.Fatalf("latest after delete = %s", r.Obj.Digest)
		}
		if _, err := s.ObjDelete(ctx, ObjDeleteReq{ProjectID: proj, ObjectID: "m", Digests: []string{d2}}); status(t, err) != 404 {
			t.Fatal("deleting twice succeeded")
		}
		// Re-creating a deleted digest brings it back as a new version.
		if mk("m", `{"_type":"MyModel","_class_name":"MyModel","_bases":["Model","Object","BaseModel"],"p":2}`) != d2 {
			t.Fatal("digest changed")
		}
		if r, _ := s.ObjRead(ctx, ObjReadReq{ProjectID: proj, ObjectID: "m", Digest: "latest"}); r.Obj.Digest != d2 || r.Obj.VersionIndex != 2 {
			t.Fatalf("recreated = %+v", r.Obj)
		}
		// Isolation: another project sees nothing.
		other, _ := s.ObjsQuery(ctx, ObjQueryReq{ProjectID: "ent/other"})
		if len(other.Objs) != 0 {
			t.Fatal("project leak")
		}
		// Bad input.
		for _, bad := range []ObjSchemaForInsert{
			{ProjectID: proj, ObjectID: "", Val: raw(`1`)},
			{ProjectID: proj, ObjectID: "a/b", Val: raw(`1`)},
			{ProjectID: proj, ObjectID: "x"},
			{ProjectID: proj, ObjectID: "x", Val: raw(strings.Repeat("[", 300) + strings.Repeat("]", 300))},
		} {
			if _, err := s.ObjCreate(ctx, ObjCreateReq{Obj: bad}, ""); status(t, err) != 400 {
				t.Errorf("%+v accepted: %v", bad, err)
			}
		}
	})
}

func TestTables(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s := newService(t, d)
		rows := []json.RawMessage{raw(`{"a":{"b":3},"n":"x"}`), raw(`{"a":{"b":1}}`), raw(`{"a":{"b":"str"}}`), raw(`{"a":{"b":1}}`), raw(`{"z":1}`), raw(`{"a":{"b":2.5}}`)}
		res, err := s.TableCreate(ctx, TableCreateReq{Table: TableSchemaForInsert{ProjectID: proj, Rows: rows}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Digest != TableDigest(res.RowDigests) || len(res.RowDigests) != 6 || res.RowDigests[1] != res.RowDigests[3] {
			t.Fatalf("create = %+v", res)
		}
		q := func(req TableQueryReq) []TableRowSchema {
			t.Helper()
			req.ProjectID, req.Digest = proj, res.Digest
			out, err := s.TableQuery(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			return out.Rows
		}
		idx := func(rs []TableRowSchema) string {
			var b []string
			for _, r := range rs {
				b = append(b, fmt.Sprint(r.OriginalIndex))
			}
			return strings.Join(b, ",")
		}
		if got := idx(q(TableQueryReq{})); got != "0,1,2,3,4,5" {
			t.Fatalf("insertion order = %s", got)
		}
		if got := idx(q(TableQueryReq{Limit: ptr(2), Offset: ptr(3)})); got != "3,4" {
			t.Fatalf("page = %s", got)
		}
		// Duplicate rows keep both positions; the filter finds both.
		if got := idx(q(TableQueryReq{Filter: &TableRowFilter{RowDigests: []string{res.RowDigests[1]}}})); got != "1,3" {
			t.Fatalf("filter = %s", got)
		}
		// Sorted by a dotted path: numbers ascending, then text; missing values last.
		asc := idx(q(TableQueryReq{SortBy: []SortBy{{Field: "a.b", Order: "asc"}}}))
		desc := idx(q(TableQueryReq{SortBy: []SortBy{{Field: "a.b", Direction: "desc"}}}))
		if asc != "1,3,5,0,2,4" {
			t.Fatalf("asc = %s", asc)
		}
		if !strings.HasSuffix(desc, ",4") || !strings.HasPrefix(desc, "2,0,5,") {
			t.Fatalf("desc = %s", desc)
		}
		// The SQL sort (used with a row filter) and the cached Go sort agree on mixed types.
		for _, dir := range []string{"asc", "desc"} {
			viaSQL := idx(q(TableQueryReq{SortBy: []SortBy{{Field: "a.b", Order: dir}}, Filter: &TableRowFilter{RowDigests: res.RowDigests}}))
			viaGo := idx(q(TableQueryReq{SortBy: []SortBy{{Field: "a.b", Order: dir}}}))
			if viaSQL != viaGo {
				t.Fatalf("%s: SQL order %s, cached order %s", dir, viaSQL, viaGo)
			}
		}
		// A sorted page comes from the cached order.
		if got := idx(q(TableQueryReq{SortBy: []SortBy{{Field: "a.b", Order: "asc"}}, Offset: ptr(2), Limit: ptr(2)})); got != "5,0" {
			t.Fatalf("sorted page = %s", got)
		}
		for _, bad := range []TableQueryReq{
			{ProjectID: proj, Digest: res.Digest, SortBy: []SortBy{{Field: "a..b"}}},
			{ProjectID: proj, Digest: res.Digest, SortBy: []SortBy{{Field: ".a"}}},
			{ProjectID: proj, Digest: res.Digest, SortBy: []SortBy{{Field: "a", Order: "sideways"}}},
			{ProjectID: proj, Digest: res.Digest, Limit: ptr(-2)},
		} {
			if _, err := s.TableQuery(ctx, bad); status(t, err) != 400 {
				t.Errorf("%+v accepted", bad)
			}
		}
		if _, err := s.TableQuery(ctx, TableQueryReq{ProjectID: proj, Digest: strings.Repeat("0", 64)}); status(t, err) != 404 {
			t.Fatal("unknown table found")
		}
		if _, err := s.TableQuery(ctx, TableQueryReq{ProjectID: "ent/other", Digest: res.Digest}); status(t, err) != 404 {
			t.Fatal("table visible from another project")
		}
		st, _ := s.TableQueryStats(ctx, TableQueryStatsReq{ProjectID: proj, Digest: res.Digest})
		if st.Count != 6 {
			t.Fatalf("stats = %d", st.Count)
		}
		// Updates: append, pop, insert.
		up, err := s.TableUpdate(ctx, TableUpdateReq{ProjectID: proj, BaseDigest: res.Digest, Updates: []TableUpdateSpec{
			{Append: &struct {
				Row json.RawMessage `json:"row"`
			}{Row: raw(`{"new":1}`)}},
			{Pop: &struct {
				Index *int `json:"index"`
			}{Index: ptr(0)}},
			{Insert: &struct {
				Index *int            `json:"index"`
				Row   json.RawMessage `json:"row"`
			}{Index: ptr(1), Row: raw(`{"ins":2}`)}},
		}})
		if err != nil || len(up.UpdatedRowDigests) != 2 {
			t.Fatalf("update = %+v %v", up, err)
		}
		got, _ := s.TableQuery(ctx, TableQueryReq{ProjectID: proj, Digest: up.Digest})
		if len(got.Rows) != 7 || string(got.Rows[1].Val) != `{"ins":2}` || string(got.Rows[6].Val) != `{"new":1}` || string(got.Rows[0].Val) != `{"a":{"b":1}}` {
			t.Fatalf("updated table = %+v", got.Rows)
		}
		_, err = s.TableUpdate(ctx, TableUpdateReq{ProjectID: proj, BaseDigest: res.Digest, Updates: []TableUpdateSpec{{Pop: &struct {
			Index *int `json:"index"`
		}{Index: ptr(99)}}}})
		if status(t, err) != 400 || !strings.Contains(err.Error(), "updates[0].pop.index") {
			t.Fatalf("bad pop: %v", err)
		}
		// From digests.
		fd, err := s.TableCreateFromDigests(ctx, TableCreateFromDigestsReq{ProjectID: proj, RowDigests: res.RowDigests[:2]})
		if err != nil || fd.Digest != TableDigest(res.RowDigests[:2]) {
			t.Fatalf("from digests = %v %v", fd, err)
		}
		if _, err := s.TableCreateFromDigests(ctx, TableCreateFromDigestsReq{ProjectID: proj, RowDigests: []string{"nope"}}); status(t, err) != 404 {
			t.Fatal("unknown row digest accepted")
		}
		// Empty table.
		empty, err := s.TableCreate(ctx, TableCreateReq{Table: TableSchemaForInsert{ProjectID: proj, Rows: []json.RawMessage{}}})
		if err != nil || empty.Digest != TableDigest(nil) {
			t.Fatalf("empty = %v %v", empty, err)
		}
	})
}

func batch(items ...string) CallCreateBatchReq {
	var req CallCreateBatchReq
	_ = json.Unmarshal([]byte(`{"batch":[`+strings.Join(items, ",")+`]}`), &req)
	return req
}

func start(id, traceID, parent, op string, sec int, extra string) string {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return fmt.Sprintf(`{"mode":"start","req":{"start":{"project_id":%q,"id":%q,"trace_id":%q,"parent_id":%s,"op_name":%q,"started_at":"2026-01-01T00:00:%02dZ","attributes":{%s},"inputs":{"n":%d}}}}`,
		proj, id, traceID, p, op, sec, extra, sec)
}

func end(id string, sec int, summary string) string {
	return fmt.Sprintf(`{"mode":"end","req":{"end":{"project_id":%q,"id":%q,"ended_at":"2026-01-01T00:00:%02dZ","summary":%s,"output":{"ok":true}}}}`,
		proj, id, sec, summary)
}

func allow(string, string) error { return nil }

func TestCallsAndUsage(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s := newService(t, d)
		u := func(p, c int) string {
			return fmt.Sprintf(`{"usage":{"gpt-4o":{"prompt_tokens":%d,"completion_tokens":%d,"requests":1}}}`, p, c)
		}
		// A raw (REST) trace: root -> a -> b, root -> c; usage on a, b, c.
		_, err := s.CallUpsertBatch(ctx, batch(
			end("b", 5, u(1, 2)), // an end before its start is fine
			start("root", "t1", "", "root_op", 1, ""),
			start("a", "t1", "root", "llm", 2, ""),
			start("b", "t1", "a", "llm", 3, ""),
			start("c", "t1", "root", "llm", 4, ""),
			end("a", 6, u(10, 20)),
			end("c", 7, `{"usage":{"claude-3-5-sonnet-20241022":{"input_tokens":100,"output_tokens":50}}}`),
		), allow)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.TraceUsage(ctx, TraceUsageReq{ProjectID: proj, Filter: &CallsFilter{TraceIDs: []string{"t1"}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.CallUsage["root"]["gpt-4o"]; got == nil || got.PromptTokens != 11 || got.CompletionTokens != 22 || got.TotalTokens != 33 || got.Requests != 2 {
			t.Fatalf("root gpt-4o = %+v", got)
		}
		if got := res.CallUsage["root"]["claude-3-5-sonnet-20241022"]; got == nil || got.PromptTokens != 100 || got.TotalTokens != 150 {
			t.Fatalf("root claude = %+v", got)
		}
		if got := res.CallUsage["a"]["gpt-4o"]; got.PromptTokens != 11 {
			t.Fatalf("a = %+v", got)
		}
		if len(res.CallUsage["b"]) != 1 || len(res.CallUsage) != 4 {
			t.Fatalf("call_usage = %v", res.CallUsage)
		}
		if strings.Join(res.UnfinishedCallIDs, ",") != "root" {
			t.Fatalf("unfinished = %v", res.UnfinishedCallIDs)
		}
		// Costs: the default price of gpt-4o, then a project price that wins.
		res, _ = s.TraceUsage(ctx, TraceUsageReq{ProjectID: proj, Filter: &CallsFilter{CallIDs: []string{"b"}}, IncludeCosts: true})
		if c := res.CallUsage["b"]["gpt-4o"].PromptTokensTotalCost; c == nil || *c != 1*2.5e-6 {
			t.Fatalf("default cost = %v", c)
		}
		if _, err := s.CostCreate(ctx, CostCreateReq{ProjectID: proj, Costs: map[string]CostCreateInput{"gpt-4o": {PromptTokenCost: 1, CompletionTokenCost: 2,
			EffectiveDate: ptr("2025-01-01T00:00:00Z")}}}, "u"); err != nil {
			t.Fatal(err)
		}
		res, _ = s.TraceUsage(ctx, TraceUsageReq{ProjectID: proj, Filter: &CallsFilter{CallIDs: []string{"b"}}, IncludeCosts: true})
		if c := res.CallUsage["b"]["gpt-4o"]; *c.PromptTokensTotalCost != 1 || *c.CompletionTokensTotalCost != 4 {
			t.Fatalf("project cost = %+v", c)
		}
		costs, _ := s.CostQuery(ctx, CostQueryReq{ProjectID: proj, Query: raw(`{"$expr":{"$eq":[{"$getField":"llm_id"},{"$literal":"gpt-4o"}]}}`)})
		if len(costs.Results) != 2 {
			t.Fatalf("cost query = %d", len(costs.Results))
		}
		if err := s.CostPurge(ctx, CostPurgeReq{ProjectID: proj, Query: raw(`{"$expr":{"$eq":[{"$getField":"llm_id"},{"$literal":"gpt-4o"}]}}`)}); err != nil {
			t.Fatal(err)
		}
		costs, _ = s.CostQuery(ctx, CostQueryReq{ProjectID: proj, Query: raw(`{"$expr":{"$eq":[{"$getField":"llm_id"},{"$literal":"gpt-4o"}]}}`)})
		if len(costs.Results) != 1 || costs.Results[0]["pricing_level"] != "default" {
			t.Fatalf("after purge = %v", costs.Results)
		}

		// The limit is never silently applied.
		if _, err := s.TraceUsage(ctx, TraceUsageReq{ProjectID: proj, Limit: ptr(3)}); status(t, err) != 400 {
			t.Fatalf("over limit: %v", err)
		}
		// /calls/usage: whole trace under the requested root.
		cu, err := s.CallsUsage(ctx, CallsUsageReq{ProjectID: proj, CallIDs: []string{"a", "missing"}})
		if err != nil || cu.CallUsage["a"]["gpt-4o"].PromptTokens != 11 || len(cu.CallUsage["missing"]) != 0 {
			t.Fatalf("calls usage = %+v %v", cu, err)
		}

		// An SDK-written trace (the SDK already rolled b into a, and a into root): no double counting.
		sdk := `"weave":{"source":"js-sdk","client_version":"0.11.1"}`
		_, err = s.CallUpsertBatch(ctx, batch(
			start("sroot", "t2", "", "root_op", 1, sdk),
			start("sa", "t2", "sroot", "llm", 2, sdk),
			start("sb", "t2", "sa", "llm", 3, sdk),
			end("sb", 4, u(1, 2)),
			end("sa", 5, u(11, 22)),    // own 10/20 + child 1/2
			end("sroot", 6, u(11, 22)), // children only
		), allow)
		if err != nil {
			t.Fatal(err)
		}
		res, _ = s.TraceUsage(ctx, TraceUsageReq{ProjectID: proj, Filter: &CallsFilter{TraceIDs: []string{"t2"}}})
		for id, want := range map[string]int64{"sroot": 11, "sa": 11, "sb": 1} {
			if got := res.CallUsage[id]["gpt-4o"].PromptTokens; got != want {
				t.Errorf("sdk %s = %d, want %d", id, got, want)
			}
		}

		// Queries over calls.
		var ids []string
		collect := func(req CallsQueryReq) string {
			ids = nil
			req.ProjectID = proj
			if err := s.CallsQuery(ctx, req, func(c CallSchema) error { ids = append(ids, c.ID); return nil }); err != nil {
				t.Fatal(err)
			}
			return strings.Join(ids, ",")
		}
		if got := collect(CallsQueryReq{Filter: &CallsFilter{TraceIDs: []string{"t1"}}}); got != "root,a,b,c" {
			t.Fatalf("by start time = %s", got)
		}
		if got := collect(CallsQueryReq{Filter: &CallsFilter{TraceRootsOnly: ptr(true)}}); got != "root,sroot" {
			t.Fatalf("roots = %s", got)
		}
		if got := collect(CallsQueryReq{Query: raw(`{"$expr":{"$and":[{"$gt":[{"$getField":"inputs.n"},{"$literal":2}]},{"$eq":[{"$getField":"summary.weave.status"},{"$literal":"success"}]}]}}`)}); got != "b,sb,c" {
			t.Fatalf("query = %s", got)
		}
		if got := collect(CallsQueryReq{Query: raw(`{"$expr":{"$contains":{"input":{"$getField":"op_name"},"substr":{"$literal":"ROOT"},"case_insensitive":true}}}`)}); got != "root,sroot" {
			t.Fatalf("contains = %s", got)
		}
		if got := collect(CallsQueryReq{Query: raw(`{"$expr":{"$in":[{"$getField":"id"},[{"$literal":"c"},{"$literal":"a"}]]}}`), SortBy: []SortBy{{Field: "id", Direction: "desc"}}}); got != "c,a" {
			t.Fatalf("in/sort = %s", got)
		}
		if got := collect(CallsQueryReq{Query: raw(`{"$expr":{"$not":[{"$gte":[{"$convert":{"input":{"$getField":"inputs.n"},"to":"double"}},{"$literal":2}]}]}}`)}); got != "root,sroot" {
			t.Fatalf("not/convert = %s", got)
		}
		if got := collect(CallsQueryReq{SortBy: []SortBy{{Field: "summary.weave.latency_ms", Direction: "desc"}}, Limit: ptr(1)}); got != "sroot" {
			t.Fatalf("latency sort = %s", got)
		}
		if got := collect(CallsQueryReq{Filter: &CallsFilter{OpNames: []string{"root_op"}}}); got != "root,sroot" {
			t.Fatalf("op names = %s", got)
		}
		if _, err := s.CallsQueryStats(ctx, CallsQueryStatsReq{ProjectID: proj, Query: raw(`{"$expr":{"$eq":[{"$getField":"nope"},{"$literal":1}]}}`)}); status(t, err) != 400 {
			t.Fatal("unknown field accepted")
		}
		st, _ := s.CallsQueryStats(ctx, CallsQueryStatsReq{ProjectID: proj})
		if st.Count != 7 {
			t.Fatalf("count = %d", st.Count)
		}
		// Read, update, delete with descendants.
		rd, _ := s.CallRead(ctx, CallReadReq{ProjectID: proj, ID: "a"})
		if rd.Call == nil || !strings.Contains(string(rd.Call.Summary), `"status":"success"`) || !strings.Contains(string(rd.Call.Output), "ok") {
			t.Fatalf("read = %+v", rd.Call)
		}
		if err := s.CallUpdate(ctx, CallUpdateReq{ProjectID: proj, CallID: "a", DisplayName: ptr("renamed")}); err != nil {
			t.Fatal(err)
		}
		rd, _ = s.CallRead(ctx, CallReadReq{ProjectID: proj, ID: "a"})
		if *rd.Call.DisplayName != "renamed" || !strings.Contains(string(rd.Call.Summary), `"trace_name":"renamed"`) {
			t.Fatalf("renamed = %+v", rd.Call)
		}
		del, err := s.CallsDelete(ctx, CallsDeleteReq{ProjectID: proj, CallIDs: []string{"a"}})
		if err != nil || del.NumDeleted != 2 {
			t.Fatalf("delete = %+v %v", del, err)
		}
		if got := collect(CallsQueryReq{Filter: &CallsFilter{TraceIDs: []string{"t1"}}}); got != "root,c" {
			t.Fatalf("after delete = %s", got)
		}
		// Bad batch items name the field and write nothing.
		before, _ := s.CallsQueryStats(ctx, CallsQueryStatsReq{ProjectID: proj})
		_, err = s.CallUpsertBatch(ctx, batch(start("new1", "t3", "", "x", 1, ""), `{"mode":"start","req":{"start":{"project_id":"ent/proj","op_name":"x","started_at":"yesterday","attributes":{},"inputs":{}}}}`), allow)
		if status(t, err) != 400 || !strings.Contains(err.Error(), "batch[1].req.start.started_at") {
			t.Fatalf("bad batch: %v", err)
		}
		after, _ := s.CallsQueryStats(ctx, CallsQueryStatsReq{ProjectID: proj})
		if after.Count != before.Count {
			t.Fatal("a failed batch was half written")
		}
		_, err = s.CallUpsertBatch(ctx, batch(start("new1", "t3", "", "x", 1, "")), func(p, param string) error {
			return apierror.Forbidden(param, "no")
		})
		if status(t, err) != http.StatusForbidden {
			t.Fatalf("authorizer not applied: %v", err)
		}
	})
}

func TestFilesAndRefs(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s := newService(t, d)
		fc, err := s.FileCreate(ctx, proj, "obj.py", []byte("def f(): pass\n"), "")
		if err != nil || fc.Digest != BytesDigest([]byte("def f(): pass\n")) {
			t.Fatal(fc, err)
		}
		b, err := s.FileContent(ctx, FileContentReadReq{ProjectID: proj, Digest: fc.Digest})
		if err != nil || string(b) != "def f(): pass\n" {
			t.Fatal(string(b), err)
		}
		if _, err := s.FileContent(ctx, FileContentReadReq{ProjectID: "ent/other", Digest: fc.Digest}); status(t, err) != 404 {
			t.Fatal("file visible from another project")
		}
		tbl, _ := s.TableCreate(ctx, TableCreateReq{Table: TableSchemaForInsert{ProjectID: proj, Rows: []json.RawMessage{raw(`{"q":"1+1","a":2}`)}}})
		ds, _ := s.ObjCreate(ctx, ObjCreateReq{Obj: ObjSchemaForInsert{ProjectID: proj, ObjectID: "ds",
			Val: raw(`{"_type":"Dataset","rows":"weave:///ent/proj/table/` + tbl.Digest + `","meta":{"k":[10,20]}}`)}}, "")
		refs := []string{
			"weave:///ent/proj/object/ds:" + ds.Digest,
			"weave:///ent/proj/object/ds:" + ds.Digest + "/attr/meta/key/k/index/1",
			"weave:///ent/proj/object/ds:" + ds.Digest + "/attr/rows/id/" + tbl.RowDigests[0],
			"weave:///ent/proj/table/" + tbl.Digest + "/id/" + tbl.RowDigests[0],
		}
		res, err := s.RefsReadBatch(ctx, RefsReadBatchReq{Refs: refs}, allow)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{`"meta":{"k":[10,20]}`, `20`, `{"q":"1+1","a":2}`, `{"q":"1+1","a":2}`}
		for i, w := range want {
			if !strings.Contains(string(res.Vals[i]), w) {
				t.Errorf("ref %d = %s, want %s", i, res.Vals[i], w)
			}
		}
		if _, err := s.RefsReadBatch(ctx, RefsReadBatchReq{Refs: []string{"weave:///ent/proj/object/ds:" + ds.Digest + "/attr/nope"}}, allow); status(t, err) != 404 {
			t.Fatal("missing attr found")
		}
		if _, err := s.RefsReadBatch(ctx, RefsReadBatchReq{Refs: []string{"http://x"}}, allow); status(t, err) != 400 {
			t.Fatal("bad ref accepted")
		}
		// Feedback on a call.
		callRef := "weave:///ent/proj/call/c1"
		fb, err := s.FeedbackCreate(ctx, FeedbackCreateReq{ProjectID: proj, WeaveRef: callRef, FeedbackType: "wandb.reaction.1", Payload: raw(`{"emoji":"👍"}`)}, "ent")
		if err != nil {
			t.Fatal(err)
		}
		fq, _ := s.FeedbackQuery(ctx, FeedbackQueryReq{ProjectID: proj, Query: raw(`{"$expr":{"$eq":[{"$getField":"payload.emoji"},{"$literal":"👍"}]}}`)})
		if len(fq.Result) != 1 || fq.Result[0]["id"] != fb.ID {
			t.Fatalf("feedback query = %v", fq.Result)
		}
		if _, err := s.FeedbackCreate(ctx, FeedbackCreateReq{ProjectID: proj, WeaveRef: "weave:///other/p/call/c1", FeedbackType: "x", Payload: raw(`{}`)}, ""); status(t, err) != 400 {
			t.Fatal("feedback on another project's ref accepted")
		}
		if err := s.FeedbackPurge(ctx, FeedbackPurgeReq{ProjectID: proj, Query: raw(`{"$expr":{"$eq":[{"$getField":"id"},{"$literal":"` + fb.ID + `"}]}}`)}); err != nil {
			t.Fatal(err)
		}
		fq, _ = s.FeedbackQuery(ctx, FeedbackQueryReq{ProjectID: proj})
		if len(fq.Result) != 0 {
			t.Fatal("purge kept feedback")
		}
	})
}

func TestStoreSentinels(t *testing.T) {
	s := newService(t, dbtest.SQLite(t))
	_, err := s.store.ReadObject(context.Background(), proj, "x", VersionSelector{Digest: "d", Version: -1})
	if !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
}

package traceapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// seedCalls writes n root calls of project ent/p through /call/upsert_batch; call i is "c<i>"
// (zero-padded), of op "op<i%3>", with a gpt-4o usage of usage(i) prompt tokens (none when 0).
func seedCalls(t *testing.T, e *env, n int, usage func(i int) int, inputs func(i int) string) {
	t.Helper()
	for lo := 0; lo < n; lo += 500 {
		var items []string
		for i := lo; i < min(lo+500, n); i++ {
			id := fmt.Sprintf("c%05d", i)
			summary := `{}`
			if p := usage(i); p > 0 {
				summary = fmt.Sprintf(`{"usage":{"gpt-4o":{"prompt_tokens":%d,"completion_tokens":0,"requests":1}}}`, p)
			}
			in := `{"i":` + fmt.Sprint(i) + `}`
			if inputs != nil {
				in = inputs(i)
			}
			at := fmt.Sprintf("2026-01-01T00:%02d:%02dZ", i/60%60, i%60)
			items = append(items,
				`{"mode":"start","req":{"start":{"project_id":"ent/p","id":"`+id+`","trace_id":"t`+id+`","op_name":"op`+fmt.Sprint(i%3)+`","started_at":"`+at+`","attributes":{},"inputs":`+in+`}}}`,
				`{"mode":"end","req":{"end":{"project_id":"ent/p","id":"`+id+`","ended_at":"`+at+`","output":{"n":`+fmt.Sprint(i)+`},"summary":`+summary+`}}}`)
		}
		e.mustCall(t, "/call/upsert_batch", e.key, `{"batch":[`+strings.Join(items, ",")+`]}`)
	}
}

// TestCallsSortByTotalCost: /calls/stream_query and /calls/query sort by
// summary.weave.total_cost (priced when read) on both stores, paged by the server; it is
// refused as a later sort key and in a query, naming the field.
func TestCallsSortByTotalCost(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		e := setupOn(t, d)
		// c0 has no usage (last both ways); c1..c5 cost 5, 1, 4, 2, 3 units of 2.5e-6.
		seedCalls(t, e, 6, func(i int) int { return []int{0, 500, 100, 400, 200, 300}[i] }, nil)
		ids := func(path, body string) string {
			t.Helper()
			out := e.mustCall(t, path, e.key, body)
			calls := jsonLines(t, out)
			if path == "/calls/query" {
				var res struct{ Calls []map[string]any }
				if err := json.Unmarshal(out, &res); err != nil {
					t.Fatal(err)
				}
				calls = res.Calls
			}
			var got []string
			for _, c := range calls {
				got = append(got, c["id"].(string))
			}
			return strings.Join(got, " ")
		}
		for _, c := range []struct{ body, want string }{
			{`{"project_id":"ent/p","sort_by":[{"field":"summary.weave.total_cost","direction":"desc"}],"columns":["id"]}`, "c00001 c00003 c00005 c00004 c00002 c00000"},
			{`{"project_id":"ent/p","sort_by":[{"field":"summary.weave.total_cost","direction":"asc"}],"columns":["id"]}`, "c00002 c00004 c00005 c00003 c00001 c00000"},
			{`{"project_id":"ent/p","sort_by":[{"field":"summary.weave.total_cost","direction":"desc"}],"limit":2,"offset":1}`, "c00003 c00005"},
			{`{"project_id":"ent/p","sort_by":[{"field":"summary.weave.total_cost","direction":"desc"}],"filter":{"op_names":["op1"]}}`, "c00001 c00004"},
		} {
			for _, path := range []string{"/calls/stream_query", "/calls/query"} {
				if got := ids(path, c.body); got != c.want {
					t.Errorf("%s %s: %s, want %s", path, c.body, got, c.want)
				}
			}
		}
		for body, param := range map[string]string{
			`{"project_id":"ent/p","sort_by":[{"field":"id"},{"field":"summary.weave.total_cost"}]}`:                     "sort_by[1].field",
			`{"project_id":"ent/p","query":{"$expr":{"$gt":[{"$getField":"summary.weave.total_cost"},{"$literal":0}]}}}`: "query",
		} {
			if code, resp := e.call(t, "POST", "/calls/stream_query", e.key, body); code != 400 || errParam(t, resp) != param || !strings.Contains(string(resp), "summary.weave.total_cost") {
				t.Errorf("%s: %d %s, want a 400 naming %s", body, code, resp, param)
			}
		}
	})
}

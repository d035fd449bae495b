package traceapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// TestHostileStrings: on both stores, JSON values holding NUL and lone surrogates are stored
// and answered exactly as sent, and calls queries that sort or filter on them work; ids,
// digests, names, keys, fields and parameters holding NUL or invalid UTF-8 are 400s naming
// the field, never 500s.
func TestHostileStrings(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		e := setupOn(t, d)
		start := func(id, inputs string) {
			t.Helper()
			code, out := e.call(t, "POST", "/call/start", e.key, `{"start":{"project_id":"ent/p","id":"`+id+`","trace_id":"t1","op_name":"op","started_at":"2026-01-01T00:00:00Z","attributes":{},"inputs":`+inputs+`}}`)
			if code != 200 {
				t.Fatalf("start %s: %d %s", id, code, out)
			}
		}
		start("c1", `{"a":"nul\u0000here","s":"lone\ud800x","q":"\\u0000 is text"}`)
		start("c2", `{"a":"plain","s":"ok"}`)
		start("c3", `{"a":"\u0000\u0000","s":"\udc00"}`)

		type res struct {
			Calls []struct {
				ID     string          `json:"id"`
				Inputs json.RawMessage `json:"inputs"`
			} `json:"calls"`
		}
		query := func(body string) res {
			t.Helper()
			code, out := e.call(t, "POST", "/calls/query", e.key, body)
			if code != 200 {
				t.Fatalf("query %s: %d %s", body, code, out)
			}
			var r res
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatal(err)
			}
			return r
		}
		r := query(`{"project_id":"ent/p","sort_by":[{"field":"inputs.a","direction":"asc"}]}`)
		if len(r.Calls) != 3 {
			t.Fatalf("sorted on inputs.a: %+v", r)
		}
		for _, c := range r.Calls {
			if c.ID == "c1" {
				var in map[string]string
				_ = json.Unmarshal(c.Inputs, &in)
				if in["a"] != "nul\x00here" || in["q"] != `\u0000 is text` || !strings.Contains(string(c.Inputs), `\ud800`) {
					t.Fatalf("c1 inputs not as sent: %s", c.Inputs)
				}
			}
		}
		for _, q := range []struct{ expr, want string }{
			{`{"$eq":[{"$getField":"inputs.a"},{"$literal":"nul\u0000here"}]}`, "c1"},
			{`{"$eq":[{"$getField":"inputs.a"},{"$literal":"\u0000\u0000"}]}`, "c3"},
			{`{"$eq":[{"$getField":"inputs.q"},{"$literal":"\\u0000 is text"}]}`, "c1"},
			{`{"$contains":{"input":{"$getField":"inputs.a"},"substr":{"$literal":"\u0000h"}}}`, "c1"},
			{`{"$eq":[{"$getField":"inputs.s"},{"$literal":"ok"}]}`, "c2"},
		} {
			r := query(`{"project_id":"ent/p","query":{"$expr":` + q.expr + `},"sort_by":[{"field":"output.x"}]}`)
			if len(r.Calls) != 1 || r.Calls[0].ID != q.want {
				t.Fatalf("filter %s: got %+v, want %s", q.expr, r.Calls, q.want)
			}
		}

		// Refused, naming the field.
		for _, c := range []struct{ method, path, body, param string }{
			{"POST", "/obj/create", `{"obj":{"project_id":"ent/p","object_id":"o\u0000","val":1}}`, "obj.object_id"},
			{"POST", "/obj/read", `{"project_id":"ent/p","object_id":"o","digest":"d\u0000"}`, "digest"},
			{"POST", "/obj/read", `{"project_id":"ent/p\u0000","object_id":"o","digest":"d"}`, "project_id"},
			{"POST", "/call/read", `{"project_id":"ent/p","id":"c\u0000"}`, "id"},
			{"POST", "/call/start", `{"start":{"project_id":"ent/p","id":"x\u0000","trace_id":"t","op_name":"op","started_at":"2026-01-01T00:00:00Z","attributes":{},"inputs":{}}}`, "start.id"},
			{"POST", "/calls/query", `{"project_id":"ent/p","filter":{"op_names":["a\u0000"]}}`, "filter.op_names[0]"},
			{"POST", "/calls/query", `{"project_id":"ent/p","sort_by":[{"field":"inputs.a\u0000"}]}`, "sort_by[0].field"},
			{"POST", "/calls/query", `{"project_id":"ent/p","sort_by":[{"field":"inputs.a\"b"}]}`, "sort_by[0].field"},
			{"POST", "/table/query", `{"project_id":"ent/p","digest":"\u0000"}`, "digest"},
			{"PUT", "/objs/o%00/versions/d/tags", `{"project_id":"ent/p","tags":["t"]}`, "object_id"},
			{"PUT", "/objs/o/versions/%ED%A0%80/tags", `{"project_id":"ent/p","tags":["t"]}`, "digest"},
			{"GET", "/tags?project_id=ent/p%00", ``, "project_id"},
		} {
			code, out := e.call(t, c.method, c.path, e.key, c.body)
			if code != 400 || errParam(t, out) != c.param {
				t.Errorf("%s %s %s: %d %s (want 400 naming %s)", c.method, c.path, c.body, code, out, c.param)
			}
		}
		// The same in a batch, small and large (a large one is written part by part while its
		// later items are decoded: trace.CallUpsertBatchBody); nothing of the batch is kept.
		var items []string
		for i := range 600 {
			op := "op"
			if i == 550 {
				op = `bad\u0000op`
			}
			items = append(items, fmt.Sprintf(`{"mode":"start","req":{"start":{"project_id":"ent/big","id":"b%d","trace_id":"t","op_name":"%s","started_at":"2026-01-01T00:00:00Z","attributes":{},"inputs":{}}}}`, i, op))
		}
		for _, c := range []struct {
			items []string
			param string
		}{{items[549:551], "batch[1].req.start.op_name"}, {items, "batch[550].req.start.op_name"}} {
			code, out := e.call(t, "POST", "/call/upsert_batch", e.key, `{"batch":[`+strings.Join(c.items, ",")+`]}`)
			if code != 400 || errParam(t, out) != c.param {
				t.Errorf("batch of %d: %d %s (want 400 naming %s)", len(c.items), code, out, c.param)
			}
		}
		if code, out := e.call(t, "POST", "/calls/query_stats", e.key, `{"project_id":"ent/big"}`); code != 200 || !strings.Contains(string(out), `"count":0`) {
			t.Errorf("after the refused batches: %d %s", code, out)
		}

		// A query literal or field with a lone surrogate is no 500.
		query(`{"project_id":"ent/p","query":{"$expr":{"$eq":[{"$getField":"inputs.s"},{"$literal":"\ud800"}]}}}`)
		code, out := e.call(t, "POST", "/calls/query", e.key, `{"project_id":"ent/p","query":{"$expr":{"$eq":[{"$getField":"inputs.\ud800"},{"$literal":"x"}]}}}`)
		if code != 400 {
			t.Fatalf("lone surrogate in a field: %d %s", code, out)
		}
	})
}

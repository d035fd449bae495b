package trace

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

func TestParseQueryErrors(t *testing.T) {
	bad := map[string]string{
		`[]`:                                    "exactly the key",
		`{"$expr": 1}`:                          "one operator key",
		`{"$expr": {"$nope": []}}`:              "unknown operation",
		`{"$expr": {"$eq": [{"$literal": 1}]}}`: "2 operands",
		`{"$expr": {"$not": [1, 2]}}`:           "1 operands",
		`{"$expr": {"$in": [{"$literal": 1}]}}`: "[operand, [operands...]]",
		`{"$expr": {"$eq": [{"$getField": "a..b"}, {"$literal": 1}]}}`:                                                      "empty path segment",
		`{"$expr": {"$eq": [{"$getField": ""}, {"$literal": 1}]}}`:                                                          "field name",
		`{"$expr": {"$eq": [{"$convert": {"input": {"$literal": 1}, "to": "date"}}, {"$literal": 1}]}}`:                     "must be one of",
		`{"$expr": {"$contains": {"input": {"$literal": "a"}}}}`:                                                            "needs both",
		`{"$expr": {"$and": [` + strings.Repeat(`{"$not": [`, 70) + `{"$literal": true}` + strings.Repeat(`]}`, 70) + `]}}`: "nested deeper",
		`{"$expr":`: "unexpected end",
	}
	for q, want := range bad {
		_, err := ParseQuery(json.RawMessage(q))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseQuery(%.60s) = %v, want error containing %q", q, err, want)
		}
	}
	if n, err := ParseQuery(nil); n != nil || err != nil {
		t.Fatal("empty query must be no query")
	}
}

// The seed's example form: a literal inside $and is a condition by its truthiness.
func TestLiteralConditions(t *testing.T) {
	d := dbtest.SQLite(t)
	s := newService(t, d)
	ctx := context.Background()
	if _, err := s.CallUpsertBatch(ctx, batch(start("x", "t", "", "op", 1, "")), allow); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]int{
		`{"$expr": {"$and": [{"$literal": "anything"}]}}`:                                           1,
		`{"$expr": {"$and": [{"$literal": ""}]}}`:                                                   0,
		`{"$expr": {"$or": [{"$literal": false}, {"$literal": 1}]}}`:                                1,
		`{"$expr": {"$eq": [{"$getField": "exception"}, {"$literal": null}]}}`:                      1,
		`{"$expr": {"$eq": [{"$getField": "inputs.missing"}, {"$literal": null}]}}`:                 1,
		`{"$expr": {"$and": [{"$convert": {"input": {"$getField": "inputs.n"}, "to": "exists"}}]}}`: 1,
		`{"$expr": {"$gte": [{"$getField": "inputs.n"}, {"$literal": 1.5}]}}`:                       0,
	} {
		st, err := s.CallsQueryStats(ctx, CallsQueryStatsReq{ProjectID: proj, Query: json.RawMessage(q)})
		if err != nil || st.Count != want {
			t.Errorf("%s: count %d, %v; want %d", q, st.Count, err, want)
		}
	}
}

// Values from the query never become SQL text: hostile literals and field names are
// parameters or rejected.
func TestQueryIsParametrised(t *testing.T) {
	for _, d := range []db.Dialect{db.SQLite, db.Postgres} {
		c := Compiler{Dialect: d, Resolve: func(f string) (string, []any, ValueType, error) {
			segs := strings.Split(f, ".")
			e, a, t := JSONField(d, "inputs", segs)
			return e, a, t, nil
		}}
		n, err := ParseQuery(json.RawMessage(`{"$expr":{"$eq":[{"$getField":"x'); DROP TABLE t; --"},{"$literal":"'; DROP TABLE t; --"}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		sql, args, err := c.Compile(n)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(sql, "DROP") {
			t.Fatalf("%v: hostile text in SQL: %s", d, sql)
		}
		if len(args) != 2 {
			t.Fatalf("%v: args = %v", d, args)
		}
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{
		`{"$expr":{"$and":[{"$literal":"x"}]}}`,
		`{"$expr":{"$eq":[{"$getField":"inputs.a.b"},{"$literal":1}]}}`,
		`{"$expr":{"$in":[{"$getField":"id"},[{"$literal":"a"},{"$literal":2}]]}}`,
		`{"$expr":{"$not":[{"$contains":{"input":{"$getField":"op_name"},"substr":{"$literal":"x"},"case_insensitive":true}}]}}`,
		`{"$expr":{"$gt":[{"$convert":{"input":{"$getField":"summary.weave.latency_ms"},"to":"double"}},{"$literal":1.5}]}}`,
		`{"$expr":{"$or":[{"$gte":[{"$literal":[1,2]},{"$literal":{"a":null}}]}]}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		n, err := ParseQuery(json.RawMessage(q))
		if err != nil || n == nil {
			return
		}
		for _, d := range []db.Dialect{db.SQLite, db.Postgres} {
			c := Compiler{Dialect: d, Resolve: func(field string) (string, []any, ValueType, error) {
				if _, ok := callColumns[field]; ok {
					return field, nil, callColumns[field], nil
				}
				col, rest, _ := strings.Cut(field, ".")
				if callJSONColumns[col] && rest != "" {
					e, a, ty := JSONField(d, col, strings.Split(rest, "."))
					return e, a, ty, nil
				}
				return "", nil, 0, fmt.Errorf("unknown field")
			}}
			sql, args, err := c.Compile(n)
			if err != nil {
				continue
			}
			if strings.Count(sql, "?") != len(args) {
				t.Fatalf("%v: %d placeholders, %d args: %s", d, strings.Count(sql, "?"), len(args), sql)
			}
		}
	})
}

// Project-scoped lookups use indexes, never a full scan of a table.
func TestQueryPlansUseIndexes(t *testing.T) {
	d := dbtest.SQLite(t)
	newService(t, d)
	ctx := context.Background()
	plans := map[string][]any{
		`SELECT * FROM trace_objects WHERE project_id = ? AND deleted_at IS NULL AND is_latest = 1`:                                    {proj},
		`SELECT * FROM trace_objects WHERE project_id = ? AND object_id = ? AND digest = ?`:                                            {proj, "o", "d"},
		`SELECT * FROM trace_objects WHERE project_id = ? AND object_id = ? ORDER BY version_index DESC LIMIT 1`:                       {proj, "o"},
		`SELECT * FROM trace_calls WHERE project_id = ? AND trace_id IN (?, ?)`:                                                        {proj, "a", "b"},
		`SELECT * FROM trace_calls WHERE project_id = ? AND parent_id IN (?)`:                                                          {proj, "a"},
		`SELECT * FROM trace_calls WHERE project_id = ? AND id = ?`:                                                                    {proj, "a"},
		`SELECT * FROM trace_calls WHERE project_id = ? AND deleted_at IS NULL ORDER BY started_at LIMIT 10`:                           {proj},
		`SELECT e.idx FROM trace_table_entries e WHERE e.project_id = ? AND e.table_digest = ? AND e.idx >= ? ORDER BY e.idx LIMIT 10`: {proj, "t", 5},
		`SELECT * FROM trace_rows WHERE project_id = ? AND digest IN (?, ?)`:                                                           {proj, "a", "b"},
		`SELECT * FROM trace_tags WHERE project_id = ? AND object_id IN (?)`:                                                           {proj, "o"},
		`SELECT * FROM trace_feedback WHERE project_id = ? AND weave_ref = ?`:                                                          {proj, "r"},
		`SELECT content FROM trace_files WHERE project_id = ? AND digest = ?`:                                                          {proj, "d"},
	}
	for q, args := range plans {
		rows, err := d.Query(ctx, "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN ") && !strings.Contains(step, "USING") {
				t.Errorf("full scan for %s:\n  %s", q, strings.Join(plan, "\n  "))
			}
		}
	}
}

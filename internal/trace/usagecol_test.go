package trace

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// The summary_usage text reads back as what ExtractUsage reads from the summary.
func TestUsageColumnRoundTrip(t *testing.T) {
	for _, s := range []string{
		``, `{}`, `{"usage":{}}`, `{"usage":5}`, `not json`, `{"weave":{"usage":{"m":{"requests":1}}}}`,
		`{"usage":{"gpt-4o":{"prompt_tokens":10,"completion_tokens":5,"requests":1}}}`,
		`{"usage":{"b":{"input_tokens":9223372036854775807},"a:1; x":{"output_tokens":-3,"requests":2},"é\n":{"total_tokens":7,"cache_read_input_tokens":1,"cache_creation_input_tokens":2}}}`,
		`{"usage":{"m":{"prompt_tokens":1.9,"completion_tokens":null,"requests":{"x":1}}},"other":[1,{"a":[2]}]}`,
		`{"usage":{"m":{"prompt_tokens":-9223372036854775808}}}`,
	} {
		enc := encodeUsage([]byte(s))
		got, ok := decodeUsage([]byte(enc))
		if want := usageList([]byte(s)); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: encoded %q, decoded %+v (ok %v), want %+v", s, enc, got, ok, want)
		}
	}
	for _, bad := range []string{"x", "3:ab", "1:m 1 2 3 4 5", "1:m 1 2 3 4 5 6", "1:m 1 2 3 4 5 x;", "-1:m", "1:m 1 2 3 4 5 99999999999999999999;"} {
		if _, ok := decodeUsage([]byte(bad)); ok {
			t.Errorf("%q decoded", bad)
		}
	}
}

// Calls written before summary_usage existed (NULL there) roll up from their summaries, the
// same as calls written since.
func TestUsageColumnLegacyRows(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s := newService(t, d)
		u := func(model string, p, c int) string {
			return fmt.Sprintf(`{"usage":{%q:{"prompt_tokens":%d,"completion_tokens":%d,"requests":1}}}`, model, p, c)
		}
		sdk := `"weave":{"source":"python-sdk"}`
		if _, err := s.CallUpsertBatch(ctx, batch(
			start("r", "t", "", "op", 1, ""), start("a", "t", "r", "llm", 2, ""), start("b", "t", "a", "llm", 3, ""),
			start("c", "t", "r", "llm", 4, ""), start("s", "t", "r", "op", 5, sdk), start("s1", "t", "s", "llm", 6, sdk),
			end("a", 7, u("gpt-4o", 10, 20)), end("b", 8, `{"usage":{"gpt-4o":{"input_tokens":1},"o3":{"output_tokens":4}}}`),
			end("c", 9, `{}`), end("s1", 10, u("gpt-4o", 3, 4)), end("s", 11, u("gpt-4o", 5, 6)),
		), allow); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := d.QueryRow(ctx, `SELECT COUNT(*) FROM trace_calls WHERE summary_usage IS NOT NULL`).Scan(&n); err != nil || n != 5 {
			t.Fatalf("%d rows with summary_usage (%v), want 5", n, err)
		}
		req := TraceUsageReq{ProjectID: proj, Filter: &CallsFilter{TraceIDs: []string{"t"}}, IncludeCosts: true}
		want, err := s.TraceUsage(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := want.CallUsage["r"]["gpt-4o"]; got.PromptTokens != 16 || got.Requests != 2 {
			t.Fatalf("r = %+v", got)
		}
		if _, err := d.Exec(ctx, `UPDATE trace_calls SET summary_usage = NULL`); err != nil {
			t.Fatal(err)
		}
		got, err := s.TraceUsage(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("from summaries %+v\nfrom summary_usage %+v", got, want)
		}
	})
}

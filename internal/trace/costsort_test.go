package trace

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// readCost is a call's cost as include_costs answers it: the sum of the *_total_cost fields
// of summary.weave.costs, and whether any of its models has a price.
func readCost(t *testing.T, c CallSchema) (float64, bool) {
	t.Helper()
	var s struct {
		Weave struct {
			Costs map[string]map[string]any `json:"costs"`
		} `json:"weave"`
	}
	if err := json.Unmarshal(c.Summary, &s); err != nil {
		t.Fatal(err)
	}
	total, known := 0.0, false
	for _, m := range sortedKeys(s.Weave.Costs) {
		e := s.Weave.Costs[m]
		if _, ok := e["prompt_token_cost"]; ok {
			known = true
		}
		for _, k := range []string{"prompt_tokens_total_cost", "completion_tokens_total_cost", "cache_read_input_tokens_total_cost", "cache_creation_input_tokens_total_cost"} {
			if v, ok := e[k].(float64); ok {
				total += v
			}
		}
	}
	return total, known
}

func TestCallsSortByTotalCost(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s := newService(t, d)
		u := func(model string, p, c int) string {
			return fmt.Sprintf(`{"usage":{%q:{"prompt_tokens":%d,"completion_tokens":%d,"requests":1}}}`, model, p, c)
		}
		// Default prices: gpt-4o 2.5e-6/1e-5, gpt-4o-mini 1.5e-7/6e-7; claude with cache counts.
		items := []string{
			start("big", "t1", "", "llm", 1, ""), end("big", 2, u("gpt-4o", 1000, 1000)), // 0.0125
			start("small", "t2", "", "llm", 2, ""), end("small", 3, u("gpt-4o-mini", 1000, 1000)), // 0.00075
			start("mid", "t3", "", "llm", 3, ""), end("mid", 4, u("gpt-4o", 400, 0)), // 0.001
			start("two", "t4", "", "llm", 4, ""), end("two", 5, `{"usage":{"gpt-4o":{"prompt_tokens":400},"gpt-4o-mini":{"completion_tokens":1000}}}`), // 0.0016
			start("cache", "t5", "", "llm", 5, ""), end("cache", 6, `{"usage":{"claude-3-5-sonnet-20241022":{"input_tokens":100,"output_tokens":10,"cache_read_input_tokens":1000,"cache_creation_input_tokens":100}}}`),
			start("tie", "t6", "", "llm", 6, ""), end("tie", 7, u("gpt-4o", 400, 0)), // the same as mid
			start("unpriced", "t7", "", "llm", 7, ""), end("unpriced", 8, u("my-local-model", 5000, 5000)),
			start("none", "t8", "", "llm", 8, ""), end("none", 9, `{}`),
			start("running", "t9", "", "llm", 9, ""),
			start("child", "t1", "big", "llm", 10, ""), end("child", 11, u("gpt-4o", 1, 1)),
		}
		if _, err := s.CallUpsertBatch(ctx, batch(items...), allow); err != nil {
			t.Fatal(err)
		}
		ids := func(req CallsQueryReq) []string {
			t.Helper()
			req.ProjectID = proj
			var out []string
			if err := s.CallsQuery(ctx, req, func(c CallSchema) error { out = append(out, c.ID); return nil }); err != nil {
				t.Fatal(err)
			}
			return out
		}
		byCost := func(dir string, more ...SortBy) []SortBy {
			return append([]SortBy{{Field: TotalCostField, Direction: dir}}, more...)
		}
		roots := &CallsFilter{TraceRootsOnly: ptr(true)}
		// cache: 100*3e-6 + 10*1.5e-5 + 1000*3e-7 + 100*3.75e-6 = 0.001125
		want := map[string]string{
			"desc": "big,two,cache,mid,tie,small,none,running,unpriced",
			"asc":  "small,mid,tie,cache,two,big,none,running,unpriced",
		}
		for dir, w := range want {
			if got := strings.Join(ids(CallsQueryReq{Filter: roots, SortBy: byCost(dir)}), ","); got != w {
				t.Errorf("%s: %s, want %s", dir, got, w)
			}
		}
		// The order is that of the costs include_costs answers.
		var costs []float64
		err := s.CallsQuery(ctx, CallsQueryReq{ProjectID: proj, Filter: roots, SortBy: byCost("desc"), IncludeCosts: true}, func(c CallSchema) error {
			if cost, known := readCost(t, c); known {
				costs = append(costs, cost)
			}
			return nil
		})
		if err != nil || len(costs) != 6 || !sort.SliceIsSorted(costs, func(i, j int) bool { return costs[i] > costs[j] }) {
			t.Errorf("costs in order: %v (%v)", costs, err)
		}
		// Ties and unknown costs are ordered by the later keys, then id.
		if got := strings.Join(ids(CallsQueryReq{Filter: roots, SortBy: byCost("asc", SortBy{Field: "started_at", Direction: "desc"})}), ","); got != "small,tie,mid,cache,two,big,running,none,unpriced" {
			t.Errorf("ties by start, newest first: %s", got)
		}
		// Pages: offset and limit cut the same order.
		full := ids(CallsQueryReq{SortBy: byCost("desc")})
		var paged []string
		for off := 0; off < len(full)+2; off += 3 {
			paged = append(paged, ids(CallsQueryReq{SortBy: byCost("desc"), Limit: ptr(3), Offset: ptr(off)})...)
		}
		if strings.Join(paged, ",") != strings.Join(full, ",") || len(full) != 10 || full[0] != "big" {
			t.Errorf("pages %v, whole %v", paged, full)
		}
		if got := ids(CallsQueryReq{SortBy: byCost("desc"), Limit: ptr(0)}); len(got) != 0 {
			t.Errorf("limit 0: %v", got)
		}
		// Filters and queries apply as to any sort (cache's tokens are 110: cached ones are not
		// counted in total_tokens).
		q := raw(`{"$expr":{"$gt":[{"$getField":"summary.weave.total_tokens"},{"$literal":500}]}}`)
		if got := strings.Join(ids(CallsQueryReq{Query: q, SortBy: byCost("asc")}), ","); got != "small,two,big,unpriced" {
			t.Errorf("with a query: %s", got)
		}
		// A project price is effective from its date: calls started before it keep the default.
		if _, err := s.CostCreate(ctx, CostCreateReq{ProjectID: proj, Costs: map[string]CostCreateInput{
			"my-local-model": {PromptTokenCost: 1e-9, CompletionTokenCost: 1e-9, EffectiveDate: ptr("2025-01-01T00:00:00Z")},
			"gpt-4o-mini":    {PromptTokenCost: 1e-3, CompletionTokenCost: 1e-3, EffectiveDate: ptr("2026-01-01T00:00:02.5Z")},
		}}, "u"); err != nil {
			t.Fatal(err)
		}
		// unpriced: 1e-5 now; two (started at :04) pays 1e-3 per gpt-4o-mini token: 1.001;
		// small (started at :02) still the default.
		if got := strings.Join(ids(CallsQueryReq{Filter: roots, SortBy: byCost("desc")}), ","); got != "two,big,cache,mid,tie,small,unpriced,none,running" {
			t.Errorf("with project prices: %s", got)
		}
		// Rows written before summary_usage existed are priced from their summaries.
		if _, err := d.Exec(ctx, `UPDATE trace_calls SET summary_usage = NULL`); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(ids(CallsQueryReq{Filter: roots, SortBy: byCost("desc")}), ","); got != "two,big,cache,mid,tie,small,unpriced,none,running" {
			t.Errorf("legacy rows: %s", got)
		}
		// Many calls (more than the order keeps while it reads), with ties: a page is the slice
		// of the whole order.
		var many []string
		for i := range 1300 {
			id := fmt.Sprintf("m%04d", i)
			many = append(many, start(id, "tm", "", "many", 1, ""), end(id, 2, u("gpt-4o", (i*7919)%1000, 0)))
		}
		if _, err := s.CallUpsertBatch(ctx, batch(many...), allow); err != nil {
			t.Fatal(err)
		}
		ops := &CallsFilter{OpNames: []string{"many"}}
		whole := ids(CallsQueryReq{Filter: ops, SortBy: byCost("desc")})
		if len(whole) != 1300 {
			t.Fatalf("%d calls", len(whole))
		}
		for _, off := range []int{0, 1, 600, 1295} {
			got := ids(CallsQueryReq{Filter: ops, SortBy: byCost("desc"), Limit: ptr(10), Offset: ptr(off)})
			if strings.Join(got, ",") != strings.Join(whole[off:min(off+10, len(whole))], ",") {
				t.Errorf("offset %d: %v, want %v", off, got, whole[off:min(off+10, len(whole))])
			}
		}

		// Only as the first key; never in a query; directions are checked.
		for _, c := range []struct {
			req   CallsQueryReq
			param string
		}{
			{CallsQueryReq{SortBy: []SortBy{{Field: "id"}, {Field: TotalCostField}}}, "sort_by[1].field"},
			{CallsQueryReq{SortBy: byCost("up")}, "sort_by[0].direction"},
			{CallsQueryReq{SortBy: byCost("asc", SortBy{Field: "started_at", Direction: "sideways"})}, "sort_by[1].direction"},
			{CallsQueryReq{Query: raw(`{"$expr":{"$gt":[{"$getField":"` + TotalCostField + `"},{"$literal":0}]}}`)}, "query"},
		} {
			c.req.ProjectID = proj
			err := s.CallsQuery(ctx, c.req, func(CallSchema) error { return nil })
			if e, _ := apierror.As(err); err == nil || e.Status != 400 || e.Param != c.param {
				t.Errorf("%+v: %v, want a 400 naming %s", c.req.SortBy, err, c.param)
			}
		}
	})
}

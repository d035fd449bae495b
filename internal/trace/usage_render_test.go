package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestRollUpRenderedMatches checks that a large roll-up built on two cores (rollUpRendered)
// gives the result and the JSON of the one-core path: a tree of calls with several models,
// SDK-written (cumulative) calls, summaries of rows from before summary_usage, calls without
// usage, unfinished calls, ids that JSON escapes, with and without costs.
func TestRollUpRenderedMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	calls := make([]UsageCall, 3000)
	for i := range calls {
		c := &calls[i]
		c.ID = fmt.Sprintf("call-%05d", rng.IntN(1_000_000))
		if i%97 == 0 {
			c.ID += "\"é\x01" // escaped in JSON
		}
		c.ID += fmt.Sprint("-", i)
		if i > 0 {
			c.ParentID = calls[rng.IntN(i)].ID
		}
		c.Ended = i%13 != 0
		c.Cumulative = i%7 == 0
		c.StartedAt = "2026-01-01T00:00:00Z"
		switch i % 5 {
		case 0: // no usage
		case 1:
			c.Summary = json.RawMessage(fmt.Sprintf(`{"usage":{"gpt-4o":{"prompt_tokens":%d,"completion_tokens":3,"requests":1},"m2":{"input_tokens":4}}}`, 10+i%7))
		default:
			c.Usage = []ModelCount{{Model: "a", ModelUsage: ModelUsage{Requests: 1, PromptTokens: int64(i % 11), CompletionTokens: 2, TotalTokens: int64(i%11) + 2}}}
			if i%3 == 0 {
				c.Usage = append(c.Usage, ModelCount{Model: "gpt-4o", ModelUsage: ModelUsage{Requests: 2, PromptTokens: 5, TotalTokens: 5, CacheRead: 1}})
			}
		}
	}
	price := func(model, _ string) (Price, bool) {
		if model == "m2" {
			return Price{}, false
		}
		return Price{Prompt: 1e-6 * float64(len(model)), Completion: 3e-6, CacheRead: 1e-7}, true
	}
	for _, withCosts := range []bool{false, true} {
		var pr Pricer
		if withCosts {
			pr = price
		}
		got := rollUpRendered(calls, pr, withCosts)
		agg := rollUp(calls, pr)
		ids := make([]string, len(calls))
		for i, c := range calls {
			ids[i] = c.ID
		}
		want := UsageRes{UnfinishedCallIDs: unfinished(calls), CallUsage: toAggregated(ids, agg, withCosts)}
		gj, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		wj, _ := json.Marshal(want)
		if !bytes.Equal(gj, wj) {
			t.Fatalf("costs %v: rendered JSON differs from the map's (%d and %d bytes)", withCosts, len(gj), len(wj))
		}
		got.rendered = nil // the maps themselves
		gm, _ := json.Marshal(got)
		if !bytes.Equal(gm, wj) {
			t.Fatalf("costs %v: the maps differ", withCosts)
		}
	}
}

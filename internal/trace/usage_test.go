package trace

import (
	"encoding/json"
	"fmt"
	"testing"
)

func usageJSON(p, c int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"usage":{"m":{"prompt_tokens":%d,"completion_tokens":%d,"requests":1}}}`, p, c))
}

func TestExtractUsageFoldsAndDrops(t *testing.T) {
	u := ExtractUsage(json.RawMessage(`{"usage":{
		"a":{"prompt_tokens":1,"input_tokens":2,"completion_tokens":3,"output_tokens":4},
		"b":{"prompt_tokens":0,"completion_tokens":0},
		"c":{"input_tokens":5,"output_tokens":6,"total_tokens":100,"cache_read_input_tokens":7,"cache_creation_input_tokens":8,"requests":2},
		"d":{"prompt_tokens":1.9,"completion_tokens":null}}}`))
	if a := u["a"]; a.PromptTokens != 3 || a.CompletionTokens != 7 || a.TotalTokens != 10 {
		t.Fatalf("a = %+v", a)
	}
	if _, ok := u["b"]; ok {
		t.Fatal("all-zero model kept")
	}
	if c := u["c"]; c.TotalTokens != 100 || c.CacheRead != 7 || c.CacheCreation != 8 || c.Requests != 2 {
		t.Fatalf("c = %+v", c)
	}
	if d := u["d"]; d.PromptTokens != 1 || d.TotalTokens != 1 {
		t.Fatalf("d = %+v", d)
	}
	for _, s := range []string{``, `{}`, `{"usage": 5}`, `not json`, `{"usage":{"m":"x"}}`} {
		if len(ExtractUsage(json.RawMessage(s))) != 0 {
			t.Errorf("%q gave usage", s)
		}
	}
}

// A deep chain and a wide tree of 10,000 calls each roll up without recursion; each call's
// entry is its own usage plus all descendants'.
func TestRollUpChainAndTree(t *testing.T) {
	const n = 10000
	chain := make([]UsageCall, n)
	for i := range chain {
		chain[i] = UsageCall{ID: fmt.Sprint(i), Summary: usageJSON(1, 2), Ended: true}
		if i > 0 {
			chain[i].ParentID = fmt.Sprint(i - 1)
		}
	}
	// Shuffle-ish order: children before parents must not matter.
	for i := 0; i < n/2; i++ {
		chain[i], chain[n-1-i] = chain[n-1-i], chain[i]
	}
	agg := RollUp(chain, nil)
	for _, id := range []int{0, 1, n / 2, n - 1} {
		if got := agg[fmt.Sprint(id)]["m"].PromptTokens; got != int64(n-id) {
			t.Fatalf("chain call %d = %d, want %d", id, got, n-id)
		}
	}
	tree := make([]UsageCall, n)
	for i := range tree {
		tree[i] = UsageCall{ID: fmt.Sprint(i), Summary: usageJSON(1, 0)}
		if i > 0 {
			tree[i].ParentID = fmt.Sprint((i - 1) / 100) // 100-ary tree
		}
	}
	agg = RollUp(tree, nil)
	if got := agg["0"]["m"].PromptTokens; got != n {
		t.Fatalf("root = %d", got)
	}
	// Node 1's subtree: 1, its children 101..200, their children 10101.. (none < n beyond 9999).
	want := int64(1 + 100)
	for c := 101; c <= 200; c++ {
		for g := c*100 + 1; g <= c*100+100 && g < n; g++ {
			want++
		}
	}
	if got := agg["1"]["m"].PromptTokens; got != want {
		t.Fatalf("node 1 = %d, want %d", got, want)
	}
}

func TestRollUpCycleAndMissingParent(t *testing.T) {
	calls := []UsageCall{
		{ID: "a", ParentID: "b", Summary: usageJSON(1, 0)},
		{ID: "b", ParentID: "a", Summary: usageJSON(1, 0)},
		{ID: "c", ParentID: "not-fetched", Summary: usageJSON(5, 0)},
		{ID: "self", ParentID: "self", Summary: usageJSON(2, 0)},
	}
	agg := RollUp(calls, nil)
	if agg["c"]["m"].PromptTokens != 5 || agg["self"]["m"].PromptTokens != 2 {
		t.Fatalf("roots = %+v %+v", agg["c"]["m"], agg["self"]["m"])
	}
	if _, ok := agg["a"]; !ok {
		t.Fatal("a call of a cycle has no entry")
	}
}

// SDK-written (cumulative) summaries: own usage is recovered, so totals equal what was stored.
func TestRollUpCumulative(t *testing.T) {
	calls := []UsageCall{
		{ID: "root", Summary: usageJSON(111, 0), Cumulative: true},
		{ID: "a", ParentID: "root", Summary: usageJSON(11, 0), Cumulative: true},
		{ID: "b", ParentID: "a", Summary: usageJSON(1, 0), Cumulative: true},
		{ID: "c", ParentID: "root", Summary: json.RawMessage(`{}`), Cumulative: true}, // no usage
	}
	agg := RollUp(calls, func(model, startedAt string) (Price, bool) { return Price{Prompt: 2}, true })
	for id, want := range map[string]int64{"root": 111, "a": 11, "b": 1} {
		if got := agg[id]["m"]; got.PromptTokens != want || got.PromptCost != float64(2*want) {
			t.Errorf("%s = %+v, want %d", id, got, want)
		}
	}
	if len(agg["c"]) != 0 {
		t.Errorf("c = %v", agg["c"])
	}
}

func BenchmarkRollUp10k(b *testing.B) {
	calls := make([]UsageCall, 10000)
	for i := range calls {
		calls[i] = UsageCall{ID: fmt.Sprint(i), Summary: usageJSON(i, i), Ended: true}
		if i > 0 {
			calls[i].ParentID = fmt.Sprint(i - 1)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		RollUp(calls, nil)
	}
}

// The hand-written encoder agrees with encoding/json on the same data.
func TestUsageResJSON(t *testing.T) {
	cost := 0.25
	r := UsageRes{CallUsage: map[string]map[string]*AggregatedUsage{
		"b\x01<é": {"m\"x": {Requests: 1, PromptTokens: 2, CompletionTokens: 3, TotalTokens: 5, PromptTokensTotalCost: &cost, CompletionTokensTotalCost: &cost,
			CacheReadInputTokensTotalCost: &cost, CacheCreationInputTokensTotalCost: &cost}},
		"a": {},
		"c": {"m2": {Requests: 1}, "m1": {Requests: 2}},
	}, UnfinishedCallIDs: []string{"a", "\x02"}}
	got, _ := r.MarshalJSON()
	type plain UsageRes
	want, _ := json.Marshal(plain(r))
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("invalid JSON %s: %v", got, err)
	}
	_ = json.Unmarshal(want, &w)
	if fmt.Sprint(g) != fmt.Sprint(w) {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

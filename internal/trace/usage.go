package trace

import (
	"encoding/json"
	"math"
	"sort"
)

// UsageCall is what the usage roll-up needs of a call.
type UsageCall struct {
	ID       string
	ParentID string
	Summary  json.RawMessage
	Ended    bool
	// Cumulative marks a call written by a Weave SDK, whose summary.usage already includes the
	// usage of its children (both SDKs roll children into parents before ending a call).
	Cumulative bool
	StartedAt  string
}

// ModelUsage is the usage counts of one model.
type ModelUsage struct {
	Requests, PromptTokens, CompletionTokens, TotalTokens int64
	CacheRead, CacheCreation                              int64
	// Costs, set when costs were requested (nil: no price).
	PromptCost, CompletionCost, CacheReadCost, CacheCreationCost float64
	HasCost                                                      bool
}

func (u *ModelUsage) add(o *ModelUsage, sign int64) {
	u.Requests += sign * o.Requests
	u.PromptTokens += sign * o.PromptTokens
	u.CompletionTokens += sign * o.CompletionTokens
	u.TotalTokens += sign * o.TotalTokens
	u.CacheRead += sign * o.CacheRead
	u.CacheCreation += sign * o.CacheCreation
	f := float64(sign)
	u.PromptCost += f * o.PromptCost
	u.CompletionCost += f * o.CompletionCost
	u.CacheReadCost += f * o.CacheReadCost
	u.CacheCreationCost += f * o.CacheCreationCost
	u.HasCost = u.HasCost || o.HasCost
}

func (u *ModelUsage) zero() bool {
	return u.Requests == 0 && u.PromptTokens == 0 && u.CompletionTokens == 0 && u.TotalTokens == 0 &&
		u.CacheRead == 0 && u.CacheCreation == 0
}

func (u *ModelUsage) clampNonNegative() {
	for _, p := range []*int64{&u.Requests, &u.PromptTokens, &u.CompletionTokens, &u.TotalTokens, &u.CacheRead, &u.CacheCreation} {
		if *p < 0 {
			*p = 0
		}
	}
	for _, p := range []*float64{&u.PromptCost, &u.CompletionCost, &u.CacheReadCost, &u.CacheCreationCost} {
		if *p < 0 {
			*p = 0
		}
	}
}

// toInt reads a JSON number as an integer count (floats are truncated; null and others are 0).
func toInt(v any) int64 {
	switch n := v.(type) {
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return 0
		}
		return int64(n)
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i
		}
		f, _ := n.Float64()
		return int64(f)
	}
	return 0
}

// ExtractUsage reads `summary.usage` (model → counts) the way Weave does: input_tokens fold into
// prompt_tokens and output_tokens into completion_tokens; a zero total_tokens becomes
// prompt + completion; models whose counts are all zero are dropped.
func ExtractUsage(summary json.RawMessage) map[string]*ModelUsage {
	if len(summary) == 0 {
		return nil
	}
	var s struct {
		Usage map[string]map[string]any `json:"usage"`
	}
	if err := json.Unmarshal(summary, &s); err != nil || len(s.Usage) == 0 {
		return nil
	}
	out := make(map[string]*ModelUsage, len(s.Usage))
	for model, m := range s.Usage {
		u := &ModelUsage{
			Requests:         toInt(m["requests"]),
			PromptTokens:     toInt(m["prompt_tokens"]) + toInt(m["input_tokens"]),
			CompletionTokens: toInt(m["completion_tokens"]) + toInt(m["output_tokens"]),
			TotalTokens:      toInt(m["total_tokens"]),
			CacheRead:        toInt(m["cache_read_input_tokens"]),
			CacheCreation:    toInt(m["cache_creation_input_tokens"]),
		}
		if u.TotalTokens == 0 {
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
		}
		if !u.zero() {
			out[model] = u
		}
	}
	return out
}

// Pricer prices the usage of a model for a call started at startedAt; ok is false when there
// is no price for the model.
type Pricer func(model, startedAt string) (p Price, ok bool)

// Price is per-token costs.
type Price struct {
	Prompt, Completion, CacheRead, CacheCreation float64
}

// RollUp computes, for every call, its own usage plus the sum over all its descendants in the
// set, per model, in O(n): children are merged into parents bottom-up (Kahn's order), with no
// recursion. A call whose parent is not in the set is a root.
//
// A call marked Cumulative stored the sum of its own and its children's usage (the Weave SDKs
// roll children into parents on the client); its own usage is recovered as its stored usage
// minus its children's stored usage, so SDK-written and raw traces roll up the same way and
// nothing is counted twice.
func RollUp(calls []UsageCall, price Pricer) map[string]map[string]*ModelUsage {
	n := len(calls)
	index := make(map[string]int, n)
	for i, c := range calls {
		index[c.ID] = i
	}
	stored := make([]map[string]*ModelUsage, n)
	parent := make([]int, n)
	pending := make([]int, n) // children not merged yet
	for i, c := range calls {
		stored[i] = ExtractUsage(c.Summary)
		parent[i] = -1
		if p, ok := index[c.ParentID]; ok && c.ParentID != "" && p != i {
			parent[i] = p
			pending[p]++
		}
	}
	// Own usage.
	own := make([]map[string]*ModelUsage, n)
	for i := range calls {
		own[i] = map[string]*ModelUsage{}
		for m, u := range stored[i] {
			cp := *u
			own[i][m] = &cp
		}
	}
	for i, c := range calls {
		p := parent[i]
		if p < 0 || !calls[p].Cumulative {
			continue
		}
		for m, u := range stored[i] {
			if pu, ok := own[p][m]; ok {
				pu.add(u, -1)
			}
		}
		_ = c
	}
	for i := range calls {
		for m, u := range own[i] {
			u.clampNonNegative()
			if u.zero() {
				delete(own[i], m)
				continue
			}
			if price != nil {
				if pr, ok := price(m, calls[i].StartedAt); ok {
					u.PromptCost = float64(u.PromptTokens) * pr.Prompt
					u.CompletionCost = float64(u.CompletionTokens) * pr.Completion
					u.CacheReadCost = float64(u.CacheRead) * pr.CacheRead
					u.CacheCreationCost = float64(u.CacheCreation) * pr.CacheCreation
				}
				u.HasCost = true
			}
		}
	}
	// Bottom-up merge: start from the leaves; a parent is ready when all its children merged.
	// Cycles (which valid traces do not have) are broken by treating their calls as roots.
	agg := own
	queue := make([]int, 0, n)
	for i := range calls {
		if pending[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		p := parent[i]
		if p < 0 {
			continue
		}
		for m, u := range agg[i] {
			if pu, ok := agg[p][m]; ok {
				pu.add(u, 1)
			} else {
				cp := *u
				agg[p][m] = &cp
			}
		}
		if pending[p]--; pending[p] == 0 {
			queue = append(queue, p)
		}
	}
	out := make(map[string]map[string]*ModelUsage, n)
	for i, c := range calls {
		out[c.ID] = agg[i]
	}
	return out
}

// toAggregated converts roll-up results to the response shape.
func toAggregated(m map[string]*ModelUsage, withCosts bool) map[string]*AggregatedUsage {
	out := make(map[string]*AggregatedUsage, len(m))
	for model, u := range m {
		a := &AggregatedUsage{
			Requests: u.Requests, PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
			TotalTokens: u.TotalTokens, CacheReadInputTokens: u.CacheRead, CacheCreationInputTokens: u.CacheCreation,
		}
		if withCosts {
			pc, cc, rc, wc := u.PromptCost, u.CompletionCost, u.CacheReadCost, u.CacheCreationCost
			a.PromptTokensTotalCost, a.CompletionTokensTotalCost = &pc, &cc
			a.CacheReadInputTokensTotalCost, a.CacheCreationInputTokensTotalCost = &rc, &wc
		}
		out[model] = a
	}
	return out
}

// unfinished returns the sorted ids of calls without an end.
func unfinished(calls []UsageCall) []string {
	out := []string{}
	for _, c := range calls {
		if !c.Ended {
			out = append(out, c.ID)
		}
	}
	sort.Strings(out)
	return out
}

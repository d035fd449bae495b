package trace

import (
	"context"
	"encoding/json"
	"math"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/pyjson"
)

// UsageCall is what the usage roll-up needs of a call.
type UsageCall struct {
	ID       string
	ParentID string
	// Usage is the call's usage counts (the stored summary_usage); when it is nil they are
	// read from Summary (rows written before summary_usage existed).
	Usage   []ModelCount
	Summary json.RawMessage
	Ended   bool
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

// count reads a JSON number as an integer count (floats are truncated; null and others are 0).
func count(v pyjson.Value) int64 {
	switch v.Kind {
	case pyjson.Int:
		if i, err := strconv.ParseInt(v.Str, 10, 64); err == nil {
			return i
		}
		fallthrough
	case pyjson.Float:
		f, err := strconv.ParseFloat(v.Str, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0
		}
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
	s, err := pyjson.ParseShallow(summary, 2) // only summary.usage.<model>.<count> is read
	if err != nil {
		return nil
	}
	usage, ok := s.Get("usage")
	if !ok || usage.Kind != pyjson.Object || len(usage.Obj) == 0 {
		return nil
	}
	out := make(map[string]*ModelUsage, len(usage.Obj))
	for _, m := range usage.Obj {
		if m.Val.Kind != pyjson.Object {
			continue
		}
		u := &ModelUsage{}
		for _, f := range m.Val.Obj {
			n := count(f.Val)
			switch f.Key {
			case "requests":
				u.Requests = n
			case "prompt_tokens", "input_tokens":
				u.PromptTokens += n
			case "completion_tokens", "output_tokens":
				u.CompletionTokens += n
			case "total_tokens":
				u.TotalTokens = n
			case "cache_read_input_tokens":
				u.CacheRead = n
			case "cache_creation_input_tokens":
				u.CacheCreation = n
			}
		}
		if u.TotalTokens == 0 {
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
		}
		if !u.zero() {
			out[m.Key] = u
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
	agg := rollUp(calls, price)
	out := make(map[string]map[string]*ModelUsage, len(calls))
	for i, c := range calls {
		m := make(map[string]*ModelUsage, len(agg[i]))
		for j := range agg[i] {
			m[agg[i][j].Model] = &agg[i][j].ModelUsage
		}
		out[c.ID] = m
	}
	return out
}

// rollUp is RollUp with its result as a list per call (calls' order), each in model order.
func rollUp(calls []UsageCall, price Pricer) [][]ModelCount {
	n := len(calls)
	index := make(map[string]int, n)
	for i, c := range calls {
		index[c.ID] = i
	}
	stored := make([][]ModelCount, n)
	parent := make([]int, n)
	pending := make([]int, n) // children not merged yet
	total := 0
	for i, c := range calls {
		stored[i] = c.Usage
		if c.Usage == nil && len(c.Summary) > 0 {
			stored[i] = usageList(c.Summary)
		}
		total += len(stored[i])
		parent[i] = -1
		if p, ok := index[c.ParentID]; ok && c.ParentID != "" && p != i {
			parent[i] = p
			pending[p]++
		}
	}
	// Own usage: a copy of the stored usage (one backing array; a list that grows while
	// merging moves out of it), less the children's for cumulative (SDK-written) calls.
	own := make([][]ModelCount, n)
	backing := make([]ModelCount, total)
	at := 0
	for i := range calls {
		k := copy(backing[at:], stored[i])
		own[i] = backing[at : at+k : at+k]
		at += k
	}
	for i := range calls {
		p := parent[i]
		if p < 0 || !calls[p].Cumulative {
			continue
		}
		for j := range stored[i] {
			if pu := findModel(own[p], stored[i][j].Model); pu != nil {
				pu.add(&stored[i][j].ModelUsage, -1)
			}
		}
	}
	for i := range calls {
		kept := own[i][:0]
		for _, u := range own[i] {
			u.clampNonNegative()
			if u.zero() {
				continue
			}
			if price != nil {
				if pr, ok := price(u.Model, calls[i].StartedAt); ok {
					u.PromptCost = float64(u.PromptTokens) * pr.Prompt
					u.CompletionCost = float64(u.CompletionTokens) * pr.Completion
					u.CacheReadCost = float64(u.CacheRead) * pr.CacheRead
					u.CacheCreationCost = float64(u.CacheCreation) * pr.CacheCreation
				}
				u.HasCost = true
			}
			kept = append(kept, u)
		}
		own[i] = kept
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
		for j := range agg[i] {
			if pu := findModel(agg[p], agg[i][j].Model); pu != nil {
				pu.add(&agg[i][j].ModelUsage, 1)
			} else {
				agg[p] = insertModel(agg[p], agg[i][j])
			}
		}
		if pending[p]--; pending[p] == 0 {
			queue = append(queue, p)
		}
	}
	return agg
}

// findModel returns the entry of model in a list, or nil.
func findModel(l []ModelCount, model string) *ModelUsage {
	for j := range l {
		if l[j].Model == model {
			return &l[j].ModelUsage
		}
	}
	return nil
}

// insertModel adds u to a list in model order.
func insertModel(l []ModelCount, u ModelCount) []ModelCount {
	j := len(l)
	for j > 0 && l[j-1].Model > u.Model {
		j--
	}
	return slices.Insert(l, j, u)
}

// toAggregated converts roll-up results (in model order) to the response shape; one backing
// array holds the entries of all calls (and their costs).
func toAggregated(ids []string, agg [][]ModelCount, withCosts bool) map[string]map[string]*AggregatedUsage {
	total := 0
	for _, l := range agg {
		total += len(l)
	}
	entries := make([]AggregatedUsage, total)
	var costs []float64
	if withCosts {
		costs = make([]float64, 4*total)
	}
	out := make(map[string]map[string]*AggregatedUsage, len(ids))
	for i, id := range ids {
		m := make(map[string]*AggregatedUsage, len(agg[i]))
		for _, u := range agg[i] {
			a := &entries[0]
			entries = entries[1:]
			*a = AggregatedUsage{
				Requests: u.Requests, PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
				TotalTokens: u.TotalTokens, CacheReadInputTokens: u.CacheRead, CacheCreationInputTokens: u.CacheCreation,
			}
			if withCosts {
				c := costs[:4:4]
				costs = costs[4:]
				c[0], c[1], c[2], c[3] = u.PromptCost, u.CompletionCost, u.CacheReadCost, u.CacheCreationCost
				a.PromptTokensTotalCost, a.CompletionTokensTotalCost = &c[0], &c[1]
				a.CacheReadInputTokensTotalCost, a.CacheCreationInputTokensTotalCost = &c[2], &c[3]
			}
			m[u.Model] = a
		}
		out[id] = m
	}
	return out
}

// aggregated is one model's roll-up in the response shape, as toAggregated writes it.
func aggregated(u *ModelCount, withCosts bool) AggregatedUsage {
	a := AggregatedUsage{
		Requests: u.Requests, PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		TotalTokens: u.TotalTokens, CacheReadInputTokens: u.CacheRead, CacheCreationInputTokens: u.CacheCreation,
	}
	if withCosts {
		c := [4]float64{u.PromptCost, u.CompletionCost, u.CacheReadCost, u.CacheCreationCost}
		a.PromptTokensTotalCost, a.CompletionTokensTotalCost = &c[0], &c[1]
		a.CacheReadInputTokensTotalCost, a.CacheCreationInputTokensTotalCost = &c[2], &c[3]
	}
	return a
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

// MarshalJSON writes the usage result without reflection (a roll-up of 10,000 calls is a
// large object); call ids and models are sorted. A result made by rollUpRendered has its
// call_usage written already.
func (r UsageRes) MarshalJSON() ([]byte, error) {
	if r.rendered != nil {
		return r.appendUnfinished(r.rendered), nil
	}
	b := make([]byte, 0, 64+len(r.CallUsage)*160)
	b = append(b, `{"call_usage":{`...)
	for i, id := range sortedKeys(r.CallUsage) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, id)
		b = append(b, ":{"...)
		models := r.CallUsage[id]
		if len(models) == 1 { // the common case, without sorting
			for m, u := range models {
				b = appendJSONString(b, m)
				b = append(b, ':')
				b = u.appendJSON(b)
			}
		} else {
			for j, m := range sortedKeys(models) {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, m)
				b = append(b, ':')
				b = models[m].appendJSON(b)
			}
		}
		b = append(b, '}')
	}
	return r.appendUnfinished(b), nil
}

// appendUnfinished ends the JSON of a result whose call_usage members b holds.
func (r UsageRes) appendUnfinished(b []byte) []byte {
	b = append(b, `},"unfinished_call_ids":[`...)
	for i, id := range r.UnfinishedCallIDs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, id)
	}
	return append(b, "]}"...)
}

// parallelUsageCalls is the number of calls from which a roll-up's result is built on two
// cores (rollUpRendered).
const parallelUsageCalls = 1000

// rollUpRendered is rollUpResult for every call of a large roll-up on two cores: while the
// calls' usage is summed (rollUp), their ids are sorted; then the JSON of call_usage is written
// (UsageRes.MarshalJSON's bytes, in the sorted order from each call's list in model order)
// while the result's maps are built.
func rollUpRendered(calls []UsageCall, pricer Pricer, withCosts bool) UsageRes {
	order := make([]int32, len(calls))
	sorted := make(chan struct{})
	go func() {
		defer close(sorted)
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortFunc(order, func(a, b int32) int { return strings.Compare(calls[a].ID, calls[b].ID) })
	}()
	agg := rollUp(calls, pricer)
	<-sorted
	var b []byte
	rendered := make(chan struct{})
	go func() {
		defer close(rendered)
		b = make([]byte, 0, 64+len(calls)*160)
		b = append(b, `{"call_usage":{`...)
		for k, i := range order {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, calls[i].ID)
			b = append(b, ":{"...)
			for j, u := range agg[i] {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, u.Model)
				b = append(b, ':')
				a := aggregated(&u, withCosts)
				b = a.appendJSON(b)
			}
			b = append(b, '}')
		}
	}()
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.ID
	}
	res := UsageRes{UnfinishedCallIDs: unfinished(calls), CallUsage: toAggregated(ids, agg, withCosts)}
	<-rendered
	res.rendered = b
	return res
}

// appendJSONString appends s as a JSON string: printable ASCII without quotes or backslashes
// as is, anything else as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func (u *AggregatedUsage) appendJSON(b []byte) []byte {
	field := func(b []byte, name string, v int64) []byte {
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
		return strconv.AppendInt(b, v, 10)
	}
	b = append(b, '{')
	b = field(b, "requests", u.Requests)
	b = append(b, ',')
	b = field(b, "prompt_tokens", u.PromptTokens)
	b = append(b, ',')
	b = field(b, "completion_tokens", u.CompletionTokens)
	b = append(b, ',')
	b = field(b, "total_tokens", u.TotalTokens)
	b = append(b, ',')
	b = field(b, "cache_read_input_tokens", u.CacheReadInputTokens)
	b = append(b, ',')
	b = field(b, "cache_creation_input_tokens", u.CacheCreationInputTokens)
	for _, c := range []struct {
		name string
		v    *float64
	}{
		{"prompt_tokens_total_cost", u.PromptTokensTotalCost},
		{"completion_tokens_total_cost", u.CompletionTokensTotalCost},
		{"cache_read_input_tokens_total_cost", u.CacheReadInputTokensTotalCost},
		{"cache_creation_input_tokens_total_cost", u.CacheCreationInputTokensTotalCost},
	} {
		if c.v != nil {
			b = append(b, `,"`...)
			b = append(b, c.name...)
			b = append(b, `":`...)
			b = strconv.AppendFloat(b, *c.v, 'g', -1, 64)
		}
	}
	return append(b, '}')
}

// DefaultUsageLimit is the default number of calls /trace/usage and /calls/usage process.
const DefaultUsageLimit = 10000

func usageLimit(limit *int) (int, error) {
	if limit == nil {
		return DefaultUsageLimit, nil
	}
	if *limit < 1 {
		return 0, fault.Invalid("limit", "limit must be >= 1, got %d", *limit)
	}
	return *limit, nil
}

// TraceUsage computes, for every matching call, its own usage plus the sum over all its
// descendants (per model). When more calls match than limit, it fails with a 400 instead of
// silently dropping calls.
func (s *Service) TraceUsage(ctx context.Context, req TraceUsageReq) (UsageRes, error) {
	limit, err := usageLimit(req.Limit)
	if err != nil {
		return UsageRes{}, err
	}
	cond, err := ParseQuery(req.Query)
	if err != nil {
		return UsageRes{}, err
	}
	q := CallQuery{Cond: cond, Limit: limit}
	if req.Filter != nil {
		q.Filter = *req.Filter
	}
	calls, err := s.store.UsageCalls(ctx, req.ProjectID, q, req.IncludeCosts)
	if err != nil {
		return UsageRes{}, err
	}
	if len(calls) > limit {
		return UsageRes{}, fault.Invalid("limit", "more than %d calls match: narrow the filter (for example trace_ids) or raise limit; no partial usage is returned", limit)
	}
	return s.rollUpResult(ctx, req.ProjectID, calls, req.IncludeCosts, nil), nil
}

// CallsUsage computes the usage of whole traces rooted at call ids: each key is a requested
// call with its own usage plus all its descendants'.
func (s *Service) CallsUsage(ctx context.Context, req CallsUsageReq) (UsageRes, error) {
	limit, err := usageLimit(req.Limit)
	if err != nil {
		return UsageRes{}, err
	}
	if len(req.CallIDs) == 0 {
		return UsageRes{}, badField("call_ids", "must name at least one call")
	}
	traceIDs := map[string]bool{}
	err = s.store.QueryCalls(ctx, req.ProjectID, CallQuery{Filter: CallsFilter{CallIDs: req.CallIDs}, Limit: -1}, func(c CallRow) error {
		traceIDs[c.TraceID] = true
		return nil
	})
	if err != nil {
		return UsageRes{}, err
	}
	var calls []UsageCall
	if len(traceIDs) > 0 {
		calls, err = s.store.UsageCalls(ctx, req.ProjectID, CallQuery{Filter: CallsFilter{TraceIDs: sortedKeys(traceIDs)}, Limit: limit}, req.IncludeCosts)
		if err != nil {
			return UsageRes{}, err
		}
		if len(calls) > limit {
			return UsageRes{}, fault.Invalid("limit", "Cannot compute complete usage: the traces of these calls have more than %d calls", limit)
		}
	}
	return s.rollUpResult(ctx, req.ProjectID, calls, req.IncludeCosts, req.CallIDs), nil
}

func (s *Service) rollUpResult(ctx context.Context, project string, calls []UsageCall, withCosts bool, keys []string) UsageRes {
	var pricer Pricer
	if withCosts {
		pricer = s.lazyPricer(ctx, project)
	}
	if keys == nil && len(calls) >= parallelUsageCalls && runtime.GOMAXPROCS(0) > 1 {
		return rollUpRendered(calls, pricer, withCosts)
	}
	agg := rollUp(calls, pricer)
	res := UsageRes{UnfinishedCallIDs: unfinished(calls)}
	if keys == nil {
		ids := make([]string, len(calls))
		for i, c := range calls {
			ids[i] = c.ID
		}
		res.CallUsage = toAggregated(ids, agg, withCosts)
		return res
	}
	at := make(map[string]int, len(calls))
	for i, c := range calls {
		at[c.ID] = i
	}
	sel := make([][]ModelCount, len(keys))
	for k, id := range keys {
		if i, ok := at[id]; ok {
			sel[k] = agg[i]
		}
	}
	res.CallUsage = toAggregated(keys, sel, withCosts)
	return res
}

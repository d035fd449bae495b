package trace

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/honeai/hone/internal/fault"
)

// TotalCostField is a derived call field of sorts (a Hone addition, beside
// TotalTokensField): the cost of a call's own summary.usage, priced as include_costs prices
// it (per model, at the price effective at the call's start), summed over the models and the
// four token kinds; that is, the sum of the *_total_cost fields of summary.weave.costs. A
// call's cost is unknown when it has no usage or none of its models has a price: such calls
// sort last in both directions. Prices are kept per model and time (trace_costs) and a call
// is priced when it is read, so the store cannot order by it: the matching calls' usage is
// read (the few bytes of summary_usage, no JSON), priced and ordered here, and the page's
// calls are then read by id. It may only be the first key of sort_by (the later keys, then
// id, break its ties) and cannot be queried. Hone Studio sorts the calls table's cost column
// by it.
const TotalCostField = "summary.weave.total_cost"

// costSortChunk is how many calls of a cost-sorted page are read from the store at once.
const costSortChunk = 256

// costSortIndex returns the index of TotalCostField in sorts, or -1; it is an error anywhere
// but first.
func costSortIndex(sorts []SortBy) (int, error) {
	at := -1
	for i, s := range sorts {
		if s.Field != TotalCostField {
			continue
		}
		if i > 0 {
			return -1, fault.Invalid(fmt.Sprintf("sort_by[%d].field", i), "sort_by[%d]: %s can only be the first sort key (the later keys break its ties)", i, TotalCostField)
		}
		at = i
	}
	return at, nil
}

// costEntry is a call in the order of a cost sort: its id, cost (known false: last) and its
// position in the store's order of the later sort keys (the tiebreak).
type costEntry struct {
	id    string
	cost  float64
	known bool
	seq   int
}

// queryCallsByCost streams the calls matching q to each in the order of q.Sort, whose first
// key is TotalCostField: every matching call's usage is read and priced, the page
// (q.Offset, q.Limit) picked, and its calls read by id, costSortChunk at a time. At most
// offset+limit calls (every matching call when there is no limit) are held in the order.
func (s *Service) queryCallsByCost(ctx context.Context, project string, q CallQuery, each func(CallRow) error) error {
	dir := strings.ToLower(q.Sort[0].Dir())
	if dir == "" {
		dir = "asc"
	}
	if dir != "asc" && dir != "desc" {
		return fault.Invalid("sort_by[0].direction", "sort_by[0]: invalid sort direction %q (asc or desc)", q.Sort[0].Dir())
	}
	desc := dir == "desc"
	keep := -1 // how many of the first calls in order are needed
	if q.Limit >= 0 {
		keep = q.Offset + q.Limit
		if keep == 0 {
			return nil
		}
	}
	before := func(a, b costEntry) int {
		switch {
		case a.known != b.known:
			if a.known {
				return -1
			}
			return 1
		case a.known && a.cost != b.cost:
			if (a.cost < b.cost) != desc {
				return -1
			}
			return 1
		}
		return a.seq - b.seq
	}
	pricer := s.lazyPricer(ctx, project)
	var order []costEntry
	seq := 0
	all := CallQuery{Filter: q.Filter, Cond: q.Cond, Sort: q.Sort, Limit: -1}
	err := s.store.QueryCallUsage(ctx, project, all, func(id, startedAt string, usage []ModelCount) error {
		e := costEntry{id: id, seq: seq}
		seq++
		for _, u := range usage {
			if p, ok := pricer(u.Model, startedAt); ok {
				e.cost += float64(u.PromptTokens)*p.Prompt + float64(u.CompletionTokens)*p.Completion +
					float64(u.CacheRead)*p.CacheRead + float64(u.CacheCreation)*p.CacheCreation
				e.known = true
			}
		}
		order = append(order, e)
		if keep > 0 && len(order) >= 2*keep+1024 {
			slices.SortFunc(order, before)
			order = order[:keep]
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(order, before)
	if keep >= 0 && len(order) > keep {
		order = order[:keep]
	}
	if q.Offset >= len(order) {
		return nil
	}
	order = order[q.Offset:]
	for lo := 0; lo < len(order); lo += costSortChunk {
		part := order[lo:min(lo+costSortChunk, len(order))]
		ids := make([]string, len(part))
		for i, e := range part {
			ids[i] = e.id
		}
		rows := make(map[string]CallRow, len(part))
		err := s.store.QueryCalls(ctx, project, CallQuery{Filter: CallsFilter{CallIDs: ids}, Limit: -1}, func(c CallRow) error {
			rows[c.ID] = c
			return nil
		})
		if err != nil {
			return err
		}
		for _, id := range ids {
			c, ok := rows[id]
			if !ok {
				continue // deleted since its usage was read
			}
			delete(rows, id)
			if err := each(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// queryCalls is the store's QueryCalls, with the cost sort (TotalCostField) done here.
func (s *Service) queryCalls(ctx context.Context, project string, q CallQuery, each func(CallRow) error) error {
	at, err := costSortIndex(q.Sort)
	if err != nil {
		return err
	}
	if at < 0 {
		return s.store.QueryCalls(ctx, project, q, each)
	}
	return s.queryCallsByCost(ctx, project, q, each)
}

package trace

import (
	"container/list"
	"context"
	"strings"
	"sync"
)

// sortCache keeps the sorted row positions of recently sorted tables. Tables are immutable
// (content-addressed), so an order once computed stays right; pages of a sorted table are then
// served by position without sorting again.
type sortCache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[string]*list.Element
}

type sortEntry struct {
	key       string
	positions []int32
}

func newSortCache(max int) *sortCache {
	return &sortCache{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *sortCache) get(key string) ([]int32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.ll.MoveToFront(el)
		return el.Value.(*sortEntry).positions, true
	}
	return nil, false
}

func (c *sortCache) put(key string, positions []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.ll.MoveToFront(el)
		el.Value.(*sortEntry).positions = positions
		return
	}
	c.items[key] = c.ll.PushFront(&sortEntry{key: key, positions: positions})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*sortEntry).key)
	}
}

func sortKey(project, digest string, sorts []SortBy) string {
	var b strings.Builder
	b.WriteString(project + "\x00" + digest)
	for _, s := range sorts {
		b.WriteString("\x00" + s.Field + "\x01" + s.Dir())
	}
	return b.String()
}

// sortedTablePage serves a sorted page, through the cache when the store can list positions.
func (s *Service) sortedTablePage(ctx context.Context, project, digest string, q TableQuery) ([]TableRowSchema, error) {
	ts, ok := s.store.(TableSorter)
	if !ok {
		return s.store.QueryTable(ctx, project, digest, q)
	}
	key := sortKey(project, digest, q.Sort)
	positions, hit := s.sorts.get(key)
	if !hit {
		var err error
		if positions, err = ts.SortedTablePositions(ctx, project, digest, q.Sort); err != nil {
			return nil, err
		}
		s.sorts.put(key, positions)
	}
	lo := min(q.Offset, len(positions))
	hi := len(positions)
	if q.Limit >= 0 {
		hi = min(lo+q.Limit, hi)
	}
	return ts.TableRowsAt(ctx, project, digest, positions[lo:hi])
}

// ResetSortCache forgets every cached table order (benchmarks use it to time a cold sort).
func (s *Service) ResetSortCache() { s.sorts = newSortCache(s.sorts.max) }

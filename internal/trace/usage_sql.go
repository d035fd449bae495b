package trace

import (
	"context"
	"database/sql"
	"encoding/json"
)

// UsageCalls loads what the usage roll-up needs of the calls matching q (at most q.Limit+1,
// so that the caller can tell the limit was exceeded); started_at only when withStart (costs).
func (s *SQLStore) UsageCalls(ctx context.Context, project string, q CallQuery, withStart bool) ([]UsageCall, error) {
	where, args, err := s.callWhere(project, q)
	if err != nil {
		return nil, err
	}
	started := "NULL"
	if withStart {
		started = "started_at"
	}
	sqlq := `SELECT id, parent_id, summary_usage, CASE WHEN summary_usage IS NULL THEN summary END,
		ended_at IS NOT NULL, sdk_cumulative, ` + started + ` FROM trace_calls WHERE ` + where
	if q.Limit >= 0 {
		sqlq += " LIMIT ?"
		args = append(args, q.Limit+1)
	}
	rows, err := s.db.Query(ctx, sqlq, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	// Calls are gathered in pages and copied once into the result; the usage lists of all
	// calls share backing arrays, and each model name is one string.
	var pages [][]UsageCall
	page := make([]UsageCall, 0, 256)
	var arena []ModelCount
	models := map[string]string{}
	var parent, start sql.NullString
	var usage, summary sql.RawBytes // valid until the next Next: read here
	n := 0
	for rows.Next() {
		var c UsageCall
		var cum int
		if err := rows.Scan(&c.ID, &parent, &usage, &summary, &c.Ended, &cum, &start); err != nil {
			return nil, err
		}
		c.ParentID, c.StartedAt = parent.String, start.String
		if usage != nil {
			if len(arena) == cap(arena) {
				arena = make([]ModelCount, 0, 512)
			}
			at := len(arena)
			if u, ok := decodeUsageInto(arena, usage, models); ok {
				arena = u
				c.Usage = arena[at:len(arena):len(arena)] // empty, not nil: no usage
			}
		} else if summary != nil {
			c.Summary = json.RawMessage(string(summary))
		}
		c.Cumulative = cum == 1
		if len(page) == cap(page) {
			pages = append(pages, page)
			page = make([]UsageCall, 0, 2*cap(page))
		}
		page = append(page, c)
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(pages) == 0 {
		return page, nil
	}
	out := make([]UsageCall, 0, n)
	for _, p := range pages {
		out = append(out, p...)
	}
	return append(out, page...), nil
}

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
	// Few columns: reading a column costs more than the VM's work per row. The usage text
	// (usagecol.go) never starts with 'j'; a row written before it existed gives its summary
	// after a 'j'. flags is ended (1) + cumulative (2).
	sqlq := `SELECT id, parent_id, CASE WHEN summary_usage IS NULL THEN 'j' || summary ELSE summary_usage END,
		CASE WHEN ended_at IS NULL THEN 0 ELSE 1 END + 2 * sdk_cumulative`
	if withStart {
		sqlq += ", started_at"
	}
	sqlq += " FROM trace_calls WHERE " + where
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
	var id string
	var parent, start sql.NullString
	var usage sql.RawBytes // valid until the next Next: read here
	var flags int
	dest := []any{&id, &parent, &usage, &flags}
	if withStart {
		dest = append(dest, &start)
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		c := UsageCall{ID: id, ParentID: parent.String, StartedAt: start.String}
		switch {
		case len(usage) > 0 && usage[0] == 'j':
			c.Summary = json.RawMessage(string(usage[1:]))
		case usage != nil:
			if len(arena) == cap(arena) {
				arena = make([]ModelCount, 0, 512)
			}
			at := len(arena)
			if u, ok := decodeUsageInto(arena, usage, models); ok {
				arena = u
				c.Usage = arena[at:len(arena):len(arena)] // empty, not nil: no usage
			}
		}
		c.Ended, c.Cumulative = flags&1 != 0, flags&2 != 0
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

// QueryCallUsage streams the id, start and usage counts of every call matching q to each, in
// the order of q.Sort's keys after the first (which is TotalCostField, ordered by the caller),
// then id; q.Limit and q.Offset are not applied. A row written before summary_usage existed
// gives the usage of its summary.
func (s *SQLStore) QueryCallUsage(ctx context.Context, project string, q CallQuery, each func(id, startedAt string, usage []ModelCount) error) error {
	where, args, err := s.callWhere(project, q)
	if err != nil {
		return err
	}
	order := "id ASC"
	if len(q.Sort) > 1 {
		o, sargs, err := sortSQLFrom(s.db.Dialect(), q.Sort, s.callField, "sort_by", 1)
		if err != nil {
			return err
		}
		order = o + ", id ASC"
		args = append(args, sargs...)
	}
	rows, err := s.db.Query(ctx, `SELECT id, started_at, CASE WHEN summary_usage IS NULL THEN 'j' || summary ELSE summary_usage END
		FROM trace_calls WHERE `+where+` ORDER BY `+order, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	models := map[string]string{}
	var id, started string
	var usage sql.RawBytes // valid until the next Next: read here
	var list []ModelCount
	for rows.Next() {
		if err := rows.Scan(&id, &started, &usage); err != nil {
			return err
		}
		list = list[:0]
		switch {
		case len(usage) > 0 && usage[0] == 'j':
			list = usageList(usage[1:])
		case len(usage) > 0:
			if u, ok := decodeUsageInto(list, usage, models); ok {
				list = u
			}
		}
		if err := each(id, started, list); err != nil {
			return err
		}
	}
	return rows.Err()
}

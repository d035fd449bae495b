package trace

import (
	"context"
	"database/sql"
	"encoding/json"
)

// UsageCalls loads what the usage roll-up needs of the calls matching q (at most q.Limit+1,
// so that the caller can tell the limit was exceeded).
func (s *SQLStore) UsageCalls(ctx context.Context, project string, q CallQuery) ([]UsageCall, error) {
	where, args, err := s.callWhere(project, q)
	if err != nil {
		return nil, err
	}
	sqlq := `SELECT id, parent_id, summary_usage, CASE WHEN summary_usage IS NULL THEN summary END,
		ended_at IS NOT NULL, sdk_cumulative, started_at FROM trace_calls WHERE ` + where
	if q.Limit >= 0 {
		sqlq += " LIMIT ?"
		args = append(args, q.Limit+1)
	}
	rows, err := s.db.Query(ctx, sqlq, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []UsageCall
	for rows.Next() {
		var c UsageCall
		var parent, started sql.NullString
		var usage, summary sql.RawBytes // valid until the next Next: read here
		var cum int
		if err := rows.Scan(&c.ID, &parent, &usage, &summary, &c.Ended, &cum, &started); err != nil {
			return nil, err
		}
		c.ParentID, c.StartedAt = parent.String, started.String
		if usage != nil {
			if u, ok := decodeUsage(usage); ok {
				c.Usage = u
				if c.Usage == nil {
					c.Usage = []ModelCount{} // no usage (nil would mean: read the summary)
				}
			}
		} else if summary != nil {
			c.Summary = json.RawMessage(string(summary))
		}
		c.Cumulative = cum == 1
		out = append(out, c)
	}
	return out, rows.Err()
}

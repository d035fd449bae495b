package jobs

import "context"

// Count is how many jobs of a kind are in a state.
type Count struct {
	Kind, Status string
	N            int64
}

// Counts are the jobs waiting and running, by kind and state (metrics: a queue's saturation).
// On a shared store every node sees the same counts.
func (q *Queue) Counts(ctx context.Context) ([]Count, error) {
	rows, err := q.db.Query(ctx, `SELECT kind, status, COUNT(*) FROM train_jobs WHERE status IN (?, ?) GROUP BY kind, status`, Queued, Running)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Count
	for rows.Next() {
		var c Count
		if err := rows.Scan(&c.Kind, &c.Status, &c.N); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

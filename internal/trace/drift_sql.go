package trace

import (
	"context"

	"github.com/honeai/hone/internal/db"
)

// InsertExtraFields keeps request fields Hone did not know.
func (s *SQLStore) InsertExtraFields(ctx context.Context, rows []ExtraFieldsRow) error {
	if len(rows) == 0 {
		return nil
	}
	return s.db.WriteTx(ctx, func(tx *db.Tx) error {
		for _, r := range rows {
			if _, err := tx.Exec(ctx, `INSERT INTO trace_extra_fields (id, project_id, route, target, fields, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
				newID(), r.ProjectID, r.Route, r.Target, string(r.Fields), r.CreatedAt); err != nil {
				return err
			}
		}
		return nil
	})
}

// ExtraFields lists the unknown fields kept for a target of a project, oldest first.
func (s *SQLStore) ExtraFields(ctx context.Context, project, target string) ([]ExtraFieldsRow, error) {
	rows, err := s.db.Query(ctx, `SELECT project_id, route, target, fields, created_at FROM trace_extra_fields
		WHERE project_id = ? AND target = ? ORDER BY created_at, id`, project, target)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ExtraFieldsRow
	for rows.Next() {
		var r ExtraFieldsRow
		var fields string
		if err := rows.Scan(&r.ProjectID, &r.Route, &r.Target, &fields, &r.CreatedAt); err != nil {
			return nil, err
		}
		r.Fields = []byte(fields)
		out = append(out, r)
	}
	return out, rows.Err()
}

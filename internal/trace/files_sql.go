package trace

import (
	"context"
	"database/sql"
	"errors"
)

// PutFile stores a file's content (content-addressed; a second put is a no-op).
func (s *SQLStore) PutFile(ctx context.Context, project, digest, name string, content []byte, at string) error {
	_, err := s.db.Exec(ctx, `INSERT INTO trace_files (project_id, digest, name, size_bytes, content, created_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (project_id, digest) DO NOTHING`, project, digest, name, len(content), content, at)
	return err
}

// HasFile reports whether a file is stored.
func (s *SQLStore) HasFile(ctx context.Context, project, digest string) (bool, error) {
	var n int
	err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM trace_files WHERE project_id = ? AND digest = ?`, project, digest).Scan(&n)
	return n > 0, err
}

// GetFile returns a file's content.
func (s *SQLStore) GetFile(ctx context.Context, project, digest string) ([]byte, error) {
	var b []byte
	err := s.db.QueryRow(ctx, `SELECT content FROM trace_files WHERE project_id = ? AND digest = ?`, project, digest).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return b, err
}

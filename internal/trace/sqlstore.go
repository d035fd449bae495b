package trace

import (
	"context"
	"database/sql"
	"strings"
	"sync"

	"github.com/honeai/hone/internal/db"
)

// SQLStore is the Store on internal/db. JSON values are stored as TEXT in both dialects; on
// PostgreSQL queries read them with ::jsonb.
type SQLStore struct {
	db    *db.DB
	stmts sync.Map // name -> *sql.Stmt prepared on the SQLite writer (warmStmts)
}

// NewSQLStore returns the store on d; call Migrate first.
func NewSQLStore(d *db.DB) *SQLStore { return &SQLStore{db: d} }

// Migrate applies the trace component's migrations.
func (s *SQLStore) Migrate(ctx context.Context) error { return s.db.Migrate(ctx, "trace", Migrations) }

// DB is the underlying store.
func (s *SQLStore) DB() *db.DB { return s.db }

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func strOrEmpty(ns sql.NullString) string {
	if ns.Valid {
		return ns.String
	}
	return ""
}

func strPtr(ns sql.NullString) *string {
	if !ns.Valid {
		return nil
	}
	s := ns.String
	return &s
}

func inList(n int) string {
	if n <= 0 {
		return "(NULL)"
	}
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func (s *SQLStore) limitOffset(q string, args []any, limit, offset int) (string, []any) {
	if limit >= 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	} else if offset > 0 && s.db.Dialect() == db.SQLite {
		q += " LIMIT -1" // SQLite needs a LIMIT before OFFSET
	}
	if offset > 0 {
		q += " OFFSET ?"
		args = append(args, offset)
	}
	return q, args
}

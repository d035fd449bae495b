package db

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"
)

// Migration is one versioned schema change of a component. SQLite and Postgres hold the
// statements for each dialect (several statements may be separated by semicolons); when
// Postgres is empty the SQLite text is used for both.
type Migration struct {
	Version  int
	SQLite   string
	Postgres string
}

const migrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	component TEXT NOT NULL,
	version INTEGER NOT NULL,
	applied_at TEXT NOT NULL,
	PRIMARY KEY (component, version)
)`

// Migrate applies the migrations of component that the store has not applied yet, in version
// order, each in its own transaction together with its record in schema_migrations. Components
// (auth, trace, registry, jobs, ...) own their migration lists, so no list is shared. It is safe
// to call from several processes at once.
func (d *DB) Migrate(ctx context.Context, component string, ms []Migration) error {
	if component == "" {
		return fmt.Errorf("db: migrate: empty component name")
	}
	sorted := append([]Migration(nil), ms...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Version < sorted[j].Version })
	for i, m := range sorted {
		if m.Version <= 0 || (i > 0 && sorted[i-1].Version == m.Version) {
			return fmt.Errorf("db: migrate %s: bad or duplicate version %d", component, m.Version)
		}
	}
	if _, err := d.w.ExecContext(ctx, migrationsTable); err != nil {
		return fmt.Errorf("db: migrate %s: %w", component, err)
	}
	for _, m := range sorted {
		err := d.WriteTx(ctx, func(tx *Tx) error {
			if d.dialect == Postgres {
				// Serialise concurrent migrators of the same component across processes.
				h := fnv.New64a()
				h.Write([]byte("hone-migrate:" + component))
				if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(?)", int64(h.Sum64()>>1)); err != nil {
					return err
				}
			}
			var n int
			if err := tx.QueryRow(ctx, "SELECT COUNT(*) FROM schema_migrations WHERE component = ? AND version = ?", component, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			text := m.SQLite
			if d.dialect == Postgres && m.Postgres != "" {
				text = m.Postgres
			}
			for _, stmt := range splitStatements(text) {
				if _, err := tx.tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("statement %q: %w", firstLine(stmt), err)
				}
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (component, version, applied_at) VALUES (?, ?, ?)",
				component, m.Version, FormatTime(time.Now()))
			return err
		})
		if err != nil {
			return fmt.Errorf("db: migrate %s to version %d: %w", component, m.Version, err)
		}
	}
	return nil
}

// AppliedVersion returns the highest applied migration version of component (0 if none).
func (d *DB) AppliedVersion(ctx context.Context, component string) (int, error) {
	var v int
	err := d.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE component = ?", component).Scan(&v)
	return v, err
}

// splitStatements splits a migration text on semicolons that end statements (outside quotes
// and comments).
func splitStatements(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(s) && s[j] != c {
				j++
			}
			i = j
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '$' && i+1 < len(s) && s[i+1] == '$':
			// A dollar-quoted body (PostgreSQL functions) runs to the next $$.
			if j := strings.Index(s[i+2:], "$$"); j >= 0 {
				i += j + 3
			} else {
				i = len(s)
			}
		case c == ';':
			if stmt := strings.TrimSpace(s[start:i]); stmt != "" {
				out = append(out, stmt)
			}
			start = i + 1
		}
	}
	if stmt := strings.TrimSpace(s[start:]); stmt != "" {
		out = append(out, stmt)
	}
	return out
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

package trace

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/db"
)

// SQLStore is the Store on internal/db. JSON values are stored as TEXT in both dialects; on
// PostgreSQL queries read them with ::jsonb.
type SQLStore struct {
	db *db.DB
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

// ---- Objects ----

// InsertObject stores a new version, or does nothing when the same digest of the object exists
// and is not deleted. Version indexes count every version ever created (deleted ones too), so
// they are monotonic; the new version becomes the latest.
func (s *SQLStore) InsertObject(ctx context.Context, o ObjectRow) (bool, error) {
	created := false
	err := s.db.WriteTx(ctx, func(tx *db.Tx) error {
		var deleted sql.NullString
		err := tx.QueryRow(ctx, `SELECT deleted_at FROM trace_objects WHERE project_id = ? AND object_id = ? AND digest = ?`,
			o.ProjectID, o.ObjectID, o.Digest).Scan(&deleted)
		exists := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if exists && !deleted.Valid {
			return nil
		}
		var next int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version_index) + 1, 0) FROM trace_objects WHERE project_id = ? AND object_id = ?`,
			o.ProjectID, o.ObjectID).Scan(&next); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE trace_objects SET is_latest = 0 WHERE project_id = ? AND object_id = ? AND is_latest = 1`,
			o.ProjectID, o.ObjectID); err != nil {
			return err
		}
		if exists {
			_, err = tx.Exec(ctx, `UPDATE trace_objects SET deleted_at = NULL, is_latest = 1, version_index = ?, created_at = ?
				WHERE project_id = ? AND object_id = ? AND digest = ?`, next, o.CreatedAt, o.ProjectID, o.ObjectID, o.Digest)
		} else {
			_, err = tx.Exec(ctx, `INSERT INTO trace_objects (project_id, object_id, digest, kind, base_object_class, leaf_object_class,
				val, size_bytes, created_at, version_index, is_latest, wb_user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)`,
				o.ProjectID, o.ObjectID, o.Digest, o.Kind, nullStr(o.BaseObjectClass), nullStr(o.LeafObjectClass),
				string(o.Val), o.SizeBytes, o.CreatedAt, next, nullStr(o.WBUserID))
		}
		created = err == nil
		return err
	})
	return created, err
}

const objectCols = `project_id, object_id, digest, kind, base_object_class, leaf_object_class, size_bytes, created_at, version_index, is_latest, deleted_at, wb_user_id`

func scanObject(sc interface{ Scan(...any) error }, withVal bool) (ObjectRow, error) {
	var o ObjectRow
	var base, leaf, deleted, user sql.NullString
	var latest int
	dest := []any{&o.ProjectID, &o.ObjectID, &o.Digest, &o.Kind, &base, &leaf, &o.SizeBytes, &o.CreatedAt, &o.VersionIndex, &latest, &deleted, &user}
	var val string
	if withVal {
		dest = append(dest, &val)
	}
	if err := sc.Scan(dest...); err != nil {
		return ObjectRow{}, err
	}
	o.BaseObjectClass, o.LeafObjectClass, o.DeletedAt, o.WBUserID = strOrEmpty(base), strOrEmpty(leaf), strOrEmpty(deleted), strOrEmpty(user)
	o.IsLatest = latest == 1
	if withVal {
		o.Val = []byte(val)
	}
	return o, nil
}

// ReadObject reads one version; a deleted version is ErrDeleted (with the row), a missing one
// ErrNotFound.
func (s *SQLStore) ReadObject(ctx context.Context, project, objectID string, sel VersionSelector) (ObjectRow, error) {
	q := `SELECT ` + objectCols + `, val FROM trace_objects WHERE project_id = ? AND object_id = ? AND `
	args := []any{project, objectID}
	switch {
	case sel.Latest:
		q += `is_latest = 1 AND deleted_at IS NULL`
	case sel.Version >= 0:
		q += `version_index = ?`
		args = append(args, sel.Version)
	case sel.Alias != "":
		q += `digest = (SELECT digest FROM trace_aliases WHERE project_id = ? AND object_id = ? AND alias = ?)`
		args = append(args, project, objectID, sel.Alias)
	default:
		q += `digest = ?`
		args = append(args, sel.Digest)
	}
	o, err := scanObject(s.db.QueryRow(ctx, q, args...), true)
	if errors.Is(err, sql.ErrNoRows) {
		return ObjectRow{}, ErrNotFound
	}
	if err != nil {
		return ObjectRow{}, err
	}
	if o.DeletedAt != "" {
		return o, ErrDeleted
	}
	return o, nil
}

// QueryObjects answers /objs/query. Deleted versions are never returned.
func (s *SQLStore) QueryObjects(ctx context.Context, project string, q ObjectQuery) ([]ObjectRow, error) {
	val := "val"
	if q.MetadataOnly {
		val = "'{}'"
	}
	where := []string{"project_id = ?", "deleted_at IS NULL"}
	args := []any{project}
	f := q.Filter
	if len(f.ObjectIDs) > 0 {
		where = append(where, "object_id IN "+inList(len(f.ObjectIDs)))
		args = append(args, anys(f.ObjectIDs)...)
	}
	if f.IsOp != nil {
		if *f.IsOp {
			where = append(where, "kind = 'op'")
		} else {
			where = append(where, "kind <> 'op'")
		}
	}
	if f.LatestOnly != nil && *f.LatestOnly {
		where = append(where, "is_latest = 1")
	}
	if len(f.BaseObjectClasses) > 0 {
		where = append(where, "base_object_class IN "+inList(len(f.BaseObjectClasses)))
		args = append(args, anys(f.BaseObjectClasses)...)
	}
	if len(f.ExcludeBaseObjectClasses) > 0 {
		// As in Weave: NULL NOT IN (...) is not true, so objects without a base class drop too.
		where = append(where, "base_object_class NOT IN "+inList(len(f.ExcludeBaseObjectClasses)))
		args = append(args, anys(f.ExcludeBaseObjectClasses)...)
	}
	if len(f.LeafObjectClasses) > 0 {
		where = append(where, "leaf_object_class IN "+inList(len(f.LeafObjectClasses)))
		args = append(args, anys(f.LeafObjectClasses)...)
	}
	if len(f.Tags) > 0 {
		where = append(where, `EXISTS (SELECT 1 FROM trace_tags t WHERE t.project_id = trace_objects.project_id
			AND t.object_id = trace_objects.object_id AND t.digest = trace_objects.digest AND t.tag IN `+inList(len(f.Tags))+`)`)
		args = append(args, anys(f.Tags)...)
	}
	if len(f.Aliases) > 0 {
		var real []string
		latest := false
		for _, a := range f.Aliases {
			if a == "latest" {
				latest = true
			} else {
				real = append(real, a)
			}
		}
		var ors []string
		if latest {
			ors = append(ors, "is_latest = 1")
		}
		if len(real) > 0 {
			ors = append(ors, `EXISTS (SELECT 1 FROM trace_aliases a WHERE a.project_id = trace_objects.project_id
				AND a.object_id = trace_objects.object_id AND a.digest = trace_objects.digest AND a.alias IN `+inList(len(real))+`)`)
			args = append(args, anys(real)...)
		}
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	}
	order := "created_at ASC, version_index ASC"
	if len(q.Sort) > 0 {
		var parts []string
		for _, sb := range q.Sort {
			parts = append(parts, sb.Field+" "+strings.ToUpper(sb.Dir()))
		}
		order = strings.Join(parts, ", ") + ", version_index ASC"
	}
	sqlq := `SELECT ` + objectCols + `, ` + val + ` FROM trace_objects WHERE ` + strings.Join(where, " AND ") + ` ORDER BY ` + order
	sqlq, args = s.limitOffset(sqlq, args, q.Limit, q.Offset)
	rows, err := s.db.Query(ctx, sqlq, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []ObjectRow{}
	for rows.Next() {
		o, err := scanObject(rows, true)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
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

// DeleteObjects soft-deletes versions (all when digests is empty). Every named digest must
// exist and not be deleted already; then the newest remaining version becomes the latest.
func (s *SQLStore) DeleteObjects(ctx context.Context, project, objectID string, digests []string, at string) ([]DeletedVersion, error) {
	var out []DeletedVersion
	err := s.db.WriteTx(ctx, func(tx *db.Tx) error {
		q := `SELECT digest, base_object_class, leaf_object_class FROM trace_objects WHERE project_id = ? AND object_id = ? AND deleted_at IS NULL`
		args := []any{project, objectID}
		if len(digests) > 0 {
			q += " AND digest IN " + inList(len(digests))
			args = append(args, anys(digests)...)
		}
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		found := map[string]bool{}
		for rows.Next() {
			var d DeletedVersion
			var base, leaf sql.NullString
			if err := rows.Scan(&d.Digest, &base, &leaf); err != nil {
				rows.Close()
				return err
			}
			d.BaseObjectClass, d.LeafObjectClass = strPtr(base), strPtr(leaf)
			found[d.Digest] = true
			out = append(out, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) == 0 {
			return ErrNotFound
		}
		for _, d := range digests {
			if !found[d] {
				return fmt.Errorf("%w: %s:%s", ErrNotFound, objectID, d)
			}
		}
		for _, d := range out {
			if _, err := tx.Exec(ctx, `UPDATE trace_objects SET deleted_at = ?, is_latest = 0 WHERE project_id = ? AND object_id = ? AND digest = ?`,
				at, project, objectID, d.Digest); err != nil {
				return err
			}
		}
		// The newest version left standing is the latest.
		_, err = tx.Exec(ctx, `UPDATE trace_objects SET is_latest = 1 WHERE project_id = ? AND object_id = ? AND digest = (
			SELECT digest FROM trace_objects WHERE project_id = ? AND object_id = ? AND deleted_at IS NULL ORDER BY version_index DESC LIMIT 1)`,
			project, objectID, project, objectID)
		return err
	})
	return out, err
}

func (s *SQLStore) objectExists(ctx context.Context, tx *db.Tx, project, objectID, digest string) error {
	var n int
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM trace_objects WHERE project_id = ? AND object_id = ? AND digest = ? AND deleted_at IS NULL`,
		project, objectID, digest).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// AddTags tags a version (existing tags are kept).
func (s *SQLStore) AddTags(ctx context.Context, project, objectID, digest string, tags []string, at string) error {
	return s.db.WriteTx(ctx, func(tx *db.Tx) error {
		if err := s.objectExists(ctx, tx, project, objectID, digest); err != nil {
			return err
		}
		for _, t := range tags {
			if _, err := tx.Exec(ctx, `INSERT INTO trace_tags (project_id, object_id, digest, tag, created_at) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (project_id, object_id, digest, tag) DO NOTHING`, project, objectID, digest, t, at); err != nil {
				return err
			}
		}
		return nil
	})
}

// RemoveTags removes tags from a version.
func (s *SQLStore) RemoveTags(ctx context.Context, project, objectID, digest string, tags []string) error {
	return s.db.WriteTx(ctx, func(tx *db.Tx) error {
		if err := s.objectExists(ctx, tx, project, objectID, digest); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM trace_tags WHERE project_id = ? AND object_id = ? AND digest = ? AND tag IN `+inList(len(tags)),
			append([]any{project, objectID, digest}, anys(tags)...)...)
		return err
	})
}

// SetAliases points aliases of an object at a version (moving them if they pointed elsewhere).
func (s *SQLStore) SetAliases(ctx context.Context, project, objectID, digest string, aliases []string, at string) error {
	return s.db.WriteTx(ctx, func(tx *db.Tx) error {
		if err := s.objectExists(ctx, tx, project, objectID, digest); err != nil {
			return err
		}
		for _, a := range aliases {
			if _, err := tx.Exec(ctx, `INSERT INTO trace_aliases (project_id, object_id, alias, digest, created_at) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (project_id, object_id, alias) DO UPDATE SET digest = excluded.digest, created_at = excluded.created_at`,
				project, objectID, a, digest, at); err != nil {
				return err
			}
		}
		return nil
	})
}

// RemoveAliases removes aliases of an object.
func (s *SQLStore) RemoveAliases(ctx context.Context, project, objectID string, aliases []string) error {
	_, err := s.db.Exec(ctx, `DELETE FROM trace_aliases WHERE project_id = ? AND object_id = ? AND alias IN `+inList(len(aliases)),
		append([]any{project, objectID}, anys(aliases)...)...)
	return err
}

func (s *SQLStore) distinct(ctx context.Context, q, project string) ([]string, error) {
	rows, err := s.db.Query(ctx, q, project)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ListTags lists the project's distinct tags.
func (s *SQLStore) ListTags(ctx context.Context, project string) ([]string, error) {
	return s.distinct(ctx, `SELECT DISTINCT tag FROM trace_tags WHERE project_id = ? ORDER BY tag`, project)
}

// ListAliases lists the project's distinct aliases.
func (s *SQLStore) ListAliases(ctx context.Context, project string) ([]string, error) {
	return s.distinct(ctx, `SELECT DISTINCT alias FROM trace_aliases WHERE project_id = ? ORDER BY alias`, project)
}

// TagsAndAliases returns the sorted tags and aliases of versions.
func (s *SQLStore) TagsAndAliases(ctx context.Context, project string, keys []ObjectKey) (map[ObjectKey][]string, map[ObjectKey][]string, error) {
	tags, aliases := map[ObjectKey][]string{}, map[ObjectKey][]string{}
	if len(keys) == 0 {
		return tags, aliases, nil
	}
	ids := map[string]bool{}
	for _, k := range keys {
		ids[k.ObjectID] = true
	}
	idList := sortedKeys(ids)
	for _, spec := range []struct {
		q   string
		dst map[ObjectKey][]string
	}{
		{`SELECT object_id, digest, tag FROM trace_tags WHERE project_id = ? AND object_id IN ` + inList(len(idList)) + ` ORDER BY tag`, tags},
		{`SELECT object_id, digest, alias FROM trace_aliases WHERE project_id = ? AND object_id IN ` + inList(len(idList)) + ` ORDER BY alias`, aliases},
	} {
		rows, err := s.db.Query(ctx, spec.q, append([]any{project}, anys(idList)...)...)
		if err != nil {
			return nil, nil, err
		}
		for rows.Next() {
			var k ObjectKey
			var v string
			if err := rows.Scan(&k.ObjectID, &k.Digest, &v); err != nil {
				rows.Close()
				return nil, nil, err
			}
			spec.dst[k] = append(spec.dst[k], v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
	}
	return tags, aliases, nil
}

// ---- Tables ----

// InsertTable stores rows (new ones only) and the table (when new), in one transaction.
func (s *SQLStore) InsertTable(ctx context.Context, project, digest string, rowDigests []string, rows []RowData, at string) error {
	return s.db.WriteTx(ctx, func(tx *db.Tx) error {
		if len(rows) > 0 {
			st, err := tx.Prepare(ctx, `INSERT INTO trace_rows (project_id, digest, val, size_bytes) VALUES (?, ?, ?, ?)
				ON CONFLICT (project_id, digest) DO NOTHING`)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if _, err := st.ExecContext(ctx, project, r.Digest, string(r.Val), len(r.Val)); err != nil {
					st.Close()
					return err
				}
			}
			st.Close()
		}
		res, err := tx.Exec(ctx, `INSERT INTO trace_tables (project_id, digest, row_count, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (project_id, digest) DO NOTHING`, project, digest, len(rowDigests), at)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // the same table exists
		}
		ids, err := rowIDs(ctx, tx, project, rowDigests)
		if err != nil {
			return err
		}
		st, err := tx.Prepare(ctx, `INSERT INTO trace_table_entries (project_id, table_digest, idx, row_id) VALUES (?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for i, d := range rowDigests {
			id, ok := ids[d]
			if !ok {
				return fmt.Errorf("%w: row %s", ErrNotFound, d)
			}
			if _, err := st.ExecContext(ctx, project, digest, i, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// rowIDs maps row digests of a project to their row ids.
func rowIDs(ctx context.Context, tx *db.Tx, project string, digests []string) (map[string]int64, error) {
	uniq := map[string]bool{}
	for _, d := range digests {
		uniq[d] = true
	}
	list := sortedKeys(uniq)
	out := make(map[string]int64, len(list))
	const chunk = 500
	for i := 0; i < len(list); i += chunk {
		part := list[i:min(i+chunk, len(list))]
		rows, err := tx.Query(ctx, `SELECT id, digest FROM trace_rows WHERE project_id = ? AND digest IN `+inList(len(part)),
			append([]any{project}, anys(part)...)...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id int64
			var d string
			if err := rows.Scan(&id, &d); err != nil {
				rows.Close()
				return nil, err
			}
			out[d] = id
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TableRowDigests returns a table's row digests in order.
func (s *SQLStore) TableRowDigests(ctx context.Context, project, digest string) ([]string, error) {
	var out []string
	err := s.db.ReadTx(ctx, func(tx *db.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT row_count FROM trace_tables WHERE project_id = ? AND digest = ?`, project, digest).Scan(&n); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		rows, err := tx.Query(ctx, `SELECT r.digest FROM trace_table_entries e JOIN trace_rows r ON r.id = e.row_id
			WHERE e.project_id = ? AND e.table_digest = ? ORDER BY e.idx`, project, digest)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = make([]string, 0, n)
		for rows.Next() {
			var d string
			if err := rows.Scan(&d); err != nil {
				return err
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	return out, err
}

func (s *SQLStore) tableExists(ctx context.Context, project, digest string) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `SELECT row_count FROM trace_tables WHERE project_id = ? AND digest = ?`, project, digest).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	return n, err
}

// QueryTable returns a page of a table's rows with their absolute positions.
func (s *SQLStore) QueryTable(ctx context.Context, project, digest string, q TableQuery) ([]TableRowSchema, error) {
	if _, err := s.tableExists(ctx, project, digest); err != nil {
		return nil, err
	}
	where := "e.project_id = ? AND e.table_digest = ?"
	args := []any{project, digest}
	if q.RowDigests != nil {
		where += " AND r.digest IN " + inList(len(q.RowDigests))
		args = append(args, anys(q.RowDigests)...)
	}
	order := "e.idx"
	limit, offset := q.Limit, q.Offset
	if len(q.Sort) > 0 {
		var err error
		var sargs []any
		order, sargs, err = SortSQL(s.db.Dialect(), q.Sort, func(field string) (string, []any, ValueType, error) {
			e, a, t := JSONField(s.db.Dialect(), "r.val", strings.Split(field, "."))
			return e, a, t, nil
		}, "sort_by")
		if err != nil {
			return nil, err
		}
		order += ", e.idx"
		args = append(args, sargs...)
	} else if q.RowDigests == nil && offset > 0 {
		// Positions are contiguous: seek instead of skipping.
		where += " AND e.idx >= ?"
		args = append(args, offset)
		offset = 0
	}
	sqlq := `SELECT e.idx, r.digest, r.val FROM trace_table_entries e
		JOIN trace_rows r ON r.id = e.row_id
		WHERE ` + where
	sqlq += " ORDER BY " + order // sort arguments follow the WHERE arguments
	sqlq, args = s.limitOffset(sqlq, args, limit, offset)
	rows, err := s.db.Query(ctx, sqlq, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []TableRowSchema{}
	for rows.Next() {
		var r TableRowSchema
		var val string
		if err := rows.Scan(&r.OriginalIndex, &r.Digest, &val); err != nil {
			return nil, err
		}
		r.Val = json.RawMessage(val)
		out = append(out, r)
	}
	return out, rows.Err()
}

// TableStats counts rows of tables (and sums their row sizes).
func (s *SQLStore) TableStats(ctx context.Context, project string, digests []string) ([]TableStats, error) {
	out := make([]TableStats, 0, len(digests))
	for _, d := range digests {
		var st TableStats
		st.Digest = d
		var size sql.NullInt64
		err := s.db.QueryRow(ctx, `SELECT t.row_count, (SELECT SUM(r.size_bytes) FROM trace_table_entries e JOIN trace_rows r
			ON r.id = e.row_id WHERE e.project_id = t.project_id AND e.table_digest = t.digest)
			FROM trace_tables t WHERE t.project_id = ? AND t.digest = ?`, project, d).Scan(&st.Count, &size)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%w: table %s", ErrNotFound, d)
		}
		if err != nil {
			return nil, err
		}
		v := size.Int64
		st.StorageSizeBytes = &v
		out = append(out, st)
	}
	return out, nil
}

// RowsExist returns which of digests are not stored rows of the project.
func (s *SQLStore) RowsExist(ctx context.Context, project string, digests []string) ([]string, error) {
	have, err := s.ReadRows(ctx, project, digests)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, d := range digests {
		if _, ok := have[d]; !ok {
			missing = append(missing, d)
		}
	}
	return missing, nil
}

// ReadRows returns the values of stored rows by digest.
func (s *SQLStore) ReadRows(ctx context.Context, project string, digests []string) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	const chunk = 500
	for i := 0; i < len(digests); i += chunk {
		part := digests[i:min(i+chunk, len(digests))]
		rows, err := s.db.Query(ctx, `SELECT digest, val FROM trace_rows WHERE project_id = ? AND digest IN `+inList(len(part)),
			append([]any{project}, anys(part)...)...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var d, v string
			if err := rows.Scan(&d, &v); err != nil {
				rows.Close()
				return nil, err
			}
			out[d] = json.RawMessage(v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ---- Files ----

// PutFile stores a file's content (content-addressed; a second put is a no-op).
func (s *SQLStore) PutFile(ctx context.Context, project, digest, name string, content []byte, at string) error {
	_, err := s.db.Exec(ctx, `INSERT INTO trace_files (project_id, digest, name, size_bytes, content, created_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (project_id, digest) DO NOTHING`, project, digest, name, len(content), content, at)
	return err
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

// sortKey is one row's value of one sort field, in SQLite's order: missing (and JSON null)
// last, then numbers (booleans are 0/1) by value, then text (and the JSON text of arrays and
// objects) by bytes.
type sortVal struct {
	kind uint8 // 1 number, 2 text, 3 missing
	num  float64
	text string
}

func compareSortVals(a, b sortVal, desc bool) int {
	if a.kind != b.kind {
		if a.kind == 3 || b.kind == 3 { // missing is last in both directions
			if a.kind == 3 {
				return 1
			}
			return -1
		}
		c := int(a.kind) - int(b.kind)
		if desc {
			c = -c
		}
		return c
	}
	c := 0
	switch a.kind {
	case 1:
		if a.num < b.num {
			c = -1
		} else if a.num > b.num {
			c = 1
		}
	case 2:
		c = strings.Compare(a.text, b.text)
	}
	if desc {
		c = -c
	}
	return c
}

// SortedTablePositions lists a table's row positions in the order of sorts (ties by
// position). The sort keys are read in parallel slices of the table, one per core, and sorted
// in Go: a cold sort of 100,000 rows is bound by reading the keys, not by SQL's sorter.
func (s *SQLStore) SortedTablePositions(ctx context.Context, project, digest string, sorts []SortBy) ([]int32, error) {
	n, err := s.tableExists(ctx, project, digest)
	if err != nil {
		return nil, err
	}
	d := s.db.Dialect()
	var cols []string
	var colArgs []any
	for _, sb := range sorts {
		segs := strings.Split(sb.Field, ".")
		if err := checkFieldPath(sb.Field); err != nil {
			return nil, err
		}
		path := JSONPathArg(d, segs)
		if d == db.Postgres {
			cols = append(cols, "jsonb_typeof(r.val::jsonb #> ?::text[])", "(r.val::jsonb #>> ?::text[])")
			colArgs = append(colArgs, path, path)
		} else {
			// SQLite returns the key typed: int64/float64 for numbers and booleans, text for
			// strings and for the JSON text of arrays and objects, NULL when missing or null.
			cols = append(cols, "json_extract(r.val, ?)")
			colArgs = append(colArgs, path)
		}
	}
	nk := len(sorts)
	keys := make([]sortVal, n*nk) // keys of position p at keys[p*nk : p*nk+nk]
	parts := max(1, min(runtime.GOMAXPROCS(0), n/5000+1))
	errs := make(chan error, parts)
	for p := 0; p < parts; p++ {
		lo, hi := p*n/parts, (p+1)*n/parts
		go func() {
			q := `SELECT e.idx, ` + strings.Join(cols, ", ") + ` FROM trace_table_entries e
				JOIN trace_rows r ON r.id = e.row_id
				WHERE e.project_id = ? AND e.table_digest = ? AND e.idx >= ? AND e.idx < ?`
			args := append(append([]any{}, colArgs...), project, digest, lo, hi)
			rs, err := s.db.Query(ctx, q, args...)
			if err != nil {
				errs <- err
				return
			}
			defer rs.Close()
			typ := make([]sql.NullString, len(sorts))
			val := make([]sql.NullString, len(sorts))
			native := make([]any, len(sorts))
			dest := []any{new(int32)}
			for k := range sorts {
				if d == db.Postgres {
					dest = append(dest, &typ[k], &val[k])
				} else {
					dest = append(dest, &native[k])
				}
			}
			for rs.Next() {
				if err := rs.Scan(dest...); err != nil {
					errs <- err
					return
				}
				pos := int(*(dest[0].(*int32)))
				if pos < 0 || pos >= n {
					continue
				}
				for k := range sorts {
					if d == db.Postgres {
						keys[pos*nk+k] = toSortVal(typ[k], val[k])
					} else {
						keys[pos*nk+k] = nativeSortVal(native[k])
					}
				}
			}
			errs <- rs.Err()
		}()
	}
	for p := 0; p < parts; p++ {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return nil, err
	}
	desc := make([]bool, nk)
	for k, sb := range sorts {
		desc[k] = strings.EqualFold(sb.Dir(), "desc")
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	slices.SortFunc(out, func(a, b int32) int {
		for k := 0; k < nk; k++ {
			if c := compareSortVals(keys[int(a)*nk+k], keys[int(b)*nk+k], desc[k]); c != 0 {
				return c
			}
		}
		return int(a) - int(b)
	})
	return out, nil
}

func nativeSortVal(v any) sortVal {
	switch x := v.(type) {
	case int64:
		return sortVal{kind: 1, num: float64(x)}
	case float64:
		return sortVal{kind: 1, num: x}
	case string:
		return sortVal{kind: 2, text: x}
	case []byte:
		return sortVal{kind: 2, text: string(x)}
	}
	return sortVal{kind: 3}
}

func toSortVal(typ, val sql.NullString) sortVal {
	if !typ.Valid || !val.Valid || typ.String == "null" {
		return sortVal{kind: 3}
	}
	switch typ.String {
	case "integer", "real", "number":
		f, err := strconv.ParseFloat(val.String, 64)
		if err == nil {
			return sortVal{kind: 1, num: f}
		}
	case "true", "boolean":
		if val.String == "true" || val.String == "1" {
			return sortVal{kind: 1, num: 1}
		}
		return sortVal{kind: 1, num: 0}
	case "false":
		return sortVal{kind: 1, num: 0}
	}
	return sortVal{kind: 2, text: val.String}
}

// TableRowsAt returns the rows at positions, in the order given.
func (s *SQLStore) TableRowsAt(ctx context.Context, project, digest string, positions []int32) ([]TableRowSchema, error) {
	if len(positions) == 0 {
		return []TableRowSchema{}, nil
	}
	args := []any{project, digest}
	for _, p := range positions {
		args = append(args, p)
	}
	rows, err := s.db.Query(ctx, `SELECT e.idx, r.digest, r.val FROM trace_table_entries e
		JOIN trace_rows r ON r.id = e.row_id
		WHERE e.project_id = ? AND e.table_digest = ? AND e.idx IN `+inList(len(positions)), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byPos := make(map[int32]TableRowSchema, len(positions))
	for rows.Next() {
		var r TableRowSchema
		var val string
		if err := rows.Scan(&r.OriginalIndex, &r.Digest, &val); err != nil {
			return nil, err
		}
		r.Val = json.RawMessage(val)
		byPos[int32(r.OriginalIndex)] = r
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]TableRowSchema, 0, len(positions))
	for _, p := range positions {
		out = append(out, byPos[p])
	}
	return out, nil
}

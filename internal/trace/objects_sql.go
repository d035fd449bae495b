package trace

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/honeai/hone/internal/db"
)

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

// ListProjects lists the projects of entity ("<entity>/…") that hold calls or objects: a range
// over the project_id indexes, so no call or object row is read.
func (s *SQLStore) ListProjects(ctx context.Context, entity string) ([]string, error) {
	lo, hi := entity+"/", entity+"0" // '0' follows '/'
	rows, err := s.db.Query(ctx, `SELECT DISTINCT project_id FROM trace_calls WHERE project_id >= ? AND project_id < ?
		UNION SELECT DISTINCT project_id FROM trace_objects WHERE project_id >= ? AND project_id < ? ORDER BY 1`, lo, hi, lo, hi)
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

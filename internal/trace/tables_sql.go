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
			cols = append(cols, "jsonb_typeof(hone_jsonb(r.val) #> ?::text[])", "(hone_jsonb(r.val) #>> ?::text[])")
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
	return sortPositions(keys, nk, desc), nil
}

// keyedPos is a row position with its first sort key beside it, so that the sort reads the
// key it compares most from the slice it moves.
type keyedPos struct {
	first sortVal
	pos   int32
}

// sortPositions returns the positions 0..n-1 ordered by their keys (keys[p*nk : p*nk+nk]),
// ties by position. The halves are sorted on two cores and merged.
func sortPositions(keys []sortVal, nk int, desc []bool) []int32 {
	n := len(keys) / max(nk, 1)
	items := make([]keyedPos, n)
	for p := range items {
		items[p] = keyedPos{first: keys[p*nk], pos: int32(p)}
	}
	cmp := func(a, b keyedPos) int {
		if c := compareSortVals(a.first, b.first, desc[0]); c != 0 {
			return c
		}
		for k := 1; k < nk; k++ {
			if c := compareSortVals(keys[int(a.pos)*nk+k], keys[int(b.pos)*nk+k], desc[k]); c != 0 {
				return c
			}
		}
		return int(a.pos) - int(b.pos)
	}
	out := make([]int32, n)
	if n < 4096 || runtime.GOMAXPROCS(0) < 2 {
		slices.SortFunc(items, cmp)
		for i, it := range items {
			out[i] = it.pos
		}
		return out
	}
	lo, hi := items[:n/2], items[n/2:]
	done := make(chan struct{})
	go func() { slices.SortFunc(lo, cmp); close(done) }()
	slices.SortFunc(hi, cmp)
	<-done
	i, j := 0, 0
	for k := range out {
		if j == len(hi) || i < len(lo) && cmp(lo[i], hi[j]) <= 0 {
			out[k] = lo[i].pos
			i++
		} else {
			out[k] = hi[j].pos
			j++
		}
	}
	return out
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

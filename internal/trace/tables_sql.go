package trace

import (
	"bytes"
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
	"github.com/honeai/hone/internal/pyjson"
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
	// The keys are read from each row's text in Go on SQLite (json_extract parsing every row
	// was most of a cold sort); what Go cannot read exactly as json_extract does (escapes,
	// arrays, objects, NaN, long numbers) is left to json_extract below. A backslash in a
	// field is a bad JSON path to SQLite: such sorts keep json_extract for every row.
	inGo := d == db.SQLite
	segs, index := make([][]string, len(sorts)), make([][]bool, len(sorts))
	for k, sb := range sorts {
		segs[k] = strings.Split(sb.Field, ".")
		if err := checkFieldPath(sb.Field); err != nil {
			return nil, err
		}
		inGo = inGo && !strings.Contains(sb.Field, `\`)
		index[k] = make([]bool, len(segs[k]))
		for i, seg := range segs[k] {
			index[k][i] = isDigits(seg)
		}
		path := JSONPathArg(d, segs[k])
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
	from := ` FROM trace_table_entries e JOIN trace_rows r ON r.id = e.row_id
		WHERE e.project_id = ? AND e.table_digest = ?`
	parts := max(1, min(runtime.GOMAXPROCS(0), n/5000+1))
	errs := make(chan error, parts)
	fallback := make([][]int32, parts)
	for p := 0; p < parts; p++ {
		lo, hi := p*n/parts, (p+1)*n/parts
		go func() {
			if inGo {
				left, err := s.sortKeysInGo(ctx, `SELECT e.idx, r.val`+from+` AND e.idx >= ? AND e.idx < ?`,
					[]any{project, digest, lo, hi}, segs, index, keys)
				fallback[p] = left
				errs <- err
				return
			}
			errs <- s.scanSortKeys(ctx, `SELECT e.idx, `+strings.Join(cols, ", ")+from+` AND e.idx >= ? AND e.idx < ?`,
				append(append([]any{}, colArgs...), project, digest, lo, hi), d, nk, keys)
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
	left := slices.Concat(fallback...)
	for len(left) > 0 && err == nil {
		chunk := left[:min(len(left), 500)]
		left = left[len(chunk):]
		args := append(append([]any{}, colArgs...), project, digest)
		for _, pos := range chunk {
			args = append(args, pos)
		}
		err = s.scanSortKeys(ctx, `SELECT e.idx, `+strings.Join(cols, ", ")+from+` AND e.idx IN (`+
			strings.TrimSuffix(strings.Repeat("?, ", len(chunk)), ", ")+`)`, args, d, nk, keys)
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

// numPos is a row position with its numeric sort key.
type numPos struct {
	num float64
	pos int32
}

// sortNumbers is sortPositions for the common case of one key that is a number or missing in
// every row: the numbers sorted as 16-byte pairs (on two cores, then merged), the missing
// after them in position order. ok is false in other cases.
func sortNumbers(keys []sortVal, nk int, desc []bool) ([]int32, bool) {
	if nk != 1 {
		return nil, false
	}
	nums := make([]numPos, 0, len(keys))
	var missing []int32
	for p, k := range keys {
		switch k.kind {
		case 1:
			nums = append(nums, numPos{k.num, int32(p)})
		case 3:
			missing = append(missing, int32(p))
		default:
			return nil, false
		}
	}
	d := desc[0]
	cmp := func(a, b numPos) int {
		switch {
		case a.num < b.num:
			if d {
				return 1
			}
			return -1
		case a.num > b.num:
			if d {
				return -1
			}
			return 1
		}
		return int(a.pos) - int(b.pos)
	}
	out := sortedPositions(nums, cmp, func(x numPos) int32 { return x.pos }, make([]int32, 0, len(keys)))
	return append(out, missing...), true
}

// sortedPositions sorts items by cmp, the halves of a large slice on two goroutines and then
// merged, and appends their positions in that order to out.
func sortedPositions[T any](items []T, cmp func(a, b T) int, pos func(T) int32, out []int32) []int32 {
	if len(items) < 4096 || runtime.GOMAXPROCS(0) < 2 {
		slices.SortFunc(items, cmp)
		for _, it := range items {
			out = append(out, pos(it))
		}
		return out
	}
	lo, hi := items[:len(items)/2], items[len(items)/2:]
	done := make(chan struct{})
	go func() { slices.SortFunc(lo, cmp); close(done) }()
	slices.SortFunc(hi, cmp)
	<-done
	i, j := 0, 0
	for i < len(lo) || j < len(hi) {
		if j == len(hi) || i < len(lo) && cmp(lo[i], hi[j]) <= 0 {
			out = append(out, pos(lo[i]))
			i++
		} else {
			out = append(out, pos(hi[j]))
			j++
		}
	}
	return out
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
	if out, ok := sortNumbers(keys, nk, desc); ok {
		return out
	}
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
	return sortedPositions(items, cmp, func(x keyedPos) int32 { return x.pos }, make([]int32, 0, n))
}

// scanSortKeys reads the rows of q (a position, then each sort key as the dialect's columns
// give it: SQLite json_extract's typed value, PostgreSQL's type and text) into keys.
func (s *SQLStore) scanSortKeys(ctx context.Context, q string, args []any, d db.Dialect, nk int, keys []sortVal) error {
	rs, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	n := len(keys) / nk
	typ := make([]sql.NullString, nk)
	val := make([]sql.NullString, nk)
	native := make([]any, nk)
	var pos int32
	dest := []any{&pos}
	for k := range nk {
		if d == db.Postgres {
			dest = append(dest, &typ[k], &val[k])
		} else {
			dest = append(dest, &native[k])
		}
	}
	for rs.Next() {
		if err := rs.Scan(dest...); err != nil {
			return err
		}
		if pos < 0 || int(pos) >= n {
			continue
		}
		for k := range nk {
			if d == db.Postgres {
				keys[int(pos)*nk+k] = toSortVal(typ[k], val[k])
			} else {
				keys[int(pos)*nk+k] = nativeSortVal(native[k])
			}
		}
	}
	return rs.Err()
}

// sortKeysInGo reads the rows of q (a position and the row's JSON text) and fills keys with
// what SQLite's json_extract would give for each sort field (goSortVal); the positions of rows
// it cannot read so are returned, for json_extract.
func (s *SQLStore) sortKeysInGo(ctx context.Context, q string, args []any, segs [][]string, index [][]bool, keys []sortVal) ([]int32, error) {
	nk := len(segs)
	rs, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	n := len(keys) / nk
	var pos int32
	var val sql.RawBytes
	var left []int32
	for rs.Next() {
		if err := rs.Scan(&pos, &val); err != nil {
			return nil, err
		}
		if pos < 0 || int(pos) >= n {
			continue
		}
		for k := range nk {
			v, ok := goSortVal(val, segs[k], index[k])
			if !ok {
				left = append(left, pos)
				break
			}
			keys[int(pos)*nk+k] = v
		}
	}
	return left, rs.Err()
}

// goSortVal is the sort key SQLite's json_extract gives for the value at path in the JSON text
// doc (nativeSortVal of it), for the values Go reads exactly as SQLite does: missing or null,
// booleans (1 and 0), strings without escapes, integers of up to 18 digits, and decimals of up
// to 15 significant digits scaled by at most 10^±22 (one correctly rounded operation, whatever
// the algorithm). ok is false for the rest.
func goSortVal(doc []byte, path []string, index []bool) (sortVal, bool) {
	raw, found, err := pyjson.Lookup(doc, path, index)
	switch {
	case err != nil:
		return sortVal{}, false
	case !found:
		return sortVal{kind: 3}, true
	}
	switch c := raw[0]; {
	case c == '"':
		body := raw[1 : len(raw)-1]
		if bytes.IndexByte(body, '\\') >= 0 {
			return sortVal{}, false
		}
		return sortVal{kind: 2, text: string(body)}, true
	case string(raw) == "true":
		return sortVal{kind: 1, num: 1}, true
	case string(raw) == "false":
		return sortVal{kind: 1, num: 0}, true
	case string(raw) == "null":
		return sortVal{kind: 3}, true
	case c == '-' || c >= '0' && c <= '9':
		return plainNumber(raw)
	}
	return sortVal{}, false
}

// plainNumber parses a JSON number that Go and SQLite convert alike (see goSortVal).
func plainNumber(raw []byte) (sortVal, bool) {
	digits, frac, exp := 0, 0, 0
	i := 0
	if raw[0] == '-' {
		i++
	}
	lead := true // leading zeros are not significant
	for ; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
		if lead && raw[i] == '0' {
			continue
		}
		lead = false
		digits++
	}
	isInt := i == len(raw)
	if i < len(raw) && raw[i] == '.' {
		for i++; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
			frac++
			if lead && raw[i] == '0' {
				continue
			}
			lead = false
			digits++
		}
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		e, err := strconv.Atoi(strings.TrimPrefix(string(raw[i+1:]), "+"))
		if err != nil || e > 400 || e < -400 {
			return sortVal{}, false
		}
		exp, i = e, len(raw)
	}
	if i != len(raw) {
		return sortVal{}, false
	}
	if isInt {
		if digits > 18 {
			return sortVal{}, false
		}
		v, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return sortVal{}, false
		}
		return sortVal{kind: 1, num: float64(v)}, true
	}
	if scale := exp - frac; digits > 15 || scale > 22 || scale < -22 {
		return sortVal{}, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return sortVal{}, false
	}
	return sortVal{kind: 1, num: f}, true
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

package trace

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/fault"
)

const (
	startCols = `project_id, id, trace_id, parent_id, thread_id, turn_id, op_name, display_name, started_at, attributes,
		inputs, input_refs, otel_dump, wb_user_id, wb_run_id, wb_run_step, sdk_cumulative`
	startUpdate = `trace_id = excluded.trace_id, parent_id = excluded.parent_id,
		thread_id = excluded.thread_id, turn_id = excluded.turn_id, op_name = excluded.op_name,
		started_at = excluded.started_at, attributes = excluded.attributes, inputs = excluded.inputs,
		input_refs = excluded.input_refs, otel_dump = excluded.otel_dump, wb_user_id = excluded.wb_user_id,
		wb_run_id = excluded.wb_run_id, wb_run_step = excluded.wb_run_step, sdk_cumulative = excluded.sdk_cumulative`
	endCols   = `ended_at, exception, output, summary, summary_usage, output_refs, wb_run_step_end`
	endUpdate = `ended_at = excluded.ended_at, exception = excluded.exception, output = excluded.output,
		summary = excluded.summary, summary_usage = excluded.summary_usage, output_refs = excluded.output_refs,
		wb_run_step_end = excluded.wb_run_step_end`
	sizeUpdate = `size_bytes = COALESCE(trace_calls.size_bytes, 0) + excluded.size_bytes`
)

const (
	startSQL = `INSERT INTO trace_calls (` + startCols + `, size_bytes)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (project_id, id) DO UPDATE SET ` + startUpdate + `,
		display_name = COALESCE(trace_calls.display_name, excluded.display_name), ` + sizeUpdate
	endSQL = `INSERT INTO trace_calls (project_id, id, trace_id, op_name, ` + endCols + `, display_name, size_bytes)
		VALUES (?, ?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (project_id, id) DO UPDATE SET ` + endUpdate + `,
		display_name = COALESCE(excluded.display_name, trace_calls.display_name), ` + sizeUpdate
)

// callsPerStmt is how many whole calls one multi-row INSERT writes.
const callsPerStmt = 40

// warmStmts prepares, once, the statements of UpsertCalls that nearly every batch runs on the
// SQLite writer connection, outside any transaction (the writer's one connection is free
// then); transactions use them instead of preparing their own. Failures are left to the
// transaction's own prepare.
func (s *SQLStore) warmStmts(ctx context.Context) {
	if s.db.Dialect() != db.SQLite {
		return
	}
	if _, ok := s.stmts.Load("start"); ok {
		return
	}
	kind, q := completeSQL(callsPerStmt)
	for _, kq := range [][2]string{{kind, q}, {"end", endSQL}, {"start", startSQL}} {
		st, err := s.db.Writer().PrepareContext(ctx, s.db.Rebind(kq[1]))
		if err != nil {
			return
		}
		if _, loaded := s.stmts.LoadOrStore(kq[0], st); loaded {
			st.Close()
		}
	}
}

// UpsertCalls writes starts and ends of calls in one transaction. A start and an end may
// arrive in either order, or together: each fills its own columns of the call's row.
func (s *SQLStore) UpsertCalls(ctx context.Context, writes []CallWrite) error {
	return s.UpsertCallStream(ctx, func() ([]CallWrite, error) {
		ws := writes
		writes = nil
		return ws, nil
	})
}

// UpsertCallStream is UpsertCalls over the writes next returns; whole calls of successive
// parts share multi-row statements.
func (s *SQLStore) UpsertCallStream(ctx context.Context, next func() ([]CallWrite, error)) error {
	s.warmStmts(ctx)
	return s.db.WriteTx(ctx, func(tx *db.Tx) error {
		cw := &callWriter{s: s, ctx: ctx, tx: tx, stmts: map[string]*sql.Stmt{}, inStmt: map[[2]string]bool{}}
		defer func() {
			for _, st := range cw.stmts {
				st.Close()
			}
		}()
		for {
			writes, err := next()
			if err != nil {
				return err
			}
			if len(writes) == 0 {
				return cw.flush()
			}
			for _, w := range writes {
				if err := cw.write(w); err != nil {
					return err
				}
			}
		}
	})
}

// callWriter writes calls in one transaction. Whole calls (start and end together, the
// common case) are gathered and go in multi-row INSERTs of callsPerStmt rows.
type callWriter struct {
	s        *SQLStore
	ctx      context.Context
	tx       *db.Tx
	stmts    map[string]*sql.Stmt
	complete []CallWrite
	inStmt   map[[2]string]bool // PostgreSQL refuses to upsert one row twice in a statement
}

func (cw *callWriter) prepare(kind, q string) (*sql.Stmt, error) {
	if st, ok := cw.stmts[kind]; ok {
		return st, nil
	}
	if v, ok := cw.s.stmts.Load(kind); ok {
		st := cw.tx.SQL().StmtContext(cw.ctx, v.(*sql.Stmt))
		cw.stmts[kind] = st
		return st, nil
	}
	st, err := cw.tx.Prepare(cw.ctx, q)
	if err == nil {
		cw.stmts[kind] = st
	}
	return st, err
}

// flush writes the gathered whole calls.
func (cw *callWriter) flush() error {
	clear(cw.inStmt)
	for lo := 0; lo < len(cw.complete); lo += callsPerStmt {
		if err := cw.s.insertComplete(cw.ctx, cw.tx, cw.prepare, cw.complete[lo:min(lo+callsPerStmt, len(cw.complete))]); err != nil {
			return err
		}
	}
	cw.complete = cw.complete[:0]
	return nil
}

func (cw *callWriter) write(w CallWrite) error {
	if w.Start != nil && w.End != nil {
		key := [2]string{w.Project, w.Start.ID}
		if cw.inStmt[key] {
			if err := cw.flush(); err != nil {
				return err
			}
		}
		cw.inStmt[key] = true
		cw.complete = append(cw.complete, w)
		if len(cw.complete) == callsPerStmt {
			return cw.flush()
		}
		return nil
	}
	if err := cw.flush(); err != nil {
		return err
	}
	var args []any
	var st *sql.Stmt
	var err error
	start, end := w.Start, w.End
	switch {
	case start != nil:
		st, err = cw.prepare("start", startSQL)
		args = append(startArgs(w.Project, start), len(start.Attributes)+len(start.Inputs))
	default:
		st, err = cw.prepare("end", endSQL)
		args = append(append([]any{w.Project, end.ID, end.TraceID}, endArgs(end)...), nullStr(end.DisplayName), len(end.Output)+len(end.Summary))
	}
	if err != nil {
		return err
	}
	_, err = st.ExecContext(cw.ctx, args...)
	return err
}

func startArgs(project string, start *CallStartRow) []any {
	return appendStartArgs(make([]any, 0, 18), project, start)
}

func appendStartArgs(args []any, project string, start *CallStartRow) []any {
	cum := 0
	if start.Cumulative {
		cum = 1
	}
	return append(args, project, start.ID, start.TraceID, nullStr(start.ParentID), nullStr(start.ThreadID), nullStr(start.TurnID),
		start.OpName, nullStr(start.DisplayName), start.StartedAt, string(start.Attributes), string(start.Inputs),
		string(start.InputRefs), nullBytes(start.OtelDump), nullStr(start.WBUserID), nullStr(start.WBRunID), start.WBRunStep, cum)
}

func endArgs(end *CallEndRow) []any { return appendEndArgs(make([]any, 0, 7), end) }

func appendEndArgs(args []any, end *CallEndRow) []any {
	var exc any
	if end.HasException {
		exc = end.Exception
	}
	return append(args, end.EndedAt, exc, nullBytes(end.Output), string(end.Summary), end.Usage, string(end.OutputRefs), end.WBRunStepEnd)
}

const completeCols = 25

var completeSQLs sync.Map // rows -> [2]string{kind, statement}

// completeSQL is the statement that writes n whole calls, and its name among prepared ones.
func completeSQL(n int) (kind, q string) {
	if v, ok := completeSQLs.Load(n); ok {
		kq := v.([2]string)
		return kq[0], kq[1]
	}
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", completeCols), ", ") + ")"
	kind = fmt.Sprintf("complete%d", n)
	q = `INSERT INTO trace_calls (` + startCols + `, ` + endCols + `, size_bytes)
		VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ") + `
		ON CONFLICT (project_id, id) DO UPDATE SET ` + startUpdate + `, ` + endUpdate + `,
		display_name = COALESCE(excluded.display_name, trace_calls.display_name), ` + sizeUpdate
	completeSQLs.Store(n, [2]string{kind, q})
	return kind, q
}

// insertComplete writes whole calls with one multi-row statement (prepared per row count).
func (s *SQLStore) insertComplete(ctx context.Context, tx *db.Tx, prepare func(kind, q string) (*sql.Stmt, error), ws []CallWrite) error {
	kind, q := completeSQL(len(ws))
	st, err := prepare(kind, q)
	if err != nil {
		return err
	}
	args := make([]any, 0, completeCols*len(ws))
	for _, w := range ws {
		row := len(args)
		args = appendEndArgs(appendStartArgs(args, w.Project, w.Start), w.End)
		if w.End.DisplayName != "" { // a name given at the end wins
			args[row+7] = w.End.DisplayName
		}
		args = append(args, len(w.Start.Attributes)+len(w.Start.Inputs)+len(w.End.Output)+len(w.End.Summary))
	}
	_, err = st.ExecContext(ctx, args...)
	return err
}

// callColumns maps queryable call fields to columns.
var callColumns = map[string]ValueType{
	"id": TText, "project_id": TText, "op_name": TText, "display_name": TText, "trace_id": TText,
	"parent_id": TText, "thread_id": TText, "turn_id": TText, "started_at": TText, "ended_at": TText,
	"exception": TText, "wb_user_id": TText, "wb_run_id": TText, "wb_run_step": TNum, "wb_run_step_end": TNum,
	"deleted_at": TText,
}

var callJSONColumns = map[string]bool{"inputs": true, "output": true, "attributes": true, "summary": true}

// latencyMS is the SQL of a call's latency in milliseconds.
func latencyMS(d db.Dialect) string {
	if d == db.Postgres {
		return "(EXTRACT(EPOCH FROM (ended_at::timestamptz - started_at::timestamptz)) * 1000)"
	}
	return "((julianday(ended_at) - julianday(started_at)) * 86400000.0)"
}

// statusSQL is the SQL of summary.weave.status.
func statusSQL(d db.Dialect) string {
	errCount, _, _ := JSONField(d, "summary", []string{"status_counts", "error"})
	if d == db.Postgres {
		errCount = "hone_try_float(" + errCount + ")"
	}
	return "(CASE WHEN exception IS NOT NULL THEN 'error' WHEN ended_at IS NULL THEN 'running' WHEN COALESCE(" +
		errCount + ", 0) > 0 THEN 'descendant_error' ELSE 'success' END)"
}

// callField resolves a call field of a query or sort to SQL.
func (s *SQLStore) callField(field string) (string, []any, ValueType, error) {
	d := s.db.Dialect()
	if t, ok := callColumns[field]; ok {
		return field, nil, t, nil
	}
	switch field {
	case "summary.weave.status":
		errPath := JSONPathArg(d, []string{"status_counts", "error"})
		return statusSQL(d), []any{errPath}, TText, nil
	case "summary.weave.latency_ms":
		return latencyMS(d), nil, TNum, nil
	case "summary.weave.trace_name":
		return "COALESCE(display_name, op_name)", nil, TText, nil
	case TotalTokensField:
		return totalTokensSQL(d), nil, TNum, nil
	case TotalCostField:
		return "", nil, 0, fault.Invalid("query", "%s is priced when a call is read: it sorts (as the first key of sort_by) but cannot be queried", field)
	}
	if rest, ok := strings.CutPrefix(field, "feedback.["); ok {
		return feedbackOfCall(d, rest)
	}
	col, rest, ok := strings.Cut(field, ".")
	if ok && callJSONColumns[col] {
		sqlExpr, args, t := JSONField(d, col, strings.Split(rest, "."))
		return sqlExpr, args, t, nil
	}
	if callJSONColumns[field] {
		return field, nil, TText, nil
	}
	return "", nil, 0, fault.Invalid("query", "unknown call field %q", field)
}

// maxInlineList is the longest id list written as one SQL variable per id.
const maxInlineList = 500

// callWhere builds the WHERE clause of a calls query.
func (s *SQLStore) callWhere(project string, q CallQuery) (string, []any, error) {
	where := []string{"project_id = ?", "deleted_at IS NULL", "started_at IS NOT NULL"}
	args := []any{project}
	in := func(col string, vals []string) {
		switch {
		case len(vals) > maxInlineList:
			// One parameter however long the list: SQLite allows 32,766 variables in a
			// statement, PostgreSQL 65,535.
			if s.db.Dialect() == db.Postgres {
				where = append(where, col+" = ANY(?::text[])")
				args = append(args, JSONPathArg(db.Postgres, vals))
			} else {
				b, _ := json.Marshal(vals)
				where = append(where, col+" IN (SELECT value FROM json_each(?))")
				args = append(args, string(b))
			}
		case len(vals) > 0:
			where = append(where, col+" IN "+inList(len(vals)))
			args = append(args, anys(vals)...)
		}
	}
	f := q.Filter
	if len(f.OpNames) > 0 {
		// "…:*" matches every version of an op.
		var ors []string
		for _, n := range f.OpNames {
			if prefix, ok := strings.CutSuffix(n, ":*"); ok {
				ors = append(ors, "substr(op_name, 1, ?) = ?")
				args = append(args, len(prefix)+1, prefix+":")
			} else {
				ors = append(ors, "op_name = ?")
				args = append(args, n)
			}
		}
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	}
	in("parent_id", f.ParentIDs)
	in("trace_id", f.TraceIDs)
	in("id", f.CallIDs)
	in("thread_id", f.ThreadIDs)
	in("turn_id", f.TurnIDs)
	in("wb_user_id", f.WBUserIDs)
	in("wb_run_id", f.WBRunIDs)
	if f.TraceRootsOnly != nil && *f.TraceRootsOnly {
		where = append(where, "parent_id IS NULL")
	}
	for col, refs := range map[string][]string{"input_refs": f.InputRefs, "output_refs": f.OutputRefs} {
		if len(refs) == 0 {
			continue
		}
		if s.db.Dialect() == db.Postgres {
			where = append(where, "hone_jsonb("+col+") ?| ?::text[]")
			args = append(args, JSONPathArg(db.Postgres, refs))
		} else {
			where = append(where, "EXISTS (SELECT 1 FROM json_each("+col+") WHERE json_each.value IN "+inList(len(refs))+")")
			args = append(args, anys(refs)...)
		}
	}
	if q.Cond != nil {
		c := Compiler{Dialect: s.db.Dialect(), Resolve: s.callField}
		cond, cargs, err := c.Compile(q.Cond)
		if err != nil {
			return "", nil, err
		}
		where = append(where, cond)
		args = append(args, cargs...)
	}
	return strings.Join(where, " AND "), args, nil
}

const callCols = `id, project_id, op_name, display_name, trace_id, parent_id, thread_id, turn_id, started_at, attributes, inputs,
	ended_at, exception, output, summary, wb_user_id, wb_run_id, wb_run_step, wb_run_step_end, deleted_at, size_bytes, sdk_cumulative`

func scanCall(sc interface{ Scan(...any) error }) (CallRow, error) {
	var c CallRow
	var display, parent, thread, turn, started, ended, exc, output, summary, user, run, deleted sql.NullString
	var attrs, inputs sql.NullString
	var step, stepEnd, size sql.NullInt64
	var cum int
	if err := sc.Scan(&c.ID, &c.ProjectID, &c.OpName, &display, &c.TraceID, &parent, &thread, &turn, &started, &attrs, &inputs,
		&ended, &exc, &output, &summary, &user, &run, &step, &stepEnd, &deleted, &size, &cum); err != nil {
		return CallRow{}, err
	}
	c.DisplayName, c.ParentID, c.ThreadID, c.TurnID = strPtr(display), strPtr(parent), strPtr(thread), strPtr(turn)
	c.StartedAt, c.EndedAt, c.Exception = strPtr(started), strPtr(ended), strPtr(exc)
	c.WBUserID, c.WBRunID, c.DeletedAt = strPtr(user), strPtr(run), strPtr(deleted)
	raw := func(ns sql.NullString, def string) json.RawMessage {
		if !ns.Valid || ns.String == "" {
			return json.RawMessage(def)
		}
		return json.RawMessage(ns.String)
	}
	c.Attributes, c.Inputs, c.Output, c.Summary = raw(attrs, "{}"), raw(inputs, "{}"), raw(output, "null"), raw(summary, "{}")
	if step.Valid {
		v := step.Int64
		c.WBRunStep = &v
	}
	if stepEnd.Valid {
		v := stepEnd.Int64
		c.WBRunStepEnd = &v
	}
	if size.Valid {
		v := size.Int64
		c.StorageSizeBytes = &v
	}
	c.Cumulative = cum == 1
	return c, nil
}

// QueryCalls streams the calls matching q to each, in the requested order (default: start
// time, then id).
func (s *SQLStore) QueryCalls(ctx context.Context, project string, q CallQuery, each func(CallRow) error) error {
	where, args, err := s.callWhere(project, q)
	if err != nil {
		return err
	}
	order := "started_at ASC, id ASC"
	if len(q.Sort) > 0 {
		o, sargs, err := SortSQL(s.db.Dialect(), q.Sort, s.callField, "sort_by")
		if err != nil {
			return err
		}
		order = o + ", id ASC"
		args = append(args, sargs...)
	}
	sqlq := `SELECT ` + callCols + ` FROM trace_calls WHERE ` + where + ` ORDER BY ` + order
	sqlq, args = s.limitOffset(sqlq, args, q.Limit, q.Offset)
	rows, err := s.db.Query(ctx, sqlq, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		c, err := scanCall(rows)
		if err != nil {
			return err
		}
		if err := each(c); err != nil {
			return err
		}
	}
	return rows.Err()
}

// CountCalls counts the calls matching q (up to q.Limit when set) and sums their sizes.
func (s *SQLStore) CountCalls(ctx context.Context, project string, q CallQuery) (int, int64, error) {
	where, args, err := s.callWhere(project, q)
	if err != nil {
		return 0, 0, err
	}
	inner := `SELECT size_bytes FROM trace_calls WHERE ` + where
	if q.Limit >= 0 {
		inner += " LIMIT ?"
		args = append(args, q.Limit)
	}
	var n int
	var size sql.NullInt64
	err = s.db.QueryRow(ctx, `SELECT COUNT(*), SUM(size_bytes) FROM (`+inner+`) sub`, args...).Scan(&n, &size)
	return n, size.Int64, err
}

// UpdateCall changes a call's display name; false when there is no such call.
func (s *SQLStore) UpdateCall(ctx context.Context, project, id string, displayName *string) (bool, error) {
	var dn any
	if displayName != nil {
		dn = *displayName
	}
	res, err := s.db.Exec(ctx, `UPDATE trace_calls SET display_name = ? WHERE project_id = ? AND id = ? AND deleted_at IS NULL`, dn, project, id)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// DeleteCalls soft-deletes calls and all their descendants; returns how many calls it deleted.
func (s *SQLStore) DeleteCalls(ctx context.Context, project string, ids []string, at string) (int, error) {
	total := 0
	err := s.db.WriteTx(ctx, func(tx *db.Tx) error {
		seen := map[string]bool{}
		frontier := append([]string(nil), ids...)
		for len(frontier) > 0 {
			part := frontier[:min(len(frontier), 500)]
			frontier = frontier[len(part):]
			var fresh []string
			for _, id := range part {
				if !seen[id] {
					seen[id] = true
					fresh = append(fresh, id)
				}
			}
			if len(fresh) == 0 {
				continue
			}
			res, err := tx.Exec(ctx, `UPDATE trace_calls SET deleted_at = ? WHERE project_id = ? AND deleted_at IS NULL AND id IN `+inList(len(fresh)),
				append([]any{at, project}, anys(fresh)...)...)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			total += int(n)
			rows, err := tx.Query(ctx, `SELECT id FROM trace_calls WHERE project_id = ? AND parent_id IN `+inList(len(fresh)),
				append([]any{project}, anys(fresh)...)...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				frontier = append(frontier, id)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	return total, err
}

// feedbackOfCall resolves `feedback.[<feedback_type>].<field>` (rest is what follows
// "feedback.["): a field of the newest feedback of that type on the call (`*`: of any type),
// as the Weave SDK's scored_by filter asks it. A call without such feedback reads it as ""
// (as Weave's ClickHouse server does, so "not equal to empty" means "has it").
func feedbackOfCall(d db.Dialect, rest string) (string, []any, ValueType, error) {
	typ, after, ok := strings.Cut(rest, "]")
	sub, ok2 := strings.CutPrefix(after, ".")
	if !ok || !ok2 || typ == "" || sub == "" {
		return "", nil, 0, fault.Invalid("query", "feedback fields are written feedback.[<feedback_type>].<field>, got %q", "feedback.["+rest)
	}
	expr, args, _, err := feedbackFieldSQL(d, "fb.", sub)
	if err != nil {
		return "", nil, 0, err
	}
	q := "(SELECT " + expr + " FROM trace_feedback fb WHERE fb.project_id = trace_calls.project_id" +
		" AND fb.weave_ref = 'weave:///' || trace_calls.project_id || '/call/' || trace_calls.id"
	if typ != "*" {
		q += " AND fb.feedback_type = ?"
		args = append(args, typ)
	}
	return "COALESCE(" + q + " ORDER BY fb.created_at DESC, fb.id DESC LIMIT 1), '')", args, TEmptyText, nil
}

package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/membudget"
	"github.com/honeai/hone/internal/pyjson"
)

// collectRefs appends every string in v that is a Weave ref.
func collectRefs(v pyjson.Value, out []string) []string {
	switch v.Kind {
	case pyjson.String:
		if strings.HasPrefix(v.Str, RefPrefix) {
			out = append(out, v.Str)
		}
	case pyjson.Array:
		for _, el := range v.Arr {
			out = collectRefs(el, out)
		}
	case pyjson.Object:
		for _, m := range v.Obj {
			out = collectRefs(m.Val, out)
		}
	}
	return out
}

// refsJSON lists the Weave refs inside a raw value as a JSON array (parsing it only when it
// mentions a ref at all).
func refsJSON(raw []byte) []byte {
	if !bytes.Contains(raw, []byte(RefPrefix)) {
		return []byte("[]")
	}
	v, err := pyjson.Parse(raw)
	if err != nil {
		return []byte("[]")
	}
	refs := collectRefs(v, nil)
	if refs == nil {
		refs = []string{}
	}
	b, _ := json.Marshal(refs)
	return b
}

// sdkRollsUp reports whether attributes say the call was written by a Weave SDK, which rolls
// children's usage into the parent's summary before sending it.
func sdkRollsUp(attrs []byte) bool {
	if !bytes.Contains(attrs, []byte("-sdk")) {
		return false
	}
	v, err := pyjson.Parse(attrs)
	if err != nil {
		return false
	}
	src, ok := v.Path("weave", "source")
	return ok && strings.HasSuffix(src.String(), "-sdk")
}

// callValue validates a call field (JSON, nested at most pyjson.MaxDepth deep; an object when
// object is set) and returns it compact. Absent or null: "{}" for objects, nil otherwise.
func callValue(raw json.RawMessage, parent, name string, object bool) ([]byte, error) {
	field := func() string { return parent + "." + name } // built only for an error
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		if object {
			return []byte("{}"), nil
		}
		if len(t) == 0 {
			return nil, nil
		}
		return []byte("null"), nil
	}
	if err := pyjson.Check(t); err != nil {
		if errors.Is(err, pyjson.ErrTooDeep) {
			return nil, badField(field(), "value nested deeper than %d levels", pyjson.MaxDepth)
		}
		return nil, badField(field(), "invalid JSON: %v", err)
	}
	if object && t[0] != '{' {
		return nil, badField(field(), "must be a JSON object")
	}
	return pyjson.CompactText(t), nil
}

func (s *Service) startRow(st StartedCallSchemaForInsert, field string) (*CallStartRow, error) {
	if st.OpName == "" {
		return nil, badField(field+".op_name", "is required")
	}
	if len(st.OpName) > 1024 {
		return nil, badField(field+".op_name", "longer than 1024 characters")
	}
	if st.StartedAt == "" {
		return nil, badField(field+".started_at", "is required")
	}
	started, err := normTime(field+".started_at", st.StartedAt)
	if err != nil {
		return nil, err
	}
	attrs, err := callValue(st.Attributes, field, "attributes", true)
	if err != nil {
		return nil, err
	}
	inputs, err := callValue(st.Inputs, field, "inputs", true)
	if err != nil {
		return nil, err
	}
	row := &CallStartRow{
		ID: optString(st.ID), TraceID: optString(st.TraceID), ParentID: optString(st.ParentID),
		ThreadID: optString(st.ThreadID), TurnID: optString(st.TurnID), OpName: st.OpName,
		DisplayName: optString(st.DisplayName), StartedAt: started,
		Attributes: attrs, Inputs: inputs, InputRefs: refsJSON(inputs),
		WBUserID: optString(st.WBUserID), WBRunID: optString(st.WBRunID), WBRunStep: st.WBRunStep,
		Cumulative: sdkRollsUp(attrs),
	}
	if row.OtelDump, err = callValue(st.OtelDump, field, "otel_dump", false); err != nil {
		return nil, err
	}
	if string(row.OtelDump) == "null" {
		row.OtelDump = nil
	}
	if row.ID == "" {
		row.ID = newID()
	}
	if row.TraceID == "" {
		row.TraceID = newID()
	}
	if row.ParentID == row.ID {
		return nil, badField(field+".parent_id", "a call cannot be its own parent")
	}
	return row, nil
}

func (s *Service) endRow(e EndedCallSchemaForInsert, field string) (*CallEndRow, error) {
	if e.ID == "" {
		return nil, badField(field+".id", "is required")
	}
	if e.EndedAt == "" {
		return nil, badField(field+".ended_at", "is required")
	}
	ended, err := normTime(field+".ended_at", e.EndedAt)
	if err != nil {
		return nil, err
	}
	summary, err := callValue(e.Summary, field, "summary", true)
	if err != nil {
		return nil, err
	}
	row := &CallEndRow{ID: e.ID, TraceID: optString(e.TraceID), EndedAt: ended, Summary: summary,
		Usage: encodeUsage(summary), DisplayName: optString(e.DisplayName), WBRunStepEnd: e.WBRunStepEnd}
	if e.Exception != nil {
		row.HasException, row.Exception = true, *e.Exception
	}
	if row.Output, err = callValue(e.Output, field, "output", false); err != nil {
		return nil, err
	}
	row.OutputRefs = refsJSON(row.Output)
	return row, nil
}

// CallStart records the start of a call; missing ids are generated (UUIDv7).
func (s *Service) CallStart(ctx context.Context, req CallStartReq) (CallStartRes, error) {
	row, err := s.startRow(req.Start, "start")
	if err != nil {
		return CallStartRes{}, err
	}
	if err := s.store.UpsertCalls(ctx, []CallWrite{{Project: req.Start.ProjectID, Start: row}}); err != nil {
		return CallStartRes{}, err
	}
	ex := s.extrasFor(ctx, req.Start.ProjectID)
	ex.claim("", "call:"+row.ID)
	return CallStartRes{ID: row.ID, TraceID: row.TraceID}, s.keepExtras(ctx, ex)
}

// CallEnd records the end of a call.
func (s *Service) CallEnd(ctx context.Context, req CallEndReq) error {
	row, err := s.endRow(req.End, "end")
	if err != nil {
		return err
	}
	if err := s.store.UpsertCalls(ctx, []CallWrite{{Project: req.End.ProjectID, End: row}}); err != nil {
		return err
	}
	ex := s.extrasFor(ctx, req.End.ProjectID)
	ex.claim("", "call:"+row.ID)
	return s.keepExtras(ctx, ex)
}

// Authorizer checks that the request may touch a project id; param names the field.
type Authorizer func(projectID, param string) error

// CallUpsertBatch records a batch of starts and ends in one transaction. Every item is
// validated and authorised before anything is written; the end of a call that started earlier
// in the same batch is written together with its start.
func (s *Service) CallUpsertBatch(ctx context.Context, req CallCreateBatchReq, authorize Authorizer) (CallCreateBatchRes, error) {
	res := CallCreateBatchRes{Res: make([]any, len(req.Batch))}
	pass := &batchPass{s: s, authorize: authorize, res: res.Res, ex: s.extrasFor(ctx, ""), started: map[[2]string]int{}}
	if err := pass.run(req.Batch, 0, s.batchRows(req.Batch, 0, runtime.GOMAXPROCS(0))); err != nil {
		return CallCreateBatchRes{}, err
	}
	if err := s.store.UpsertCalls(ctx, pass.writes); err != nil {
		return CallCreateBatchRes{}, err
	}
	return res, s.keepExtras(ctx, pass.ex)
}

// batchPass is the ordered pass over a batch's items: modes, authorisation and rows checked
// item by item (the first error in item order is the one returned), answers filled in, and
// the writes gathered, the end of a call joined to its start when both are in writes.
type batchPass struct {
	s          *Service
	authorize  Authorizer
	authorized string // the project last authorised (a batch is nearly always of one project)
	checked    bool   // whether any item was authorised yet
	ex         *extras
	res        []any
	writes     []CallWrite
	started    map[[2]string]int // (project, id) -> index in writes of its start
}

// run passes items, the batch's items from index base on; pre are their rows built ahead
// (batchRows), or nil.
func (b *batchPass) run(items []CallBatchItem, base int, pre []batchRow) error {
	for k := range items {
		item, i := &items[k], base+k
		p := "batch[" + strconv.Itoa(i) + "]"
		switch item.Mode {
		case "start":
			st := item.Req.Start
			if st == nil {
				return badField(p+".req.start", "is required for mode \"start\"")
			}
			if err := b.authorizeOnce(st.ProjectID, p+".req.start.project_id"); err != nil {
				return err
			}
			var row *CallStartRow
			var err error
			if pre != nil && pre[k].done {
				row, err = pre[k].start, pre[k].err
			} else {
				row, err = b.s.startRow(*st, p+".req.start")
			}
			if err != nil {
				return err
			}
			if b.ex != nil {
				b.ex.project = st.ProjectID
				b.ex.claim(p+".", "call:"+row.ID)
			}
			b.started[[2]string{st.ProjectID, row.ID}] = len(b.writes)
			b.writes = append(b.writes, CallWrite{Project: st.ProjectID, Start: row})
			b.res[i] = CallStartRes{ID: row.ID, TraceID: row.TraceID}
		case "end":
			en := item.Req.End
			if en == nil {
				return badField(p+".req.end", "is required for mode \"end\"")
			}
			if err := b.authorizeOnce(en.ProjectID, p+".req.end.project_id"); err != nil {
				return err
			}
			var row *CallEndRow
			var err error
			if pre != nil && pre[k].done {
				row, err = pre[k].end, pre[k].err
			} else {
				row, err = b.s.endRow(*en, p+".req.end")
			}
			if err != nil {
				return err
			}
			if b.ex != nil {
				b.ex.project = en.ProjectID
				b.ex.claim(p+".", "call:"+row.ID)
			}
			if j, ok := b.started[[2]string{en.ProjectID, row.ID}]; ok && b.writes[j].End == nil {
				b.writes[j].End = row
			} else {
				b.writes = append(b.writes, CallWrite{Project: en.ProjectID, End: row})
			}
			b.res[i] = Empty{}
		default:
			return badField(p+".mode", "must be \"start\" or \"end\", got %q", item.Mode)
		}
	}
	return nil
}

func (b *batchPass) authorizeOnce(project, param string) error {
	if b.checked && project == b.authorized {
		return nil
	}
	if err := b.authorize(project, param); err != nil {
		return err
	}
	b.authorized, b.checked = project, true
	return nil
}

// take returns the writes gathered so far to be written, keeping back a last write that is
// a start alone: its end, if it is the next item, is then joined to it.
func (b *batchPass) take() []CallWrite {
	ws := b.writes
	clear(b.started)
	b.writes = nil
	if n := len(ws); n > 0 && ws[n-1].End == nil && ws[n-1].Start != nil {
		last := ws[n-1]
		b.writes = []CallWrite{last}
		b.started[[2]string{last.Project, last.Start.ID}] = 0
		ws = ws[:n-1]
	}
	return ws
}

// batchRow is an item of a batch turned into its row ahead of the ordered pass of
// CallUpsertBatch (done), or left to that pass.
type batchRow struct {
	start *CallStartRow
	end   *CallEndRow
	err   error
	done  bool
}

// batchRows turns the items of a large batch into rows on several cores; nil for a small
// batch. Items whose rows need a generated id (a start without id or trace id) are left to the
// ordered pass, so ids are generated in item order; errors are kept and returned by that pass
// in item order, after the checks it makes first (mode, authorisation).
func (s *Service) batchRows(items []CallBatchItem, base, workers int) []batchRow {
	if len(items) < parallelItems || workers < 2 {
		return nil
	}
	out := make([]batchRow, len(items))
	parts := min(workers, 4, len(items)/(parallelItems/2))
	inParts(len(items), parts, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			it, r := &items[i], &out[i]
			p := "batch[" + strconv.Itoa(base+i) + "]"
			switch {
			case it.Mode == "start" && it.Req.Start != nil:
				st := it.Req.Start
				if st.ID == nil || *st.ID == "" || st.TraceID == nil || *st.TraceID == "" {
					continue
				}
				r.start, r.err = s.startRow(*st, p+".req.start")
				r.done = true
			case it.Mode == "end" && it.Req.End != nil:
				r.end, r.err = s.endRow(*it.Req.End, p+".req.end")
				r.done = true
			}
		}
	})
	return out
}

func (s *Service) callQuery(filter *CallsFilter, query json.RawMessage, sorts []SortBy, limit, offset *int) (CallQuery, error) {
	l, o, err := checkLimitOffset(limit, offset)
	if err != nil {
		return CallQuery{}, err
	}
	cond, err := ParseQuery(query)
	if err != nil {
		return CallQuery{}, err
	}
	q := CallQuery{Cond: cond, Sort: sorts, Limit: l, Offset: o}
	if filter != nil {
		q.Filter = *filter
	}
	return q, nil
}

// CallsQuery streams calls to each, with derived summary fields. Besides filter, query,
// sort_by, limit and offset it honours columns (the other fields come back empty), expand_columns
// with return_expanded_column_values (refs at those paths are replaced by their values),
// include_costs, include_feedback, include_storage_size, include_total_storage_size,
// include_usernames (wb_username) and latest_only (Hone keeps one row per call, so every read
// is already of the latest version).
func (s *Service) CallsQuery(ctx context.Context, req CallsQueryReq, each func(CallSchema) error) error {
	q, err := s.callQuery(req.Filter, req.Query, req.SortBy, req.Limit, req.Offset)
	if err != nil {
		return err
	}
	cols, err := checkColumns(req.Columns)
	if err != nil {
		return err
	}
	expand, err := checkExpandColumns(req.ExpandColumns, q.Cond, req.SortBy)
	if err != nil {
		return err
	}
	returnExpanded := req.ReturnExpandedColumnValues == nil || *req.ReturnExpandedColumnValues
	var pricer Pricer
	if req.IncludeCosts {
		pricer = s.lazyPricer(ctx, req.ProjectID)
	}
	var feedback map[string][]json.RawMessage
	if req.IncludeFeedback {
		if feedback, err = s.feedbackByRef(ctx, req.ProjectID); err != nil {
			return err
		}
	}
	return s.queryCalls(ctx, req.ProjectID, q, func(c CallRow) error {
		cs := c.CallSchema
		// The call's values count towards the process's memory budget for requests until
		// the answer is written (a streamed answer gives them back as it goes).
		if err := membudget.Charge(ctx, len(cs.Inputs)+len(cs.Output)+len(cs.Attributes)+len(cs.Summary)); err != nil {
			return err
		}
		if !req.IncludeStorageSize && !req.IncludeTotalStorageSize {
			cs.StorageSizeBytes = nil
		} else if req.IncludeTotalStorageSize {
			cs.TotalStorageSizeBytes = cs.StorageSizeBytes
		}
		cs.Summary = s.derivedSummary(c, pricer, feedback)
		if returnExpanded && len(expand) > 0 {
			if err := s.expandRefs(ctx, &cs, expand); err != nil {
				return err
			}
		}
		if req.IncludeUsernames && cs.WBUserID != nil {
			// A Hone user id is its entity's name, which is also the username W&B's viewer
			// query answers.
			name := *cs.WBUserID
			cs.WBUsername = &name
		}
		if cols != nil {
			project(&cs, cols)
		}
		return each(cs)
	})
}

// callColumnNames are the columns of a call `columns` may name (dotted paths select the
// top-level column they start with).
var callColumnNames = map[string]bool{
	"id": true, "project_id": true, "op_name": true, "display_name": true, "trace_id": true, "parent_id": true,
	"thread_id": true, "turn_id": true, "started_at": true, "attributes": true, "inputs": true, "ended_at": true,
	"exception": true, "output": true, "summary": true, "wb_user_id": true, "wb_run_id": true, "wb_run_step": true,
	"wb_run_step_end": true, "deleted_at": true, "storage_size_bytes": true, "total_storage_size_bytes": true,
}

// checkColumns returns the top-level columns asked for (nil: all).
func checkColumns(columns []string) (map[string]bool, error) {
	if len(columns) == 0 {
		return nil, nil
	}
	out := map[string]bool{}
	for i, c := range columns {
		top, _, _ := strings.Cut(c, ".")
		if !callColumnNames[top] {
			return nil, fault.Invalid(fmt.Sprintf("columns[%d]", i), "columns[%d]: unknown call column %q", i, c)
		}
		out[top] = true
	}
	return out, nil
}

// project empties the fields of c that cols does not ask for; id, project_id, trace_id,
// op_name and started_at always come back (as in Weave).
func project(c *CallSchema, cols map[string]bool) {
	keep := func(name string) bool { return cols[name] }
	if !keep("display_name") {
		c.DisplayName = nil
	}
	if !keep("parent_id") {
		c.ParentID = nil
	}
	if !keep("thread_id") {
		c.ThreadID = nil
	}
	if !keep("turn_id") {
		c.TurnID = nil
	}
	if !keep("attributes") {
		c.Attributes = json.RawMessage("{}")
	}
	if !keep("inputs") {
		c.Inputs = json.RawMessage("{}")
	}
	if !keep("ended_at") {
		c.EndedAt = nil
	}
	if !keep("exception") {
		c.Exception = nil
	}
	if !keep("output") {
		c.Output = json.RawMessage("null")
	}
	if !keep("summary") {
		c.Summary = json.RawMessage("{}")
	}
	if !keep("wb_user_id") {
		c.WBUserID, c.WBUsername = nil, nil
	}
	if !keep("wb_run_id") {
		c.WBRunID = nil
	}
	if !keep("wb_run_step") {
		c.WBRunStep = nil
	}
	if !keep("wb_run_step_end") {
		c.WBRunStepEnd = nil
	}
	if !keep("deleted_at") {
		c.DeletedAt = nil
	}
}

// checkExpandColumns validates expand_columns (dotted paths into inputs, output, attributes or
// summary) and returns them shallowest first. Weave also filters and sorts through expanded
// refs; Hone does not, so a query or sort on a field under an expanded column is a 400
// rather than a silently different answer.
func checkExpandColumns(cols []string, cond Node, sorts []SortBy) ([][]string, error) {
	if len(cols) == 0 {
		return nil, nil
	}
	out := make([][]string, 0, len(cols))
	for i, c := range cols {
		segs := strings.Split(c, ".")
		if !callJSONColumns[segs[0]] || checkFieldPath(c) != nil {
			return nil, fault.Invalid(fmt.Sprintf("expand_columns[%d]", i), "expand_columns[%d]: %q is not a path into inputs, output, attributes or summary", i, c)
		}
		out = append(out, segs)
	}
	fields := queryFields(cond, nil)
	for _, s := range sorts {
		fields = append(fields, s.Field)
	}
	for _, f := range fields {
		for i, c := range cols {
			if strings.HasPrefix(f, c+".") {
				return nil, fault.Invalid(fmt.Sprintf("expand_columns[%d]", i), "filtering or sorting on %q through the expanded ref column %q is not supported by Hone; leave %q out of expand_columns and filter on the ref itself", f, c, c)
			}
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return len(out[a]) < len(out[b]) })
	return out, nil
}

// queryFields lists the fields a query reads.
func queryFields(n Node, out []string) []string {
	switch n := n.(type) {
	case GetField:
		out = append(out, n.Field)
	case Convert:
		out = queryFields(n.Input, out)
	case Logic:
		for _, op := range n.Ops {
			out = queryFields(op, out)
		}
	case Not:
		out = queryFields(n.Op, out)
	case Compare:
		out = queryFields(n.B, queryFields(n.A, out))
	case In:
		out = queryFields(n.A, out)
		for _, el := range n.List {
			out = queryFields(el, out)
		}
	case Contains:
		out = queryFields(n.Substr, queryFields(n.Input, out))
	}
	return out
}

// expandRefs replaces the refs found at the expand paths of c by the values they point at
// (refs into other projects, and refs that do not resolve, stay as they are). One call loads
// at most MaxRefsBatchBytes of values; refs past that stay as they are. The only error is the
// process's memory budget for requests staying full (membudget): the query is then a 503.
func (s *Service) expandRefs(ctx context.Context, c *CallSchema, paths [][]string) error {
	budget := &refBudget{ctx: ctx, left: MaxRefsBatchBytes}
	cols := map[string]*json.RawMessage{"inputs": &c.Inputs, "output": &c.Output, "attributes": &c.Attributes, "summary": &c.Summary}
	parsed := map[string]*pyjson.Value{}
	for _, segs := range paths {
		raw := cols[segs[0]]
		v, ok := parsed[segs[0]]
		if !ok {
			pv, err := pyjson.Parse(*raw)
			if err != nil {
				continue
			}
			v = &pv
			parsed[segs[0]] = v
		}
		target := v
		for _, seg := range segs[1:] {
			next := (*pyjson.Value)(nil)
			switch target.Kind {
			case pyjson.Object:
				for i := range target.Obj {
					if target.Obj[i].Key == seg {
						next = &target.Obj[i].Val
					}
				}
			case pyjson.Array:
				var n int
				if _, err := fmt.Sscanf(seg, "%d", &n); err == nil && n >= 0 && n < len(target.Arr) {
					next = &target.Arr[n]
				}
			}
			if next == nil {
				target = nil
				break
			}
			target = next
		}
		if target == nil || target.Kind != pyjson.String || !strings.HasPrefix(target.Str, RefPrefix) {
			continue
		}
		r, err := ParseRef(target.Str)
		if err != nil || r.ProjectID() != c.ProjectID {
			continue
		}
		val, err := s.resolveRef(ctx, r, 0, budget)
		if fault.Is(err, fault.KindUnavailable) || ctx.Err() != nil {
			return err
		}
		if err != nil {
			continue
		}
		*target = val
	}
	for col, v := range parsed {
		*cols[col] = json.RawMessage(pyjson.Compact(*v))
	}
	return nil
}

// CallRead reads one call.
func (s *Service) CallRead(ctx context.Context, req CallReadReq) (CallReadRes, error) {
	if req.ID == "" {
		return CallReadRes{}, badField("id", "is required")
	}
	one := 1
	var out *CallSchema
	err := s.CallsQuery(ctx, CallsQueryReq{ProjectID: req.ProjectID, Filter: &CallsFilter{CallIDs: []string{req.ID}}, Limit: &one,
		IncludeCosts: req.IncludeCosts, IncludeStorageSize: req.IncludeStorageSize, IncludeTotalStorageSize: req.IncludeTotalStorageSize},
		func(c CallSchema) error { out = &c; return nil })
	return CallReadRes{Call: out}, err
}

// CallsQueryStats counts matching calls.
func (s *Service) CallsQueryStats(ctx context.Context, req CallsQueryStatsReq) (CallsQueryStatsRes, error) {
	q, err := s.callQuery(req.Filter, req.Query, nil, req.Limit, nil)
	if err != nil {
		return CallsQueryStatsRes{}, err
	}
	if _, err := checkExpandColumns(req.ExpandColumns, q.Cond, nil); err != nil {
		return CallsQueryStatsRes{}, err
	}
	n, size, err := s.store.CountCalls(ctx, req.ProjectID, q)
	if err != nil {
		return CallsQueryStatsRes{}, err
	}
	res := CallsQueryStatsRes{Count: n}
	if req.IncludeTotalStorageSize {
		res.TotalStorageSizeBytes = &size
	}
	return res, nil
}

// CallUpdate renames a call.
func (s *Service) CallUpdate(ctx context.Context, req CallUpdateReq) error {
	if req.CallID == "" {
		return badField("call_id", "is required")
	}
	if req.DisplayName == nil {
		return badField("display_name", "is required")
	}
	ok, err := s.store.UpdateCall(ctx, req.ProjectID, req.CallID, req.DisplayName)
	if err != nil {
		return err
	}
	if !ok {
		return notFound("Call %s not found", req.CallID)
	}
	ex := s.extrasFor(ctx, req.ProjectID)
	ex.claim("", "call:"+req.CallID)
	return s.keepExtras(ctx, ex)
}

// MaxDeleteCalls bounds the calls named by one /calls/delete.
const MaxDeleteCalls = 1000

// CallsDelete deletes calls and their descendants.
func (s *Service) CallsDelete(ctx context.Context, req CallsDeleteReq) (CallsDeleteRes, error) {
	if len(req.CallIDs) == 0 {
		return CallsDeleteRes{}, badField("call_ids", "must name at least one call")
	}
	if len(req.CallIDs) > MaxDeleteCalls {
		return CallsDeleteRes{}, badField("call_ids", "at most %d calls per request", MaxDeleteCalls)
	}
	n, err := s.store.DeleteCalls(ctx, req.ProjectID, req.CallIDs, s.nowString())
	return CallsDeleteRes{NumDeleted: n}, err
}

// traceName is the short name of a call: its display name, or the op name of its op ref.
func traceName(c CallSchema) string {
	if c.DisplayName != nil && *c.DisplayName != "" {
		return *c.DisplayName
	}
	name := c.OpName
	if strings.HasPrefix(name, RefPrefix) {
		if r, err := ParseRef(name); err == nil && r.Name != "" {
			return r.Name
		}
	}
	return name
}

// derivedSummary returns the stored summary with Weave's derived `weave` block added:
// status, trace_name, latency_ms, and (when asked) costs and feedback.
func (s *Service) derivedSummary(c CallRow, pricer Pricer, feedback map[string][]json.RawMessage) json.RawMessage {
	sum, err := pyjson.Parse(c.Summary)
	if err != nil || sum.Kind != pyjson.Object {
		sum = pyjson.Value{Kind: pyjson.Object}
	}
	status := "success"
	switch {
	case c.Exception != nil:
		status = "error"
	case c.EndedAt == nil:
		status = "running"
	default:
		if n, ok := sum.Path("status_counts", "error"); ok && (n.Kind == pyjson.Int || n.Kind == pyjson.Float) && strings.Trim(n.Str, "0.-") != "" {
			status = "descendant_error"
		}
	}
	w := map[string]any{"status": status, "trace_name": traceName(c.CallSchema)}
	if c.EndedAt != nil && c.StartedAt != nil {
		st, e1 := db.ParseTime(*c.StartedAt)
		en, e2 := db.ParseTime(*c.EndedAt)
		if e1 == nil && e2 == nil {
			w["latency_ms"] = en.Sub(st).Milliseconds()
		}
	}
	if pricer != nil {
		costs := map[string]any{}
		own := ExtractUsage(c.Summary)
		for _, model := range sortedKeys(own) {
			u := own[model]
			entry := map[string]any{
				"requests": u.Requests, "prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
				"total_tokens": u.TotalTokens, "cache_read_input_tokens": u.CacheRead, "cache_creation_input_tokens": u.CacheCreation,
				"prompt_tokens_total_cost": 0.0, "completion_tokens_total_cost": 0.0,
			}
			if p, ok := pricer(model, optString(c.StartedAt)); ok {
				entry["prompt_tokens_total_cost"] = float64(u.PromptTokens) * p.Prompt
				entry["completion_tokens_total_cost"] = float64(u.CompletionTokens) * p.Completion
				entry["cache_read_input_tokens_total_cost"] = float64(u.CacheRead) * p.CacheRead
				entry["cache_creation_input_tokens_total_cost"] = float64(u.CacheCreation) * p.CacheCreation
				entry["prompt_token_cost"], entry["completion_token_cost"] = p.Prompt, p.Completion
			}
			costs[model] = entry
		}
		w["costs"] = costs
	}
	if feedback != nil {
		ref := Ref{Entity: strings.SplitN(c.ProjectID, "/", 2)[0], Project: projectPart(c.ProjectID), Kind: "call", Digest: c.ID}
		fb := feedback[ref.String()]
		if fb == nil {
			fb = []json.RawMessage{}
		}
		w["feedback"] = fb
	}
	wb, _ := json.Marshal(w)
	wv, _ := pyjson.Parse(wb)
	replaced := false
	for i := range sum.Obj {
		if sum.Obj[i].Key == "weave" {
			sum.Obj[i].Val, replaced = wv, true
		}
	}
	if !replaced {
		sum.Obj = append(sum.Obj, pyjson.Member{Key: "weave", Val: wv})
	}
	return pyjson.Compact(sum)
}

func projectPart(projectID string) string {
	_, p, _ := strings.Cut(projectID, "/")
	return p
}

// CallsComplete records whole calls (start and end together) in one transaction; every
// call must belong to project.
func (s *Service) CallsComplete(ctx context.Context, project string, req CallsCompleteReq) error {
	writes := make([]CallWrite, 0, len(req.Batch))
	ex := s.extrasFor(ctx, project)
	for i, c := range req.Batch {
		p := fmt.Sprintf("batch[%d]", i)
		if c.ProjectID != project {
			return badField(p+".project_id", "must be %s (the project of the route), got %q", project, c.ProjectID)
		}
		if c.ID == nil || *c.ID == "" {
			return badField(p+".id", "is required")
		}
		st, err := s.startRow(c.StartedCallSchemaForInsert, p)
		if err != nil {
			return err
		}
		en, err := s.endRow(EndedCallSchemaForInsert{ProjectID: project, ID: st.ID, EndedAt: c.EndedAt, Exception: c.Exception,
			Output: c.Output, Summary: c.Summary, WBRunStepEnd: c.WBRunStepEnd, TraceID: c.TraceID}, p)
		if err != nil {
			return err
		}
		writes = append(writes, CallWrite{Project: project, Start: st, End: en})
		ex.claim(p+".", "call:"+st.ID)
	}
	if err := s.store.UpsertCalls(ctx, writes); err != nil {
		return err
	}
	return s.keepExtras(ctx, ex)
}

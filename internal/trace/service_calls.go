package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/db"
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
func callValue(raw json.RawMessage, field string, object bool) ([]byte, error) {
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
			return nil, badField(field, "value nested deeper than %d levels", pyjson.MaxDepth)
		}
		return nil, badField(field, "invalid JSON: %v", err)
	}
	if object && t[0] != '{' {
		return nil, badField(field, "must be a JSON object")
	}
	var buf bytes.Buffer
	buf.Grow(len(t))
	if err := json.Compact(&buf, t); err != nil {
		return nil, badField(field, "invalid JSON: %v", err)
	}
	return buf.Bytes(), nil
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

func optString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
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
	attrs, err := callValue(st.Attributes, field+".attributes", true)
	if err != nil {
		return nil, err
	}
	inputs, err := callValue(st.Inputs, field+".inputs", true)
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
	if row.OtelDump, err = callValue(st.OtelDump, field+".otel_dump", false); err != nil {
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
	summary, err := callValue(e.Summary, field+".summary", true)
	if err != nil {
		return nil, err
	}
	row := &CallEndRow{ID: e.ID, TraceID: optString(e.TraceID), EndedAt: ended, Summary: summary,
		DisplayName: optString(e.DisplayName), WBRunStepEnd: e.WBRunStepEnd}
	if e.Exception != nil {
		row.HasException, row.Exception = true, *e.Exception
	}
	if row.Output, err = callValue(e.Output, field+".output", false); err != nil {
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
	writes := make([]CallWrite, 0, len(req.Batch))
	started := map[[2]string]int{} // (project, id) -> index in writes of its start
	res := CallCreateBatchRes{Res: make([]any, len(req.Batch))}
	ex := s.extrasFor(ctx, "")
	for i, item := range req.Batch {
		p := fmt.Sprintf("batch[%d]", i)
		switch item.Mode {
		case "start":
			st := item.Req.Start
			if st == nil {
				return CallCreateBatchRes{}, badField(p+".req.start", "is required for mode \"start\"")
			}
			if err := authorize(st.ProjectID, p+".req.start.project_id"); err != nil {
				return CallCreateBatchRes{}, err
			}
			row, err := s.startRow(*st, p+".req.start")
			if err != nil {
				return CallCreateBatchRes{}, err
			}
			if ex != nil {
				ex.project = st.ProjectID
				ex.claim(p+".", "call:"+row.ID)
			}
			started[[2]string{st.ProjectID, row.ID}] = len(writes)
			writes = append(writes, CallWrite{Project: st.ProjectID, Start: row})
			res.Res[i] = CallStartRes{ID: row.ID, TraceID: row.TraceID}
		case "end":
			en := item.Req.End
			if en == nil {
				return CallCreateBatchRes{}, badField(p+".req.end", "is required for mode \"end\"")
			}
			if err := authorize(en.ProjectID, p+".req.end.project_id"); err != nil {
				return CallCreateBatchRes{}, err
			}
			row, err := s.endRow(*en, p+".req.end")
			if err != nil {
				return CallCreateBatchRes{}, err
			}
			if ex != nil {
				ex.project = en.ProjectID
				ex.claim(p+".", "call:"+row.ID)
			}
			if j, ok := started[[2]string{en.ProjectID, row.ID}]; ok && writes[j].End == nil {
				writes[j].End = row
			} else {
				writes = append(writes, CallWrite{Project: en.ProjectID, End: row})
			}
			res.Res[i] = Empty{}
		default:
			return CallCreateBatchRes{}, badField(p+".mode", "must be \"start\" or \"end\", got %q", item.Mode)
		}
	}
	if err := s.store.UpsertCalls(ctx, writes); err != nil {
		return CallCreateBatchRes{}, err
	}
	return res, s.keepExtras(ctx, ex)
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
	return s.store.QueryCalls(ctx, req.ProjectID, q, func(c CallRow) error {
		cs := c.CallSchema
		if !req.IncludeStorageSize && !req.IncludeTotalStorageSize {
			cs.StorageSizeBytes = nil
		} else if req.IncludeTotalStorageSize {
			cs.TotalStorageSizeBytes = cs.StorageSizeBytes
		}
		cs.Summary = s.derivedSummary(c, pricer, feedback)
		if returnExpanded && len(expand) > 0 {
			s.expandRefs(ctx, &cs, expand)
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
			return nil, apierror.BadRequest(fmt.Sprintf("columns[%d]", i), "columns[%d]: unknown call column %q", i, c)
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
			return nil, apierror.BadRequest(fmt.Sprintf("expand_columns[%d]", i), "expand_columns[%d]: %q is not a path into inputs, output, attributes or summary", i, c)
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
				return nil, apierror.BadRequest(fmt.Sprintf("expand_columns[%d]", i), "filtering or sorting on %q through the expanded ref column %q is not supported by Hone; leave %q out of expand_columns and filter on the ref itself", f, c, c)
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
// (refs into other projects, and refs that do not resolve, stay as they are).
func (s *Service) expandRefs(ctx context.Context, c *CallSchema, paths [][]string) {
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
		val, err := s.resolveRef(ctx, r, 0)
		if err != nil {
			continue
		}
		*target = val
	}
	for col, v := range parsed {
		*cols[col] = json.RawMessage(pyjson.Compact(*v))
	}
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

// ---- Usage ----

// lazyPricer returns a Pricer that loads a project's prices for a model on first use.
func (s *Service) lazyPricer(ctx context.Context, project string) Pricer {
	cache := map[string][]Cost{}
	return func(model, startedAt string) (Price, bool) {
		costs, ok := cache[model]
		if !ok {
			m, err := s.store.Prices(ctx, project, []string{model})
			if err == nil {
				costs = m[model]
			}
			cache[model] = costs
		}
		return pickPrice(costs, startedAt)
	}
}

// pickPrice ranks prices as Weave does: one effective at the call's start first (project
// over default, newest effective date), else the newest.
func pickPrice(costs []Cost, startedAt string) (Price, bool) {
	if len(costs) == 0 {
		return Price{}, false
	}
	pick := costs[0]
	for _, c := range costs { // project prices come first, each level by effective date descending
		if startedAt == "" || c.EffectiveDate <= startedAt {
			pick = c
			break
		}
	}
	return Price{Prompt: pick.PromptTokenCost, Completion: pick.CompletionTokenCost,
		CacheRead: pick.CacheReadInputTokenCost, CacheCreation: pick.CacheCreationInputTokenCost}, true
}

func usageLimit(limit *int) (int, error) {
	if limit == nil {
		return DefaultUsageLimit, nil
	}
	if *limit < 1 {
		return 0, apierror.BadRequest("limit", "limit must be >= 1, got %d", *limit)
	}
	return *limit, nil
}

// TraceUsage computes, for every matching call, its own usage plus the sum over all its
// descendants (per model). When more calls match than limit, it fails with a 400 instead of
// silently dropping calls.
func (s *Service) TraceUsage(ctx context.Context, req TraceUsageReq) (UsageRes, error) {
	limit, err := usageLimit(req.Limit)
	if err != nil {
		return UsageRes{}, err
	}
	cond, err := ParseQuery(req.Query)
	if err != nil {
		return UsageRes{}, err
	}
	q := CallQuery{Cond: cond, Limit: limit}
	if req.Filter != nil {
		q.Filter = *req.Filter
	}
	calls, err := s.store.UsageCalls(ctx, req.ProjectID, q)
	if err != nil {
		return UsageRes{}, err
	}
	if len(calls) > limit {
		return UsageRes{}, apierror.BadRequest("limit", "more than %d calls match: narrow the filter (for example trace_ids) or raise limit; no partial usage is returned", limit)
	}
	return s.rollUpResult(ctx, req.ProjectID, calls, req.IncludeCosts, nil), nil
}

// CallsUsage computes the usage of whole traces rooted at call ids: each key is a requested
// call with its own usage plus all its descendants'.
func (s *Service) CallsUsage(ctx context.Context, req CallsUsageReq) (UsageRes, error) {
	limit, err := usageLimit(req.Limit)
	if err != nil {
		return UsageRes{}, err
	}
	if len(req.CallIDs) == 0 {
		return UsageRes{}, badField("call_ids", "must name at least one call")
	}
	traceIDs := map[string]bool{}
	err = s.store.QueryCalls(ctx, req.ProjectID, CallQuery{Filter: CallsFilter{CallIDs: req.CallIDs}, Limit: -1}, func(c CallRow) error {
		traceIDs[c.TraceID] = true
		return nil
	})
	if err != nil {
		return UsageRes{}, err
	}
	var calls []UsageCall
	if len(traceIDs) > 0 {
		calls, err = s.store.UsageCalls(ctx, req.ProjectID, CallQuery{Filter: CallsFilter{TraceIDs: sortedKeys(traceIDs)}, Limit: limit})
		if err != nil {
			return UsageRes{}, err
		}
		if len(calls) > limit {
			return UsageRes{}, apierror.BadRequest("limit", "Cannot compute complete usage: the traces of these calls have more than %d calls", limit)
		}
	}
	return s.rollUpResult(ctx, req.ProjectID, calls, req.IncludeCosts, req.CallIDs), nil
}

func (s *Service) rollUpResult(ctx context.Context, project string, calls []UsageCall, withCosts bool, keys []string) UsageRes {
	var pricer Pricer
	if withCosts {
		pricer = s.lazyPricer(ctx, project)
	}
	agg := RollUp(calls, pricer)
	res := UsageRes{CallUsage: map[string]map[string]*AggregatedUsage{}, UnfinishedCallIDs: unfinished(calls)}
	if keys == nil {
		for id, m := range agg {
			res.CallUsage[id] = toAggregated(m, withCosts)
		}
		return res
	}
	for _, id := range keys {
		res.CallUsage[id] = toAggregated(agg[id], withCosts)
	}
	return res
}

// ---- Costs ----

// CostCreate adds project prices.
func (s *Service) CostCreate(ctx context.Context, req CostCreateReq, createdBy string) (CostCreateRes, error) {
	if len(req.Costs) == 0 {
		return CostCreateRes{}, badField("costs", "must name at least one model")
	}
	var costs []Cost
	res := CostCreateRes{IDs: [][2]string{}}
	now := s.nowString()
	for _, llm := range sortedKeys(req.Costs) {
		in := req.Costs[llm]
		p := "costs." + llm
		if llm == "" || len(llm) > 256 {
			return CostCreateRes{}, badField("costs", "invalid model id %q", llm)
		}
		for name, v := range map[string]float64{"prompt_token_cost": in.PromptTokenCost, "completion_token_cost": in.CompletionTokenCost} {
			if v < 0 {
				return CostCreateRes{}, badField(p+"."+name, "must be >= 0")
			}
		}
		c := Cost{ID: newID(), LLMID: llm, PromptTokenCost: in.PromptTokenCost, CompletionTokenCost: in.CompletionTokenCost,
			PromptTokenCostUnit: "USD", CompletionTokenCostUnit: "USD", EffectiveDate: now, ProviderID: "default",
			PricingLevel: "project", PricingLevelID: req.ProjectID, CreatedAt: now}
		if createdBy != "" {
			cb := createdBy
			c.CreatedBy = &cb
		}
		if in.CacheReadInputTokenCost != nil {
			c.CacheReadInputTokenCost = *in.CacheReadInputTokenCost
		}
		if in.CacheCreationInputTokenCost != nil {
			c.CacheCreationInputTokenCost = *in.CacheCreationInputTokenCost
		}
		if in.PromptTokenCostUnit != nil {
			c.PromptTokenCostUnit = *in.PromptTokenCostUnit
		}
		if in.CompletionTokenCostUnit != nil {
			c.CompletionTokenCostUnit = *in.CompletionTokenCostUnit
		}
		if in.ProviderID != nil && *in.ProviderID != "" {
			c.ProviderID = *in.ProviderID
		}
		if in.EffectiveDate != nil && *in.EffectiveDate != "" {
			eff, err := normTime(p+".effective_date", *in.EffectiveDate)
			if err != nil {
				return CostCreateRes{}, err
			}
			c.EffectiveDate = eff
		}
		costs = append(costs, c)
		res.IDs = append(res.IDs, [2]string{c.ID, llm})
	}
	if err := s.store.InsertCosts(ctx, costs); err != nil {
		return CostCreateRes{}, err
	}
	ex := s.extrasFor(ctx, req.ProjectID)
	for _, c := range costs {
		ex.claim("costs."+c.LLMID+".", "cost:"+c.ID)
	}
	return res, s.keepExtras(ctx, ex)
}

func selectFields(m map[string]any, fields []string) map[string]any {
	if len(fields) == 0 {
		return m
	}
	out := make(map[string]any, len(fields))
	for _, f := range fields {
		if v, ok := m[f]; ok {
			out[f] = v
		}
	}
	return out
}

func toMap(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func checkFields(fields []string, known map[string]ValueType, param string) error {
	for i, f := range fields {
		if _, ok := known[f]; !ok {
			return apierror.BadRequest(fmt.Sprintf("%s[%d]", param, i), "%s[%d]: unknown field %q", param, i, f)
		}
	}
	return nil
}

// CostQuery lists prices visible to a project (its own and the defaults).
func (s *Service) CostQuery(ctx context.Context, req CostQueryReq) (CostQueryRes, error) {
	if err := checkFields(req.Fields, costFields, "fields"); err != nil {
		return CostQueryRes{}, err
	}
	limit, offset, err := checkLimitOffset(req.Limit, req.Offset)
	if err != nil {
		return CostQueryRes{}, err
	}
	cond, err := ParseQuery(req.Query)
	if err != nil {
		return CostQueryRes{}, err
	}
	costs, err := s.store.QueryCosts(ctx, req.ProjectID, GenericQuery{Cond: cond, Sort: req.SortBy, Limit: limit, Offset: offset})
	if err != nil {
		return CostQueryRes{}, err
	}
	res := CostQueryRes{Results: make([]map[string]any, len(costs))}
	for i, c := range costs {
		res.Results[i] = selectFields(toMap(c), req.Fields)
	}
	return res, nil
}

// CostPurge deletes a project's own prices matching the query.
func (s *Service) CostPurge(ctx context.Context, req CostPurgeReq) error {
	cond, err := ParseQuery(req.Query)
	if err != nil {
		return err
	}
	if cond == nil {
		return badField("query", "is required")
	}
	_, err = s.store.PurgeCosts(ctx, req.ProjectID, cond)
	return err
}

// ---- Feedback ----

func jsonOr(v any, def string) []byte {
	if reflect.ValueOf(v).Len() == 0 {
		return []byte(def)
	}
	b, _ := json.Marshal(v) // maps marshal with sorted keys
	return b
}

func strOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

// feedbackRow validates one feedback item; p prefixes field names ("" or "batch[i].").
func feedbackRow(req FeedbackCreateReq, p, id, at, user string) (FeedbackRow, error) {
	if req.WeaveRef == "" || !strings.HasPrefix(req.WeaveRef, RefPrefix) {
		return FeedbackRow{}, badField(p+"weave_ref", "must be a weave:/// ref")
	}
	if r, err := ParseRef(req.WeaveRef); err != nil || r.ProjectID() != req.ProjectID {
		return FeedbackRow{}, badField(p+"weave_ref", "must be a ref into project %s", req.ProjectID)
	}
	if req.FeedbackType == "" {
		return FeedbackRow{}, badField(p+"feedback_type", "is required")
	}
	if len(req.FeedbackType) > 512 {
		return FeedbackRow{}, badField(p+"feedback_type", "longer than 512 characters")
	}
	if id == "" || len(id) > 256 {
		return FeedbackRow{}, badField(p+"id", "must be 1 to 256 characters")
	}
	payload, err := parseObject(req.Payload, p+"payload")
	if err != nil {
		return FeedbackRow{}, err
	}
	for i, tag := range req.ScorerTags {
		if tag == "" {
			return FeedbackRow{}, badField(fmt.Sprintf("%sscorer_tags[%d]", p, i), "must not be empty")
		}
	}
	return FeedbackRow{ProjectID: req.ProjectID, ID: id, WeaveRef: req.WeaveRef, WBUserID: user, CreatedAt: at,
		FeedbackType: req.FeedbackType, Creator: req.Creator, AnnotationRef: req.AnnotationRef, RunnableRef: req.RunnableRef,
		CallRef: req.CallRef, TriggerRef: req.TriggerRef, QueueID: req.QueueID, Payload: pyjson.Compact(payload),
		ScorerTags:       jsonOr(req.ScorerTags, "[]"),
		ScorerTagReasons: jsonOr(req.ScorerTagReasons, "{}"), ScorerTagConfidences: jsonOr(req.ScorerTagConfidences, "{}"),
		ScorerRatings: jsonOr(req.ScorerRatings, "{}"), ScorerRatingReasons: jsonOr(req.ScorerRatingReasons, "{}"),
		ScorerRatingConfidences: jsonOr(req.ScorerRatingConfidences, "{}"),
		SpanAgentName:           strOr(req.SpanAgentName, ""), SpanAgentVersion: strOr(req.SpanAgentVersion, ""),
		SpanStatusCode: strOr(req.SpanStatusCode, "UNSET"), SpanConversationID: strOr(req.SpanConversationID, ""),
		SpanTraceID: strOr(req.SpanTraceID, ""), ScorerTraceID: strOr(req.ScorerTraceID, ""),
	}, nil
}

func feedbackRes(f FeedbackRow) FeedbackCreateRes {
	return FeedbackCreateRes{ID: f.ID, CreatedAt: f.CreatedAt, WBUserID: f.WBUserID, Payload: f.Payload}
}

// FeedbackCreate stores feedback on a ref. The id is the client's when it sends one (the SDK
// returns it before the write reaches the server), else a new UUIDv7; sending the same
// feedback again is a no-op, the same id with other content a 409.
func (s *Service) FeedbackCreate(ctx context.Context, req FeedbackCreateReq, user string) (FeedbackCreateRes, error) {
	res, err := s.FeedbackBatchCreate(ctx, FeedbackBatchCreateReq{Batch: []FeedbackCreateReq{req}}, user, nil)
	if err != nil {
		return FeedbackCreateRes{}, err
	}
	return res.Res[0], nil
}

// FeedbackBatchCreate stores several feedback items in one transaction; authorize (nil: the
// caller checked) checks each item's project.
func (s *Service) FeedbackBatchCreate(ctx context.Context, req FeedbackBatchCreateReq, user string, authorize Authorizer) (FeedbackBatchCreateRes, error) {
	single := authorize == nil
	if !single && len(req.Batch) == 0 {
		return FeedbackBatchCreateRes{}, badField("batch", "must hold at least one feedback item")
	}
	now := s.nowString()
	rows := make([]FeedbackRow, len(req.Batch))
	res := FeedbackBatchCreateRes{Res: make([]FeedbackCreateRes, len(req.Batch))}
	var ex *extras
	if len(req.Batch) > 0 {
		ex = s.extrasFor(ctx, req.Batch[0].ProjectID)
	}
	for i, item := range req.Batch {
		p := ""
		if !single {
			p = fmt.Sprintf("batch[%d].", i)
			if err := authorize(item.ProjectID, p+"project_id"); err != nil {
				return FeedbackBatchCreateRes{}, err
			}
		}
		id := optString(item.ID)
		if item.ID == nil {
			id = newID()
		}
		f, err := feedbackRow(item, p, id, now, user)
		if err != nil {
			return FeedbackBatchCreateRes{}, err
		}
		rows[i], res.Res[i] = f, feedbackRes(f)
		if ex != nil && !single {
			ex.project = item.ProjectID
			ex.claim(p, "feedback:"+f.ID)
		}
	}
	if err := s.store.InsertFeedback(ctx, rows); err != nil {
		return FeedbackBatchCreateRes{}, conflictErr(err, "id")
	}
	if ex != nil && single {
		ex.claim("", "feedback:"+rows[0].ID)
	}
	return res, s.keepExtras(ctx, ex)
}

// FeedbackReplace replaces feedback by id: the new content takes the old id.
func (s *Service) FeedbackReplace(ctx context.Context, req FeedbackReplaceReq, user string) (FeedbackCreateRes, error) {
	if req.FeedbackID == "" {
		return FeedbackCreateRes{}, badField("feedback_id", "is required")
	}
	f, err := feedbackRow(req.FeedbackCreateReq, "", req.FeedbackID, s.nowString(), user)
	if err != nil {
		return FeedbackCreateRes{}, err
	}
	ok, err := s.store.ReplaceFeedback(ctx, f)
	if err != nil {
		return FeedbackCreateRes{}, err
	}
	if !ok {
		return FeedbackCreateRes{}, notFound("Feedback %s not found", f.ID)
	}
	ex := s.extrasFor(ctx, req.ProjectID)
	ex.claim("", "feedback:"+f.ID)
	return feedbackRes(f), s.keepExtras(ctx, ex)
}

func feedbackMap(f FeedbackRow) map[string]any {
	js := func(b []byte, def string) json.RawMessage {
		if len(b) == 0 {
			return json.RawMessage(def)
		}
		return json.RawMessage(b)
	}
	return map[string]any{
		"id": f.ID, "project_id": f.ProjectID, "weave_ref": f.WeaveRef, "wb_user_id": f.WBUserID, "creator": f.Creator,
		"created_at": f.CreatedAt, "feedback_type": f.FeedbackType, "payload": json.RawMessage(f.Payload),
		"annotation_ref": f.AnnotationRef, "runnable_ref": f.RunnableRef, "call_ref": f.CallRef, "trigger_ref": f.TriggerRef,
		"queue_id": f.QueueID, "scorer_tags": js(f.ScorerTags, "[]"), "scorer_tag_reasons": js(f.ScorerTagReasons, "{}"),
		"scorer_tag_confidences": js(f.ScorerTagConfidences, "{}"), "scorer_ratings": js(f.ScorerRatings, "{}"),
		"scorer_rating_reasons": js(f.ScorerRatingReasons, "{}"), "scorer_rating_confidences": js(f.ScorerRatingConfidences, "{}"),
		"span_agent_name": f.SpanAgentName, "span_agent_version": f.SpanAgentVersion, "span_status_code": f.SpanStatusCode,
		"span_conversation_id": f.SpanConversationID, "span_trace_id": f.SpanTraceID, "scorer_trace_id": f.ScorerTraceID,
	}
}

// FeedbackQuery lists feedback, with the number matching in all.
func (s *Service) FeedbackQuery(ctx context.Context, req FeedbackQueryReq) (FeedbackQueryRes, error) {
	for i, f := range req.Fields {
		if _, ok := feedbackFields[f]; !ok {
			return FeedbackQueryRes{}, apierror.BadRequest(fmt.Sprintf("fields[%d]", i), "fields[%d]: unknown feedback field %q", i, f)
		}
	}
	limit, offset, err := checkLimitOffset(req.Limit, req.Offset)
	if err != nil {
		return FeedbackQueryRes{}, err
	}
	cond, err := ParseQuery(req.Query)
	if err != nil {
		return FeedbackQueryRes{}, err
	}
	rows, err := s.store.QueryFeedback(ctx, req.ProjectID, GenericQuery{Cond: cond, Sort: req.SortBy, Limit: limit, Offset: offset})
	if err != nil {
		return FeedbackQueryRes{}, err
	}
	res := FeedbackQueryRes{Result: make([]map[string]any, len(rows)), TotalCount: len(rows)}
	if limit >= 0 || offset > 0 {
		if res.TotalCount, err = s.store.CountFeedback(ctx, req.ProjectID, cond); err != nil {
			return FeedbackQueryRes{}, err
		}
	}
	for i, f := range rows {
		res.Result[i] = selectFields(feedbackMap(f), req.Fields)
	}
	return res, nil
}

// FeedbackPurge deletes feedback matching the query.
func (s *Service) FeedbackPurge(ctx context.Context, req FeedbackPurgeReq) error {
	cond, err := ParseQuery(req.Query)
	if err != nil {
		return err
	}
	if cond == nil {
		return badField("query", "is required")
	}
	_, err = s.store.PurgeFeedback(ctx, req.ProjectID, cond)
	return err
}

func (s *Service) feedbackByRef(ctx context.Context, project string) (map[string][]json.RawMessage, error) {
	rows, err := s.store.QueryFeedback(ctx, project, GenericQuery{Limit: -1})
	if err != nil {
		return nil, err
	}
	out := map[string][]json.RawMessage{}
	for _, f := range rows {
		b, _ := json.Marshal(feedbackMap(f))
		out[f.WeaveRef] = append(out[f.WeaveRef], b)
	}
	return out, nil
}

// ---- Files ----

// MaxFileBytes bounds one uploaded file.
const MaxFileBytes = 32 << 20

// FileCreate stores a file; its digest is Weave's digest of the bytes. expected (optional) is
// the digest the client computed: a mismatch is a 409 and stores nothing.
func (s *Service) FileCreate(ctx context.Context, project, name string, content []byte, expected string) (FileCreateRes, error) {
	if name == "" {
		name = "file"
	}
	digest := BytesDigest(content)
	if expected != "" && expected != digest {
		return FileCreateRes{}, apierror.Conflict("expected_digest", "expected_digest: does not match the digest of the file's bytes (%s)", digest)
	}
	if err := s.store.PutFile(ctx, project, digest, name, content, s.nowString()); err != nil {
		return FileCreateRes{}, err
	}
	ex := s.extrasFor(ctx, project)
	ex.claim("", "file:"+digest)
	return FileCreateRes{Digest: digest}, s.keepExtras(ctx, ex)
}

// FileContent returns a file's bytes.
func (s *Service) FileContent(ctx context.Context, req FileContentReadReq) ([]byte, error) {
	b, err := s.store.GetFile(ctx, req.ProjectID, req.Digest)
	return b, mapNotFound(err, "File %s not found", req.Digest)
}

// ---- Refs ----

// RefsReadBatch resolves refs to values: object and op versions (with attr/key/index/id
// paths, following table refs inside values) and table rows.
func (s *Service) RefsReadBatch(ctx context.Context, req RefsReadBatchReq, authorize Authorizer) (RefsReadBatchRes, error) {
	res := RefsReadBatchRes{Vals: make([]json.RawMessage, len(req.Refs))}
	for i, raw := range req.Refs {
		p := fmt.Sprintf("refs[%d]", i)
		r, err := ParseRef(raw)
		if err != nil {
			return RefsReadBatchRes{}, badField(p, "%v", err)
		}
		if err := authorize(r.ProjectID(), p); err != nil {
			return RefsReadBatchRes{}, err
		}
		v, err := s.resolveRef(ctx, r, 0)
		if err != nil {
			return RefsReadBatchRes{}, err
		}
		res.Vals[i] = pyjson.Compact(v)
	}
	return res, nil
}

func (s *Service) resolveRef(ctx context.Context, r Ref, depth int) (pyjson.Value, error) {
	if depth > 8 {
		return pyjson.Value{}, badField("refs", "refs nested too deeply")
	}
	var cur pyjson.Value
	steps := r.Extra
	switch r.Kind {
	case "object", "op":
		o, err := s.store.ReadObject(ctx, r.ProjectID(), r.Name, parseSelector(r.Digest))
		if err != nil {
			return pyjson.Value{}, notFound("ref %s not found", r.String())
		}
		if cur, err = pyjson.Parse(o.Val); err != nil {
			return pyjson.Value{}, err
		}
	case "table":
		if len(steps) == 0 || steps[0].Kind != "id" {
			return pyjson.Value{}, badField("refs", "a table ref must name a row (/id/<row digest>): %s", r.String())
		}
		rows, err := s.store.ReadRows(ctx, r.ProjectID(), []string{steps[0].Value})
		if err != nil {
			return pyjson.Value{}, err
		}
		raw, ok := rows[steps[0].Value]
		if !ok {
			return pyjson.Value{}, notFound("ref %s not found", r.String())
		}
		if cur, err = pyjson.Parse(raw); err != nil {
			return pyjson.Value{}, err
		}
		steps = steps[1:]
	default:
		return pyjson.Value{}, badField("refs", "cannot read %s refs: %s", r.Kind, r.String())
	}
	for i, st := range steps {
		// A ref inside the value is followed with the remaining steps.
		if cur.Kind == pyjson.String && strings.HasPrefix(cur.Str, RefPrefix) {
			inner, err := ParseRef(cur.Str)
			if err != nil || inner.ProjectID() != r.ProjectID() {
				return pyjson.Value{}, notFound("ref %s not found", r.String())
			}
			inner.Extra = append(append([]RefStep(nil), inner.Extra...), steps[i:]...)
			return s.resolveRef(ctx, inner, depth+1)
		}
		var ok bool
		switch st.Kind {
		case "attr", "key":
			cur, ok = cur.Get(st.Value)
		case "index":
			var n int
			if _, err := fmt.Sscanf(st.Value, "%d", &n); err == nil && cur.Kind == pyjson.Array && n >= 0 && n < len(cur.Arr) {
				cur, ok = cur.Arr[n], true
			}
		}
		if !ok {
			return pyjson.Value{}, notFound("ref %s not found", r.String())
		}
	}
	return cur, nil
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

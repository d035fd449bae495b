// Package traceapi serves the Weave-compatible trace server routes over internal/trace:
// objects, tables, calls, usage, costs, feedback, files and refs. Requests authenticate with
// HTTP Basic (any username; the password is an API key) and may only touch projects of the
// key's entity. Request fields Hone does not know follow the drift rule of internal/trace
// (drift.go): a write keeps them as sent and logs them once; a read, delete or purge refuses
// them with a 400 naming them.
package traceapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/membudget"
	"github.com/honeai/hone/internal/openapi"
	"github.com/honeai/hone/internal/pyjson"
	"github.com/honeai/hone/internal/trace"
)

// API is the trace area.
type API struct {
	svc *trace.Service
	// heavy wraps the routes that can amplify (SetHeavy: httpx.Heavy); nil: none.
	heavy httpx.Middleware
}

// SetHeavy sets the middleware of the routes that read stored data a small request can name a
// lot of (refs, objects, tables, calls, files): httpx.Heavy, a per-key limit and the
// process's memory budget for requests.
func (a *API) SetHeavy(mw httpx.Middleware) { a.heavy = mw }

// New returns the trace area on svc.
func New(svc *trace.Service) *API { return &API{svc: svc} }

// decoding says how a route treats request fields Hone does not know (the drift rule of
// internal/trace).
type decoding int

const (
	// strict, for a read, delete or purge: an unknown field at any depth is a 400 naming it.
	strict decoding = iota
	// lenient, for a create, upsert or update: unknown fields are kept beside what is stored.
	lenient
)

// decode reads a JSON body into v under m and returns the context for the service (carrying
// the unknown fields of a lenient decoding).
func decode(r *http.Request, v any, m decoding) (context.Context, error) {
	if err := httpx.CheckJSONContentType(r); err != nil {
		return nil, err
	}
	body, err := httpx.ReadBody(r)
	if err != nil {
		return nil, err
	}
	unknown, uerr := trace.UnknownFields(body, v)
	if err := httpx.Unmarshal(body, v, httpx.DecodeOptions{}); err != nil {
		return nil, err // malformed JSON in the decoder's usual words
	}
	if uerr != nil {
		if errors.Is(uerr, pyjson.ErrTooDeep) {
			return nil, apierror.BadRequest("", "Request body nested deeper than %d levels", pyjson.MaxDepth)
		}
		return nil, apierror.BadRequest("", "Malformed JSON body: %v", uerr)
	}
	if m == strict && len(unknown) > 0 {
		return nil, trace.UnknownFieldsError(unknown)
	}
	if err := httpx.CheckText(v); err != nil {
		return nil, err
	}
	return trace.WithUnknownFields(r.Context(), routeName(r), unknown), nil
}

// routeName is the route's path pattern ("/feedback/create").
func routeName(r *http.Request) string {
	_, path, ok := strings.Cut(r.Pattern, " ")
	if !ok {
		return r.Pattern
	}
	return path
}

// authorizer checks projects against the request's principal.
func authorizer(ctx context.Context) trace.Authorizer {
	return func(projectID, param string) error {
		_, _, err := auth.Project(ctx, projectID, param)
		return err
	}
}

// user is the wb_user_id Hone records: the key's entity.
func user(ctx context.Context) string {
	p, _ := auth.FromContext(ctx)
	return p.Entity
}

// setStartUser records the key's user on a call start: wb_user_id is the server's to set
// (Weave: "Do not set directly").
func setStartUser(ctx context.Context, st *trace.StartedCallSchemaForInsert) {
	if u := user(ctx); u != "" {
		st.WBUserID = &u
	}
}

func (a *API) feedbackBatchCreate(w http.ResponseWriter, r *http.Request) {
	var req trace.FeedbackBatchCreateReq
	ctx, err := decode(r, &req, lenient)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	res, err := a.svc.FeedbackBatchCreate(ctx, req, user(ctx), authorizer(ctx))
	httpx.Reply(w, r, res, err)
}

// jsonRoute decodes Req under m, authorises the project named by project(req) (its JSON
// path for error messages is param), runs fn and writes the result.
func jsonRoute[Req, Res any](m decoding, param string, project func(*Req) string, fn func(context.Context, *Req) (Res, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		ctx, err := decode(r, &req, m)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		if _, _, err := auth.Project(r.Context(), project(&req), param); err != nil {
			apierror.Write(w, r, err)
			return
		}
		res, err := fn(context.WithValue(ctx, pathKey{}, r), &req)
		if err != nil {
			apierror.Write(w, r, mapErr(err))
			return
		}
		httpx.WriteJSON(w, http.StatusOK, res)
	}
}

// mapErr turns store sentinels that escaped the service into 404s.
func mapErr(err error) error {
	if errors.Is(err, trace.ErrNotFound) {
		return apierror.NotFound("", "%s", err.Error())
	}
	return err
}

func op(summary string, req, res any) *openapi.Operation {
	return &openapi.Operation{Summary: summary, Tags: []string{"tracing"}, Security: openapi.BasicAuth, Request: req, Response: res}
}

// Register adds the trace routes to r behind basic (the Basic-auth middleware).
func (a *API) Register(r *httpx.Router, basic httpx.Middleware) {
	g := r.Group(basic, httpx.CheckParams()).Secured(openapi.BasicAuth)
	hg := g // the routes that can amplify
	if a.heavy != nil {
		hg = r.Group(basic, httpx.CheckParams(), a.heavy).Secured(openapi.BasicAuth)
	}
	s := a.svc

	// Objects.
	g.HandleFunc("POST /obj/create", jsonRoute(lenient, "obj.project_id", func(q *trace.ObjCreateReq) string { return q.Obj.ProjectID },
		func(ctx context.Context, q *trace.ObjCreateReq) (trace.ObjCreateRes, error) {
			return s.ObjCreate(ctx, *q, user(ctx))
		}),
		op("Create an object version (digest computed as Weave does)", trace.ObjCreateReq{}, trace.ObjCreateRes{}))
	hg.HandleFunc("POST /obj/read", jsonRoute(strict, "project_id", func(q *trace.ObjReadReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.ObjReadReq) (trace.ObjReadRes, error) { return s.ObjRead(ctx, *q) }),
		op("Read an object version by digest, latest, vN or alias", trace.ObjReadReq{}, trace.ObjReadRes{}))
	g.HandleFunc("POST /obj/delete", jsonRoute(strict, "project_id", func(q *trace.ObjDeleteReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.ObjDeleteReq) (trace.ObjDeleteRes, error) {
			return s.ObjDelete(ctx, *q)
		}),
		op("Delete object versions", trace.ObjDeleteReq{}, trace.ObjDeleteRes{}))
	hg.HandleFunc("POST /objs/query", jsonRoute(strict, "project_id", func(q *trace.ObjQueryReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.ObjQueryReq) (trace.ObjQueryRes, error) {
			return s.ObjsQuery(ctx, *q)
		}),
		op("Query object versions", trace.ObjQueryReq{}, trace.ObjQueryRes{}))

	// Tags and aliases.
	g.HandleFunc("PUT /objs/{object_id}/versions/{digest}/tags", jsonRoute(lenient, "project_id", func(q *trace.TagsReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.TagsReq) (trace.Empty, error) {
			return trace.Empty{}, s.AddTags(ctx, q.ProjectID, pathValue(ctx, "object_id"), pathValue(ctx, "digest"), q.Tags)
		}), op("Add tags to an object version", trace.TagsReq{}, trace.Empty{}))
	g.HandleFunc("POST /objs/{object_id}/versions/{digest}/tags/remove", jsonRoute(strict, "project_id", func(q *trace.TagsReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.TagsReq) (trace.Empty, error) {
			return trace.Empty{}, s.RemoveTags(ctx, q.ProjectID, pathValue(ctx, "object_id"), pathValue(ctx, "digest"), q.Tags)
		}), op("Remove tags from an object version", trace.TagsReq{}, trace.Empty{}))
	g.HandleFunc("PUT /objs/{object_id}/aliases", jsonRoute(lenient, "project_id", func(q *trace.AliasesSetReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.AliasesSetReq) (trace.Empty, error) {
			return trace.Empty{}, s.SetAliases(ctx, q.ProjectID, pathValue(ctx, "object_id"), q.Digest, q.Aliases)
		}), op("Point aliases of an object at a version", trace.AliasesSetReq{}, trace.Empty{}))
	g.HandleFunc("POST /objs/{object_id}/aliases/remove", jsonRoute(strict, "project_id", func(q *trace.AliasesRemoveReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.AliasesRemoveReq) (trace.Empty, error) {
			return trace.Empty{}, s.RemoveAliases(ctx, q.ProjectID, pathValue(ctx, "object_id"), q.Aliases)
		}), op("Remove aliases of an object", trace.AliasesRemoveReq{}, trace.Empty{}))
	g.HandleFunc("GET /tags", a.listRoute(func(ctx context.Context, p string) (any, error) { return s.ListTags(ctx, p) }),
		a.listOp("List a project's tags", trace.TagsListRes{}))
	g.HandleFunc("GET /aliases", a.listRoute(func(ctx context.Context, p string) (any, error) { return s.ListAliases(ctx, p) }),
		a.listOp("List a project's aliases", trace.AliasesListRes{}))

	g.HandleFunc("GET /projects", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.ListProjects(r.Context(), user(r.Context()))
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, res)
	}, op("List the key's entity's projects that hold calls or objects (Hone addition)", nil, trace.ProjectsListRes{}))
	a.registerStudio(g)

	// Tables.
	g.HandleFunc("POST /table/create", jsonRoute(lenient, "table.project_id", func(q *trace.TableCreateReq) string { return q.Table.ProjectID },
		func(ctx context.Context, q *trace.TableCreateReq) (trace.TableCreateRes, error) {
			return s.TableCreate(ctx, *q)
		}),
		op("Create a table of rows", trace.TableCreateReq{}, trace.TableCreateRes{}))
	g.HandleFunc("POST /table/update", jsonRoute(lenient, "project_id", func(q *trace.TableUpdateReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.TableUpdateReq) (trace.TableUpdateRes, error) {
			return s.TableUpdate(ctx, *q)
		}),
		op("Append, pop or insert rows, making a new table", trace.TableUpdateReq{}, trace.TableUpdateRes{}))
	g.HandleFunc("POST /table/create_from_digests", jsonRoute(lenient, "project_id", func(q *trace.TableCreateFromDigestsReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.TableCreateFromDigestsReq) (trace.TableCreateFromDigestsRes, error) {
			return s.TableCreateFromDigests(ctx, *q)
		}), op("Create a table from stored row digests", trace.TableCreateFromDigestsReq{}, trace.TableCreateFromDigestsRes{}))
	hg.HandleFunc("POST /table/query", jsonRoute(strict, "project_id", func(q *trace.TableQueryReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.TableQueryReq) (trace.TableQueryRes, error) {
			return s.TableQuery(ctx, *q)
		}),
		op("Query table rows", trace.TableQueryReq{}, trace.TableQueryRes{}))
	hg.HandleFunc("POST /table/query_stream", a.tableQueryStream, &openapi.Operation{
		Summary: "Query table rows as JSON lines", Tags: []string{"tracing"}, Security: openapi.BasicAuth,
		Request: trace.TableQueryReq{}, Response: trace.TableRowSchema{}, ResponseContentType: "application/jsonl"})
	g.HandleFunc("POST /table/query_stats", jsonRoute(strict, "project_id", func(q *trace.TableQueryStatsReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.TableQueryStatsReq) (trace.TableQueryStatsRes, error) {
			return s.TableQueryStats(ctx, *q)
		}),
		op("Count a table's rows", trace.TableQueryStatsReq{}, trace.TableQueryStatsRes{}))
	g.HandleFunc("POST /table/query_stats_batch", jsonRoute(strict, "project_id", func(q *trace.TableQueryStatsBatchReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.TableQueryStatsBatchReq) (trace.TableQueryStatsBatchRes, error) {
			return s.TableQueryStatsBatch(ctx, *q)
		}), op("Count rows of several tables", trace.TableQueryStatsBatchReq{}, trace.TableQueryStatsBatchRes{}))

	// Calls.
	g.HandleFunc("POST /call/start", jsonRoute(lenient, "start.project_id", func(q *trace.CallStartReq) string { return q.Start.ProjectID },
		func(ctx context.Context, q *trace.CallStartReq) (trace.CallStartRes, error) {
			setStartUser(ctx, &q.Start)
			return s.CallStart(ctx, *q)
		}),
		op("Start a call", trace.CallStartReq{}, trace.CallStartRes{}))
	g.HandleFunc("POST /call/end", jsonRoute(lenient, "end.project_id", func(q *trace.CallEndReq) string { return q.End.ProjectID },
		func(ctx context.Context, q *trace.CallEndReq) (trace.Empty, error) {
			return trace.Empty{}, s.CallEnd(ctx, *q)
		}),
		op("End a call", trace.CallEndReq{}, trace.Empty{}))
	g.HandleFunc("POST /call/upsert_batch", a.upsertBatch, op("Start and end calls in one batch", trace.CallCreateBatchReq{}, trace.CallCreateBatchRes{}))
	hg.HandleFunc("POST /calls/stream_query", a.callsStreamQuery, &openapi.Operation{
		Summary: "Query calls as JSON lines, or export them as CSV, TSV or a JSON array (by Accept)", Tags: []string{"tracing"}, Security: openapi.BasicAuth,
		Description: "The answer's format follows the Accept header, as Weave's trace server does: application/jsonl (the default, " +
			"and for any other Accept), text/csv or text/tab-separated-values (a header of the calls' flattened paths, such as " +
			"inputs.messages or summary.weave.status, under columns when it is set; then a row per call, nested values as JSON text) " +
			"or application/json (one array). CSV, TSV and JSON answer at most 100,000 calls: a larger limit, or more matching calls " +
			"without one, is a 400 naming limit.",
		Request: trace.CallsQueryReq{}, Response: trace.CallSchema{}, ResponseContentType: mediaJSONL,
		Answers: []openapi.Content{{Type: mediaJSON, Schema: trace.CallSchema{}, Array: true}, {Type: mediaCSV}, {Type: mediaTSV}}})
	hg.HandleFunc("POST /calls/query", a.callsQuery, op("Query calls", trace.CallsQueryReq{}, callsQueryRes{}))
	g.HandleFunc("POST /calls/query_stats", jsonRoute(strict, "project_id", func(q *trace.CallsQueryStatsReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.CallsQueryStatsReq) (trace.CallsQueryStatsRes, error) {
			return s.CallsQueryStats(ctx, *q)
		}),
		op("Count calls", trace.CallsQueryStatsReq{}, trace.CallsQueryStatsRes{}))
	hg.HandleFunc("POST /call/read", jsonRoute(strict, "project_id", func(q *trace.CallReadReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.CallReadReq) (trace.CallReadRes, error) { return s.CallRead(ctx, *q) }),
		op("Read a call", trace.CallReadReq{}, trace.CallReadRes{}))
	g.HandleFunc("POST /call/update", jsonRoute(lenient, "project_id", func(q *trace.CallUpdateReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.CallUpdateReq) (trace.Empty, error) {
			return trace.Empty{}, s.CallUpdate(ctx, *q)
		}),
		op("Rename a call", trace.CallUpdateReq{}, trace.Empty{}))
	g.HandleFunc("POST /calls/delete", jsonRoute(strict, "project_id", func(q *trace.CallsDeleteReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.CallsDeleteReq) (trace.CallsDeleteRes, error) {
			return s.CallsDelete(ctx, *q)
		}),
		op("Delete calls and their descendants", trace.CallsDeleteReq{}, trace.CallsDeleteRes{}))

	// Usage.
	g.HandleFunc("POST /trace/usage", jsonRoute(strict, "project_id", func(q *trace.TraceUsageReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.TraceUsageReq) (trace.UsageRes, error) {
			return s.TraceUsage(ctx, *q)
		}),
		op("Per-call usage of matching calls, rolled up over descendants", trace.TraceUsageReq{}, trace.UsageRes{}))
	g.HandleFunc("POST /calls/usage", jsonRoute(strict, "project_id", func(q *trace.CallsUsageReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.CallsUsageReq) (trace.UsageRes, error) {
			return s.CallsUsage(ctx, *q)
		}),
		op("Usage of whole traces rooted at calls", trace.CallsUsageReq{}, trace.UsageRes{}))

	// Costs.
	g.HandleFunc("POST /cost/create", jsonRoute(lenient, "project_id", func(q *trace.CostCreateReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.CostCreateReq) (trace.CostCreateRes, error) {
			return s.CostCreate(ctx, *q, user(ctx))
		}),
		op("Set token prices for a project", trace.CostCreateReq{}, trace.CostCreateRes{}))
	g.HandleFunc("POST /cost/query", jsonRoute(strict, "project_id", func(q *trace.CostQueryReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.CostQueryReq) (trace.CostQueryRes, error) {
			return s.CostQuery(ctx, *q)
		}),
		op("List token prices", trace.CostQueryReq{}, trace.CostQueryRes{}))
	g.HandleFunc("POST /cost/purge", jsonRoute(strict, "project_id", func(q *trace.CostPurgeReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.CostPurgeReq) (trace.Empty, error) {
			return trace.Empty{}, s.CostPurge(ctx, *q)
		}),
		op("Delete a project's token prices", trace.CostPurgeReq{}, trace.Empty{}))

	// Feedback.
	g.HandleFunc("POST /feedback/create", jsonRoute(lenient, "project_id", func(q *trace.FeedbackCreateReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.FeedbackCreateReq) (trace.FeedbackCreateRes, error) {
			return s.FeedbackCreate(ctx, *q, user(ctx))
		}), op("Add feedback to a ref", trace.FeedbackCreateReq{}, trace.FeedbackCreateRes{}))
	g.HandleFunc("POST /feedback/batch/create", a.feedbackBatchCreate,
		op("Add several feedback items in one transaction", trace.FeedbackBatchCreateReq{}, trace.FeedbackBatchCreateRes{}))
	g.HandleFunc("POST /feedback/replace", jsonRoute(lenient, "project_id", func(q *trace.FeedbackReplaceReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.FeedbackReplaceReq) (trace.FeedbackCreateRes, error) {
			return s.FeedbackReplace(ctx, *q, user(ctx))
		}), op("Replace feedback", trace.FeedbackReplaceReq{}, trace.FeedbackCreateRes{}))
	g.HandleFunc("POST /feedback/query", jsonRoute(strict, "project_id", func(q *trace.FeedbackQueryReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.FeedbackQueryReq) (trace.FeedbackQueryRes, error) {
			return s.FeedbackQuery(ctx, *q)
		}),
		op("Query feedback", trace.FeedbackQueryReq{}, trace.FeedbackQueryRes{}))
	g.HandleFunc("POST /feedback/purge", jsonRoute(strict, "project_id", func(q *trace.FeedbackPurgeReq) string { return q.ProjectID },
		func(ctx context.Context, q *trace.FeedbackPurgeReq) (trace.Empty, error) {
			return trace.Empty{}, s.FeedbackPurge(ctx, *q)
		}),
		op("Delete feedback", trace.FeedbackPurgeReq{}, trace.Empty{}))

	// Files.
	fileOp := &openapi.Operation{Summary: "Upload a file (multipart: project_id, file)", Tags: []string{"tracing"},
		Security: openapi.BasicAuth, Request: fileForm{}, RequestContentType: "multipart/form-data", Response: trace.FileCreateRes{}}
	g.HandleFunc("POST /file/create", a.fileCreate, fileOp)
	g.HandleFunc("POST /files/create", a.fileCreate, fileOp)
	hg.HandleFunc("POST /file/content", a.fileContent, &openapi.Operation{Summary: "Read a file's bytes", Tags: []string{"tracing"},
		Security: openapi.BasicAuth, Request: trace.FileContentReadReq{}, ResponseContentType: "application/octet-stream"})

	// The v2 routes of the newer Python SDK: the project is in the path.
	g.HandleFunc("POST /v2/{entity}/{project}/calls/complete", a.callsComplete,
		op("Record whole calls (start and end together)", trace.CallsCompleteReq{}, trace.Empty{}))
	g.HandleFunc("POST /v2/{entity}/{project}/call/start", a.v2CallStart, op("Start a call (v2)", trace.CallStartReq{}, trace.CallStartRes{}))
	g.HandleFunc("POST /v2/{entity}/{project}/call/end", a.v2CallEnd, op("End a call (v2)", trace.CallEndReq{}, trace.Empty{}))

	// Refs.
	hg.HandleFunc("POST /refs/read_batch", a.refsReadBatch, op("Resolve refs to values", trace.RefsReadBatchReq{}, trace.RefsReadBatchRes{}))
}

type pathKey struct{}

// pathValue reads a path wildcard of the request jsonRoute put in ctx.
func pathValue(ctx context.Context, name string) string {
	if r, ok := ctx.Value(pathKey{}).(*http.Request); ok {
		return r.PathValue(name)
	}
	return ""
}

func (a *API) listRoute(fn func(context.Context, string) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("project_id")
		if _, _, err := auth.Project(r.Context(), p, "project_id"); err != nil {
			apierror.Write(w, r, err)
			return
		}
		res, err := fn(r.Context(), p)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, res)
	}
}

func (a *API) listOp(summary string, res any) *openapi.Operation {
	o := op(summary, nil, res)
	o.Params = []openapi.Param{{Name: "project_id", In: "query", Required: true, Description: "<entity>/<project>"}}
	return o
}

func (a *API) upsertBatch(w http.ResponseWriter, r *http.Request) {
	if err := httpx.CheckJSONContentType(r); err != nil {
		apierror.Write(w, r, err)
		return
	}
	body, err := httpx.ReadBody(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	ctx := r.Context()
	check := func(i int, it *trace.CallBatchItem) error {
		if err := httpx.CheckTextAt(it, func() string { return "batch[" + strconv.Itoa(i) + "]" }); err != nil {
			return err
		}
		if it.Req.Start != nil {
			setStartUser(ctx, it.Req.Start)
		}
		return nil
	}
	res, err := a.svc.CallUpsertBatchBody(ctx, routeName(r), body, check, authorizer(ctx))
	httpx.Reply(w, r, res, err)
}

type callsQueryRes struct {
	Calls []trace.CallSchema `json:"calls"`
}

func (a *API) decodeCallsQuery(w http.ResponseWriter, r *http.Request) (trace.CallsQueryReq, bool) {
	var req trace.CallsQueryReq
	if _, err := decode(r, &req, strict); err != nil {
		apierror.Write(w, r, err)
		return req, false
	}
	if _, _, err := auth.Project(r.Context(), req.ProjectID, "project_id"); err != nil {
		apierror.Write(w, r, err)
		return req, false
	}
	return req, true
}

func (a *API) callsQuery(w http.ResponseWriter, r *http.Request) {
	req, ok := a.decodeCallsQuery(w, r)
	if !ok {
		return
	}
	res := callsQueryRes{Calls: []trace.CallSchema{}}
	if err := a.svc.CallsQuery(r.Context(), req, func(c trace.CallSchema) error {
		res.Calls = append(res.Calls, c)
		return nil
	}); err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, res)
}

// jsonLines writes values one per line, flushing as it goes; errors before the first line are
// answered in the envelope, later ones end the stream.
type jsonLines struct {
	w       http.ResponseWriter
	bw      *bufio.Writer
	enc     *json.Encoder
	started bool
	n       int
}

func newJSONLines(w http.ResponseWriter) *jsonLines {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &jsonLines{w: w, bw: bw, enc: enc}
}

func (j *jsonLines) write(v any) error {
	if !j.started {
		j.w.Header().Set("Content-Type", "application/jsonl")
		j.w.WriteHeader(http.StatusOK)
		j.started = true
	}
	if err := j.enc.Encode(v); err != nil {
		return err
	}
	if j.n++; j.n%256 == 0 {
		if err := j.bw.Flush(); err != nil {
			return err
		}
		http.NewResponseController(j.w).Flush()
	}
	return nil
}

func (j *jsonLines) finish(r *http.Request, err error) {
	if err != nil && !j.started {
		apierror.Write(j.w, r, err)
		return
	}
	if !j.started {
		j.w.Header().Set("Content-Type", "application/jsonl")
		j.w.WriteHeader(http.StatusOK)
	}
	_ = j.bw.Flush()
}

func (a *API) callsStreamQuery(w http.ResponseWriter, r *http.Request) {
	req, ok := a.decodeCallsQuery(w, r)
	if !ok {
		return
	}
	switch f := exportFormat(r.Header.Get("Accept")); f {
	case mediaJSON:
		a.exportJSON(w, r, req)
		return
	case mediaCSV, mediaTSV:
		a.exportCSV(w, r, req, f)
		return
	}
	out := newJSONLines(w)
	err := a.svc.CallsQuery(r.Context(), req, func(c trace.CallSchema) error {
		err := out.write(c)
		membudget.Reset(r.Context()) // written: what it held is given back
		return err
	})
	out.finish(r, err)
}

func (a *API) tableQueryStream(w http.ResponseWriter, r *http.Request) {
	var req trace.TableQueryReq
	if _, err := decode(r, &req, strict); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if _, _, err := auth.Project(r.Context(), req.ProjectID, "project_id"); err != nil {
		apierror.Write(w, r, err)
		return
	}
	res, err := a.svc.TableQuery(r.Context(), req)
	out := newJSONLines(w)
	if err == nil {
		for _, row := range res.Rows {
			if err = out.write(row); err != nil {
				break
			}
		}
	}
	out.finish(r, err)
}

// fileForm documents the multipart form of /file/create.
type fileForm struct {
	ProjectID      string `json:"project_id"`
	File           []byte `json:"file" jsonschema:"format=binary"`
	ExpectedDigest string `json:"expected_digest,omitempty"`
}

func (a *API) fileCreate(w http.ResponseWriter, r *http.Request) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		apierror.Write(w, r, apierror.BadRequest("", "POST /file/create takes multipart/form-data with fields project_id and file"))
		return
	}
	if err := r.ParseMultipartForm(8 << 20); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			apierror.Write(w, r, apierror.TooLarge("Request body is larger than the limit of %d bytes", mbe.Limit))
			return
		}
		apierror.Write(w, r, apierror.BadRequest("", "malformed multipart form: %v", err))
		return
	}
	defer r.MultipartForm.RemoveAll()
	project := r.FormValue("project_id")
	if why := httpx.BadText(project); why != "" {
		apierror.Write(w, r, apierror.BadRequest("project_id", "`project_id` %s", why))
		return
	}
	if _, _, err := auth.Project(r.Context(), project, "project_id"); err != nil {
		apierror.Write(w, r, err)
		return
	}
	f, hdr, err := r.FormFile("file")
	if err != nil {
		apierror.Write(w, r, apierror.BadRequest("file", "the form needs a file field named \"file\""))
		return
	}
	defer f.Close()
	content, err := io.ReadAll(io.LimitReader(f, trace.MaxFileBytes+1))
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if len(content) > trace.MaxFileBytes {
		apierror.Write(w, r, apierror.TooLarge("file is larger than %d bytes", trace.MaxFileBytes))
		return
	}
	// Form fields other than project_id, file and expected_digest are kept as sent.
	var unknown []trace.UnknownField
	for _, k := range sortedFormKeys(r.MultipartForm.Value) {
		if k == "project_id" || k == "expected_digest" {
			continue
		}
		b, _ := json.Marshal(strings.Join(r.MultipartForm.Value[k], ","))
		unknown = append(unknown, trace.UnknownField{Path: k, Value: b})
	}
	for k := range r.MultipartForm.File {
		if k != "file" {
			b, _ := json.Marshal("(a file part)")
			unknown = append(unknown, trace.UnknownField{Path: k, Value: b})
		}
	}
	ctx := trace.WithUnknownFields(r.Context(), routeName(r), unknown)
	res, err := a.svc.FileCreate(ctx, project, hdr.Filename, content, r.FormValue("expected_digest"))
	httpx.Reply(w, r, res, err)
}

func (a *API) fileContent(w http.ResponseWriter, r *http.Request) {
	var req trace.FileContentReadReq
	if _, err := decode(r, &req, strict); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if _, _, err := auth.Project(r.Context(), req.ProjectID, "project_id"); err != nil {
		apierror.Write(w, r, err)
		return
	}
	b, err := a.svc.FileContent(r.Context(), req)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(b)
}

func (a *API) refsReadBatch(w http.ResponseWriter, r *http.Request) {
	var req trace.RefsReadBatchReq
	if _, err := decode(r, &req, strict); err != nil {
		apierror.Write(w, r, err)
		return
	}
	res, err := a.svc.RefsReadBatch(r.Context(), req, authorizer(r.Context()))
	httpx.Reply(w, r, res, err)
}

// pathProject authorises the project named by the route's {entity}/{project}.
func pathProject(w http.ResponseWriter, r *http.Request) (string, bool) {
	project := r.PathValue("entity") + "/" + r.PathValue("project")
	if _, _, err := auth.Project(r.Context(), project, "project"); err != nil {
		apierror.Write(w, r, err)
		return "", false
	}
	return project, true
}

func (a *API) callsComplete(w http.ResponseWriter, r *http.Request) {
	project, ok := pathProject(w, r)
	if !ok {
		return
	}
	var req trace.CallsCompleteReq
	ctx, err := decode(r, &req, lenient)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	for i := range req.Batch {
		setStartUser(ctx, &req.Batch[i].StartedCallSchemaForInsert)
	}
	if err := a.svc.CallsComplete(ctx, project, req); err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, trace.Empty{})
}

func (a *API) v2CallStart(w http.ResponseWriter, r *http.Request) {
	project, ok := pathProject(w, r)
	if !ok {
		return
	}
	var req trace.CallStartReq
	ctx, err := decode(r, &req, lenient)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if req.Start.ProjectID != project {
		apierror.Write(w, r, apierror.BadRequest("start.project_id", "start.project_id must be %s (the project of the route)", project))
		return
	}
	setStartUser(ctx, &req.Start)
	res, err := a.svc.CallStart(ctx, req)
	httpx.Reply(w, r, res, err)
}

func (a *API) v2CallEnd(w http.ResponseWriter, r *http.Request) {
	project, ok := pathProject(w, r)
	if !ok {
		return
	}
	var req trace.CallEndReq
	ctx, err := decode(r, &req, lenient)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if req.End.ProjectID != project {
		apierror.Write(w, r, apierror.BadRequest("end.project_id", "end.project_id must be %s (the project of the route)", project))
		return
	}
	if err := a.svc.CallEnd(ctx, req); err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, trace.Empty{})
}

func sortedFormKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

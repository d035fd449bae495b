package traceapi

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/membudget"
	"github.com/honeai/hone/internal/pyjson"
	"github.com/honeai/hone/internal/trace"
)

// /calls/stream_query answers in the format its Accept header asks, as Weave's trace server
// does (Weave's frontend downloads its exports so): JSON lines by default, or CSV, TSV or one
// JSON array of the same calls (same filters, query, sort, columns, limit and offset).

// Media types of the calls export.
const (
	mediaJSONL = "application/jsonl"
	mediaJSON  = "application/json"
	mediaCSV   = "text/csv"
	mediaTSV   = "text/tab-separated-values"
)

// MaxExportCalls bounds the calls of one CSV, TSV or JSON answer of /calls/stream_query
// (JSON lines, the SDKs' format, are not bounded): a larger limit, or more matching calls
// without a limit, is a 400 naming limit, never a truncated file.
const MaxExportCalls = 100_000

// exportCap is MaxExportCalls (a test lowers it).
var exportCap = MaxExportCalls

// MaxExportColumns bounds the columns of a CSV or TSV answer (the distinct flattened paths of
// the calls' values).
const MaxExportColumns = 10_000

// exportFormat is the format the Accept header asks for: the first (by quality) of the
// export's media types it names, else JSON lines.
func exportFormat(accept string) string {
	type choice struct {
		media string
		q     float64
		at    int
	}
	var best []choice
	for i, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case mediaJSONL, mediaJSON, mediaCSV, mediaTSV:
		default:
			continue
		}
		q := 1.0
		if s, ok := params["q"]; ok {
			if v, err := strconv.ParseFloat(s, 64); err == nil {
				q = v
			}
		}
		if q > 0 {
			best = append(best, choice{mt, q, i})
		}
	}
	if len(best) == 0 {
		return mediaJSONL
	}
	slices.SortStableFunc(best, func(a, b choice) int { return cmp.Compare(b.q, a.q) })
	return best[0].media
}

// exportLimit bounds req to exportCap: a larger limit is a 400; without one, it asks for
// one call more than the bound, so that the export can tell that too many match (tooMany).
func exportLimit(req *trace.CallsQueryReq) (bounded bool, err error) {
	if req.Limit != nil {
		if *req.Limit > exportCap {
			return false, apierror.BadRequest("limit", "an export (Accept: CSV, TSV or JSON) answers at most %d calls, got limit %d: page with limit and offset", exportCap, *req.Limit)
		}
		return false, nil
	}
	n := exportCap + 1
	req.Limit = &n
	return true, nil
}

func tooMany() error {
	return apierror.BadRequest("limit", "more than %d calls match: an export (Accept: CSV, TSV or JSON) answers at most %d calls; narrow the filter or page with limit and offset", exportCap, exportCap)
}

// exportJSON answers the calls as one JSON array, written as they are read.
func (a *API) exportJSON(w http.ResponseWriter, r *http.Request, req trace.CallsQueryReq) {
	bounded, err := exportLimit(&req)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if bounded {
		st, err := a.svc.CallsQueryStats(r.Context(), trace.CallsQueryStatsReq{ProjectID: req.ProjectID, Filter: req.Filter, Query: req.Query,
			ExpandColumns: req.ExpandColumns, Limit: ptr(offsetOf(req) + exportCap + 1)})
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		if st.Count-offsetOf(req) > exportCap {
			apierror.Write(w, r, tooMany())
			return
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	started, n := false, 0
	err = a.svc.CallsQuery(r.Context(), req, func(c trace.CallSchema) error {
		if !started {
			w.Header().Set("Content-Type", mediaJSON)
			w.WriteHeader(http.StatusOK)
			bw.WriteByte('[')
			started = true
		} else {
			bw.WriteByte(',')
		}
		err := enc.Encode(c) // a newline after each call: whitespace between elements
		membudget.Reset(r.Context())
		if n++; n%256 == 0 && err == nil {
			err = flush(w, bw)
		}
		return err
	})
	if err != nil && !started {
		apierror.Write(w, r, err)
		return
	}
	if !started {
		w.Header().Set("Content-Type", mediaJSON)
		w.WriteHeader(http.StatusOK)
		bw.WriteByte('[')
	}
	if err == nil { // a failure after the first call leaves the array open: never a valid partial answer
		bw.WriteString("]\n")
	}
	_ = bw.Flush()
}

func flush(w http.ResponseWriter, bw *bufio.Writer) error {
	if err := bw.Flush(); err != nil {
		return err
	}
	http.NewResponseController(w).Flush()
	return nil
}

func ptr[T any](v T) *T { return &v }

func offsetOf(req trace.CallsQueryReq) int {
	if req.Offset == nil {
		return 0
	}
	return *req.Offset
}

// colNode is a node of the tree of a CSV export's columns: the paths of the calls' values,
// objects flattened (a key per level), anything else (arrays too) a leaf.
type colNode struct {
	keys     []string // children in the order they were first seen
	children map[string]*colNode
	selected bool // the path is a requested column or under one
	leaf     bool // some call has a value here that is not an object with members
	col      int  // its column, -1 when it has none
}

func (n *colNode) child(key string) *colNode {
	if c, ok := n.children[key]; ok {
		return c
	}
	if n.children == nil {
		n.children = map[string]*colNode{}
	}
	c := &colNode{selected: n.selected, col: -1}
	n.children[key] = c
	n.keys = append(n.keys, key)
	return c
}

// csvColumns is the columns of a CSV export, found in a first pass over the calls.
type csvColumns struct {
	root  *colNode
	nodes int
	names []string
}

// newCSVColumns starts the tree: every path when columns is empty, else the requested paths
// (in their order) and what is under them.
func newCSVColumns(columns []string) *csvColumns {
	c := &csvColumns{root: &colNode{selected: len(columns) == 0, col: -1}}
	for _, p := range columns {
		n := c.root
		for _, k := range strings.Split(p, ".") {
			n = n.child(k)
		}
		n.selected = true
	}
	return c
}

// add records the paths of a call's value (v, at node n).
func (c *csvColumns) add(n *colNode, v pyjson.Value) error {
	if !n.selected {
		if v.Kind == pyjson.Object {
			for _, m := range v.Obj {
				if ch, ok := n.children[m.Key]; ok {
					if err := c.add(ch, m.Val); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if v.Kind != pyjson.Object || len(v.Obj) == 0 {
		n.leaf = true
		return nil
	}
	for _, m := range v.Obj {
		ch, ok := n.children[m.Key]
		if !ok {
			if c.nodes++; c.nodes > MaxExportColumns {
				return apierror.BadRequest("columns", "the calls' values have more than %d distinct fields: name the columns to export (columns, dotted paths)", MaxExportColumns)
			}
			ch = n.child(m.Key)
		}
		if err := c.add(ch, m.Val); err != nil {
			return err
		}
	}
	return nil
}

// number gives every column its index and name: a selected path is a column when a call has
// a value there that is not an object with members, or when nothing is under it.
func (c *csvColumns) number(n *colNode, path string) {
	if n.selected && n != c.root && (n.leaf || len(n.keys) == 0) {
		n.col = len(c.names)
		c.names = append(c.names, path)
	}
	for _, k := range n.keys {
		p := k
		if path != "" {
			p = path + "." + k
		}
		c.number(n.children[k], p)
	}
}

// cells writes a call's value (v, at node n) into its row.
func cells(n *colNode, v pyjson.Value, row []string) {
	if n.col >= 0 {
		row[n.col] = cell(v, len(n.keys) > 0)
	}
	if v.Kind == pyjson.Object {
		for _, m := range v.Obj {
			if ch, ok := n.children[m.Key]; ok {
				cells(ch, m.Val, row)
			}
		}
	}
}

// cell is a value as CSV text: a string as it is, null empty, a number or boolean as its JSON
// literal, an array or an object as its JSON text (an object whose members have columns of
// their own: empty).
func cell(v pyjson.Value, split bool) string {
	switch v.Kind {
	case pyjson.Null:
		return ""
	case pyjson.String:
		return v.Str
	case pyjson.Object:
		if split && len(v.Obj) > 0 {
			return ""
		}
	}
	return string(pyjson.Compact(v))
}

// callValue is a call as the JSON lines answer writes it, parsed (keys in order).
func callValue(c trace.CallSchema) (pyjson.Value, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return pyjson.Value{}, err
	}
	return pyjson.Parse(b)
}

// exportCSV answers the calls as CSV or TSV (tab-separated, quoted as CSV is): a header of
// the flattened paths of the calls' values (inputs.messages, summary.weave.status; under the
// requested columns when columns is set), then a row per call. A first pass over the calls
// finds the columns; the second writes the rows as the calls are read.
func (a *API) exportCSV(w http.ResponseWriter, r *http.Request, req trace.CallsQueryReq, media string) {
	bounded, err := exportLimit(&req)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	cols := newCSVColumns(req.Columns)
	n := 0
	err = a.svc.CallsQuery(r.Context(), req, func(c trace.CallSchema) error {
		n++
		v, err := callValue(c)
		membudget.Reset(r.Context())
		if err != nil {
			return err
		}
		return cols.add(cols.root, v)
	})
	if err == nil && bounded && n > exportCap {
		err = tooMany()
	}
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	cols.number(cols.root, "")
	w.Header().Set("Content-Type", media+"; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	cw := csv.NewWriter(bw)
	if media == mediaTSV {
		cw.Comma = '\t'
	}
	if len(cols.names) > 0 {
		if err := cw.Write(cols.names); err != nil {
			return
		}
	}
	row := make([]string, len(cols.names))
	written := 0
	err = a.svc.CallsQuery(r.Context(), req, func(c trace.CallSchema) error {
		if written++; written > n {
			return nil // calls written since the first pass: their columns are not known
		}
		v, err := callValue(c)
		membudget.Reset(r.Context())
		if err != nil {
			return err
		}
		clear(row)
		cells(cols.root, v, row)
		if err := cw.Write(row); err != nil {
			return err
		}
		if written%256 == 0 {
			cw.Flush()
			return flush(w, bw)
		}
		return nil
	})
	cw.Flush()
	_ = bw.Flush()
}

package trace

import (
	"encoding/json"
	"runtime"
	"strconv"
	"sync"
	"unsafe"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/pyjson"
)

// DecodeCallBatch decodes the body of /call/upsert_batch in one pass of the pyjson parser
// (the ingest hot path; encoding/json's reflection was most of its cost). A wrong type is a
// 400 naming the field by its path. Fields Hone does not know, at any level, are returned
// with their paths and values (the write keeps them; see drift.go).
func DecodeCallBatch(body []byte) (CallCreateBatchReq, []UnknownField, error) {
	var unk []UnknownField
	req, err := decodeCallBatch(body, &unk)
	if err != nil {
		return CallCreateBatchReq{}, nil, err
	}
	return req, unk, nil
}

// parallelItems is the smallest batch whose items are decoded on several cores.
const parallelItems = 64

func decodeCallBatch(body []byte, unk *[]UnknownField) (CallCreateBatchReq, error) {
	items, err := batchItems(body, unk)
	if err != nil || items == nil {
		return CallCreateBatchReq{}, err
	}
	req := CallCreateBatchReq{Batch: make([]CallBatchItem, len(items))}
	if err := decodeItems(items, 0, req.Batch, unk, runtime.GOMAXPROCS(0)); err != nil {
		return CallCreateBatchReq{}, err
	}
	return req, nil
}

// batchItems is the first pass of decoding a batch body: it validates the whole body and
// returns the batch's items, each left as raw text (decodeItems parses them as the
// whole-body parse would have), and the unknown members besides the batch; nil items when
// the body has no batch. Any error of the first pass is reported by the whole-body parse, so
// that messages and offsets stay those of one parse.
func batchItems(body []byte, unk *[]UnknownField) ([]pyjson.Value, error) {
	v, err := pyjson.ParseShallow(body, 1)
	if err == nil && v.Kind == pyjson.Object && (len(v.Obj) != 1 || v.Obj[0].Key != "batch") {
		// Members besides the batch (rare) are kept as the whole-body parse reads them.
		v, err = pyjson.ParseShallow(body, 4)
	}
	if err != nil {
		if _, err2 := pyjson.ParseShallow(body, 4); err2 != nil {
			err = err2
		}
		if err == pyjson.ErrTooDeep {
			return nil, fault.Invalid("", "Request body nested deeper than %d levels", pyjson.MaxDepth)
		}
		return nil, fault.Invalid("", "Malformed JSON body: %v", err)
	}
	if v.Kind != pyjson.Object {
		return nil, fault.Invalid("", "Request body must be a JSON object")
	}
	var items []pyjson.Value
	for _, m := range v.Obj {
		if m.Key != "batch" {
			*unk = append(*unk, UnknownField{Path: joinPath("", m.Key), Value: rawValue(m.Val)})
			continue
		}
		if m.Val.Kind != pyjson.Array {
			return nil, typeErr("batch", "array", m.Val)
		}
		items = m.Val.Arr
		if items == nil {
			items = []pyjson.Value{}
		}
	}
	return items, nil
}

// decodeItems decodes items, the batch's items from index base on, into out, on up to workers
// goroutines for a large batch; the error is the first in item order, and the unknown fields
// are appended in item order.
func decodeItems(items []pyjson.Value, base int, out []CallBatchItem, unk *[]UnknownField, workers int) error {
	parts := 1
	if len(items) >= parallelItems {
		parts = max(1, min(workers, 4, len(items)/(parallelItems/2)))
	}
	type part struct {
		unk []UnknownField
		err error
	}
	res := make([]part, parts)
	inParts(len(items), parts, func(k, lo, hi int) {
		r := &res[k]
		for i := lo; i < hi; i++ {
			if r.err = decodeRawItem(items[i], base+i, &out[i], &r.unk); r.err != nil {
				return
			}
		}
	})
	for _, r := range res { // the first error in item order
		if r.err != nil {
			return r.err
		}
		*unk = append(*unk, r.unk...)
	}
	return nil
}

// inParts runs fn on parts contiguous ranges [lo, hi) of [0, n), the last on the calling
// goroutine, and waits for all of them.
func inParts(n, parts int, fn func(k, lo, hi int)) {
	var wg sync.WaitGroup
	for k := range parts {
		lo, hi := k*n/parts, (k+1)*n/parts
		if k == parts-1 {
			fn(k, lo, hi)
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); fn(k, lo, hi) }()
	}
	wg.Wait()
}

// decodeRawItem decodes batch item i, left raw by the first pass of decodeCallBatch.
func decodeRawItem(raw pyjson.Value, i int, out *CallBatchItem, unk *[]UnknownField) error {
	it := raw
	if raw.Kind == pyjson.Raw {
		var err error
		// The text was validated by the first pass; it is read in place, not copied.
		it, err = pyjson.ParseShallowAt(unsafe.Slice(unsafe.StringData(raw.Str), len(raw.Str)), 2, 4)
		if err != nil {
			return fault.Invalid("", "Malformed JSON body: %v", err)
		}
	}
	return decodeBatchItem(it, "batch["+strconv.Itoa(i)+"]", out, unk)
}

func kindName(v pyjson.Value) string {
	switch v.Kind {
	case pyjson.Null:
		return "null"
	case pyjson.Bool:
		return "boolean"
	case pyjson.Int, pyjson.Float:
		return "number"
	case pyjson.String:
		return "string"
	case pyjson.Array:
		return "array"
	}
	return "object"
}

func typeErr(field, want string, got pyjson.Value) error {
	return fault.Invalid(field, "Invalid type for `%s`: expected %s, got %s", field, want, kindName(got))
}

func decodeBatchItem(v pyjson.Value, p string, out *CallBatchItem, unk *[]UnknownField) error {
	if v.Kind != pyjson.Object {
		return typeErr(p, "object", v)
	}
	for _, m := range v.Obj {
		switch m.Key {
		case "mode":
			if m.Val.Kind != pyjson.String {
				return typeErr(p+".mode", "string", m.Val)
			}
			out.Mode = m.Val.Str
		case "req":
			if m.Val.Kind != pyjson.Object {
				return typeErr(p+".req", "object", m.Val)
			}
			for _, r := range m.Val.Obj {
				switch r.Key {
				case "start":
					if r.Val.Kind == pyjson.Null {
						continue
					}
					st, err := decodeStart(r.Val, p+".req.start", unk)
					if err != nil {
						return err
					}
					out.Req.Start = st
				case "end":
					if r.Val.Kind == pyjson.Null {
						continue
					}
					en, err := decodeEnd(r.Val, p+".req.end", unk)
					if err != nil {
						return err
					}
					out.Req.End = en
				default:
					*unk = append(*unk, UnknownField{Path: joinPath(p+".req", r.Key), Value: rawValue(r.Val)})
				}
			}
		default:
			*unk = append(*unk, UnknownField{Path: joinPath(p, m.Key), Value: rawValue(m.Val)})
		}
	}
	return nil
}

// fieldReader reads typed members of an object value, naming fields by path in errors.
type fieldReader struct {
	path string
	err  error
}

func (f *fieldReader) str(v pyjson.Value, key string, dst *string) {
	if f.err != nil || v.Kind == pyjson.Null {
		return
	}
	if v.Kind != pyjson.String {
		f.err = typeErr(f.path+"."+key, "string", v)
		return
	}
	*dst = v.Str
}

func (f *fieldReader) optStr(v pyjson.Value, key string, dst **string) {
	if f.err != nil || v.Kind == pyjson.Null {
		return
	}
	var s string
	f.str(v, key, &s)
	if f.err == nil {
		*dst = &s
	}
}

func (f *fieldReader) optInt(v pyjson.Value, key string, dst **int64) {
	if f.err != nil || v.Kind == pyjson.Null {
		return
	}
	if v.Kind != pyjson.Int {
		f.err = typeErr(f.path+"."+key, "integer", v)
		return
	}
	n, err := strconv.ParseInt(v.Str, 10, 64)
	if err != nil {
		f.err = fault.Invalid(f.path+"."+key, "`%s.%s` is out of range", f.path, key)
		return
	}
	*dst = &n
}

func compactRaw(v pyjson.Value) json.RawMessage { return json.RawMessage(pyjson.Compact(v)) }

func decodeStart(v pyjson.Value, p string, unk *[]UnknownField) (*StartedCallSchemaForInsert, error) {
	if v.Kind != pyjson.Object {
		return nil, typeErr(p, "object", v)
	}
	f := &fieldReader{path: p}
	st := &StartedCallSchemaForInsert{}
	for _, m := range v.Obj {
		switch m.Key {
		case "project_id":
			f.str(m.Val, m.Key, &st.ProjectID)
		case "id":
			f.optStr(m.Val, m.Key, &st.ID)
		case "op_name":
			f.str(m.Val, m.Key, &st.OpName)
		case "display_name":
			f.optStr(m.Val, m.Key, &st.DisplayName)
		case "trace_id":
			f.optStr(m.Val, m.Key, &st.TraceID)
		case "parent_id":
			f.optStr(m.Val, m.Key, &st.ParentID)
		case "thread_id":
			f.optStr(m.Val, m.Key, &st.ThreadID)
		case "turn_id":
			f.optStr(m.Val, m.Key, &st.TurnID)
		case "started_at":
			f.str(m.Val, m.Key, &st.StartedAt)
		case "attributes":
			st.Attributes = compactRaw(m.Val)
		case "inputs":
			st.Inputs = compactRaw(m.Val)
		case "otel_dump":
			st.OtelDump = compactRaw(m.Val)
		case "wb_user_id":
			f.optStr(m.Val, m.Key, &st.WBUserID)
		case "wb_run_id":
			f.optStr(m.Val, m.Key, &st.WBRunID)
		case "wb_run_step":
			f.optInt(m.Val, m.Key, &st.WBRunStep)
		default:
			*unk = append(*unk, UnknownField{Path: joinPath(p, m.Key), Value: rawValue(m.Val)})
		}
	}
	return st, f.err
}

func decodeEnd(v pyjson.Value, p string, unk *[]UnknownField) (*EndedCallSchemaForInsert, error) {
	if v.Kind != pyjson.Object {
		return nil, typeErr(p, "object", v)
	}
	f := &fieldReader{path: p}
	en := &EndedCallSchemaForInsert{}
	for _, m := range v.Obj {
		switch m.Key {
		case "project_id":
			f.str(m.Val, m.Key, &en.ProjectID)
		case "id":
			f.str(m.Val, m.Key, &en.ID)
		case "ended_at":
			f.str(m.Val, m.Key, &en.EndedAt)
		case "exception":
			f.optStr(m.Val, m.Key, &en.Exception)
		case "output":
			en.Output = compactRaw(m.Val)
		case "summary":
			en.Summary = compactRaw(m.Val)
		case "display_name":
			f.optStr(m.Val, m.Key, &en.DisplayName)
		case "trace_id":
			f.optStr(m.Val, m.Key, &en.TraceID)
		case "wb_run_step_end":
			f.optInt(m.Val, m.Key, &en.WBRunStepEnd)
		case "started_at":
			f.optStr(m.Val, m.Key, &en.StartedAtHint)
		case "is_eval":
			if m.Val.Kind != pyjson.Null && m.Val.Kind != pyjson.Bool {
				f.err = typeErr(p+".is_eval", "boolean", m.Val)
			} else if m.Val.Kind == pyjson.Bool && f.err == nil {
				b := m.Val.Bool
				en.IsEval = &b
			}
		default:
			*unk = append(*unk, UnknownField{Path: joinPath(p, m.Key), Value: rawValue(m.Val)})
		}
	}
	return en, f.err
}

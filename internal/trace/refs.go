package trace

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/membudget"
	"github.com/honeai/hone/internal/pyjson"
)

// Ref is a parsed Weave ref URI:
//
//	weave:///<entity>/<project>/object/<name>:<digest>[/<kind>/<value>...]
//	weave:///<entity>/<project>/op/<name>:<digest>
//	weave:///<entity>/<project>/table/<table digest>[/id/<row digest>]
//	weave:///<entity>/<project>/call/<call id>
//
// Extra path segments come in pairs (`attr`, `key`, `index`, `id`), each URL-quoted.
type Ref struct {
	Entity, Project string
	Kind            string // object, op, table, call
	Name            string // object or op name; "" for tables and calls
	Digest          string // version digest, table digest, or call id
	Extra           []RefStep
}

// RefStep is one extra path step of a ref.
type RefStep struct {
	Kind  string // attr, key, index, id
	Value string
}

// ProjectID is `<entity>/<project>`.
func (r Ref) ProjectID() string { return r.Entity + "/" + r.Project }

// String writes the ref back as a URI.
func (r Ref) String() string {
	var b strings.Builder
	b.WriteString("weave:///")
	b.WriteString(r.Entity + "/" + r.Project + "/" + r.Kind + "/")
	if r.Name != "" {
		b.WriteString(url.PathEscape(r.Name) + ":" + r.Digest)
	} else {
		b.WriteString(r.Digest)
	}
	for _, s := range r.Extra {
		b.WriteString("/" + s.Kind + "/" + url.PathEscape(s.Value))
	}
	return b.String()
}

// RefPrefix starts every external Weave ref.
const RefPrefix = "weave:///"

// ParseRef parses a Weave ref URI.
func ParseRef(s string) (Ref, error) {
	rest, ok := strings.CutPrefix(s, RefPrefix)
	if !ok {
		return Ref{}, fmt.Errorf("not a weave ref (must start with %s): %q", RefPrefix, s)
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 4 {
		return Ref{}, fmt.Errorf("incomplete weave ref: %q", s)
	}
	r := Ref{Entity: parts[0], Project: parts[1], Kind: parts[2]}
	if r.Entity == "" || r.Project == "" {
		return Ref{}, fmt.Errorf("weave ref without entity or project: %q", s)
	}
	head, err := url.PathUnescape(parts[3])
	if err != nil {
		return Ref{}, fmt.Errorf("bad escape in weave ref %q", s)
	}
	switch r.Kind {
	case "object", "op":
		i := strings.LastIndexByte(parts[3], ':')
		if i <= 0 || i == len(parts[3])-1 {
			return Ref{}, fmt.Errorf("weave %s ref needs <name>:<digest>: %q", r.Kind, s)
		}
		if r.Name, err = url.PathUnescape(parts[3][:i]); err != nil {
			return Ref{}, fmt.Errorf("bad escape in weave ref %q", s)
		}
		r.Digest = parts[3][i+1:]
	case "table", "call":
		if head == "" {
			return Ref{}, fmt.Errorf("weave %s ref without id: %q", r.Kind, s)
		}
		r.Digest = head
	default:
		return Ref{}, fmt.Errorf("unknown weave ref kind %q in %q", r.Kind, s)
	}
	extra := parts[4:]
	if len(extra)%2 != 0 {
		return Ref{}, fmt.Errorf("weave ref path must come in <kind>/<value> pairs: %q", s)
	}
	for i := 0; i < len(extra); i += 2 {
		k := extra[i]
		if k != "attr" && k != "key" && k != "index" && k != "id" {
			return Ref{}, fmt.Errorf("unknown weave ref path step %q in %q", k, s)
		}
		v, err := url.PathUnescape(extra[i+1])
		if err != nil {
			return Ref{}, fmt.Errorf("bad escape in weave ref %q", s)
		}
		r.Extra = append(r.Extra, RefStep{Kind: k, Value: v})
	}
	return r, nil
}

// The bounds of one /refs/read_batch: how many refs it may name, and how many bytes of stored
// values it may load and answer (each ref's stored object or row counts when it is loaded,
// before it is parsed, and its answer counts again), so that a small request naming one large
// object many times cannot make the server hold gigabytes.
const (
	MaxRefsPerBatch    = 1000
	MaxRefsBatchBytes  = 32 << 20
	refsBatchBytesName = "refs"
)

// refBudget is what is left of a batch's MaxRefsBatchBytes. Each charge is also charged to
// the process's memory budget for requests (membudget, through ctx).
type refBudget struct {
	ctx  context.Context
	left int64
}

func (b *refBudget) charge(n int) error {
	if b == nil {
		return nil
	}
	b.left -= int64(n)
	if b.left < 0 {
		return fault.TooLarge(refsBatchBytesName, "refs: the values these refs name exceed the limit of %d bytes for one read_batch; read them in smaller batches", MaxRefsBatchBytes)
	}
	return membudget.Charge(b.ctx, n)
}

// RefsReadBatch resolves refs to values: object and op versions (with attr/key/index/id
// paths, following table refs inside values) and table rows. A batch names at most
// MaxRefsPerBatch refs and loads and answers at most MaxRefsBatchBytes; more is a 413.
func (s *Service) RefsReadBatch(ctx context.Context, req RefsReadBatchReq, authorize Authorizer) (RefsReadBatchRes, error) {
	if len(req.Refs) > MaxRefsPerBatch {
		return RefsReadBatchRes{}, fault.TooLarge(refsBatchBytesName, "refs: %d refs in one read_batch, more than the limit of %d; read them in smaller batches", len(req.Refs), MaxRefsPerBatch)
	}
	budget := &refBudget{ctx: ctx, left: MaxRefsBatchBytes}
	res := RefsReadBatchRes{Vals: make([]json.RawMessage, len(req.Refs))}
	// A ref named again is resolved once: its value is loaded, parsed and answered from one
	// copy (and still counts towards the batch's bounds each time it is named).
	seen := map[string]json.RawMessage{}
	for i, raw := range req.Refs {
		p := fmt.Sprintf("refs[%d]", i)
		r, err := ParseRef(raw)
		if err != nil {
			return RefsReadBatchRes{}, badField(p, "%v", err)
		}
		if err := authorize(r.ProjectID(), p); err != nil {
			return RefsReadBatchRes{}, err
		}
		val, ok := seen[raw]
		if ok {
			if err := budget.charge(len(val)); err != nil { // as if loaded again
				return RefsReadBatchRes{}, err
			}
		} else {
			v, err := s.resolveRef(ctx, r, 0, budget)
			if err != nil {
				return RefsReadBatchRes{}, err
			}
			val = pyjson.Compact(v)
			seen[raw] = val
		}
		res.Vals[i] = val
		if err := budget.charge(len(res.Vals[i])); err != nil {
			return RefsReadBatchRes{}, err
		}
	}
	return res, nil
}

func (s *Service) resolveRef(ctx context.Context, r Ref, depth int, budget *refBudget) (pyjson.Value, error) {
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
		if err := budget.charge(len(o.Val)); err != nil {
			return pyjson.Value{}, err
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
		if err := budget.charge(len(raw)); err != nil {
			return pyjson.Value{}, err
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
			return s.resolveRef(ctx, inner, depth+1, budget)
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

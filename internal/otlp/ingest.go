package otlp

import (
	"context"
	"errors"
	"strings"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/trace"
)

// Limits bound what one export request may ask of the server.
type Limits struct {
	MaxSpans      int // spans in one request: more is a 413 naming resource_spans
	MaxAttributes int // attributes of a span, a resource, an event or a link: more rejects the span
	MaxEvents     int // events of a span
	MaxLinks      int // links of a span
	MaxCallBytes  int // the JSON of one call (attributes, inputs, output, summary)
	MaxBytes      int // the JSON of all the request's calls together
	MaxResource   int // the JSON of one resource's attributes (kept with each of its spans)
}

// DefaultLimits are the limits of a zero Limits.
func DefaultLimits() Limits {
	return Limits{MaxSpans: 10_000, MaxAttributes: 1024, MaxEvents: 1024, MaxLinks: 128,
		MaxCallBytes: 32 << 20, MaxBytes: 256 << 20, MaxResource: 1 << 20}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	for _, p := range []struct{ v, d *int }{{&l.MaxSpans, &d.MaxSpans}, {&l.MaxAttributes, &d.MaxAttributes},
		{&l.MaxEvents, &d.MaxEvents}, {&l.MaxLinks, &d.MaxLinks}, {&l.MaxCallBytes, &d.MaxCallBytes},
		{&l.MaxBytes, &d.MaxBytes}, {&l.MaxResource, &d.MaxResource}} {
		if *p.v <= 0 {
			*p.v = *p.d
		}
	}
	return l
}

// Ingester writes OTLP spans into the trace store as calls.
type Ingester struct {
	Trace  *trace.Service
	Limits Limits // zero fields: DefaultLimits
}

// Request is who sends an export and where its spans go without a project of their own.
type Request struct {
	// Entity is the key's entity: the calls' wb_user_id, and the entity of a resource that
	// names only wandb.project.
	Entity string
	// ProjectHeader is the project_id header (<entity>/<project>), "" when none: the project
	// of spans whose resource names none.
	ProjectHeader string
	// Authorize checks that the request may write to a project (auth.Project).
	Authorize trace.Authorizer
}

// Result is what an export did: the spans written, and those rejected with the reasons
// (OTLP's partial success: rejected_spans and error_message).
type Result struct {
	Accepted int
	Rejected int64
	Message  string
}

// maxMessages is how many reasons the partial success's message lists (as Weave's).
const maxMessages = 20

// Export writes the request's spans as calls: every span of a resource to the project its
// resource names (wandb.entity and wandb.project; wandb.project alone is of the key's
// entity) or, when it names none, to r.ProjectHeader. A resource without a project or whose
// project the key may not write rejects its spans; a span that cannot be a call (a bad id,
// no name or start, over a limit) is rejected alone. Rejections are the Result's; the spans
// that pass are written in one transaction. When no span passes and every rejection was of
// the request's project (none, malformed, another entity's), that fault is returned (400 or
// 403). A request of more than Limits.MaxSpans spans is a fault.TooLarge.
func (g *Ingester) Export(ctx context.Context, req *tracepb.TracesData, r Request) (Result, error) {
	lim := g.Limits.withDefaults()
	total := 0
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			total += len(ss.GetSpans())
		}
	}
	if total > lim.MaxSpans {
		return Result{}, fault.TooLarge("resource_spans", "The request holds %d spans, more than the %d allowed in one export; send smaller batches", total, lim.MaxSpans)
	}
	var (
		res      Result
		msgs     []string
		projFail error // the first project fault, while every rejection is one
		onlyProj = true
		calls    []spanCall
		index    = map[[2]string]int{} // (project, span id) -> index in calls: the last one wins
		bytes    int
	)
	note := func(n int, msg string) {
		res.Rejected += int64(n)
		if len(msgs) <= maxMessages {
			msgs = append(msgs, msg)
		}
	}
	for ri, rs := range req.GetResourceSpans() {
		n := 0
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
		if n == 0 {
			continue
		}
		ra := attributes(rs.GetResource().GetAttributes())
		project, err := g.project(ra, len(rs.GetResource().GetAttributes()), r, lim)
		if err != nil {
			if projFail == nil {
				projFail = err
			}
			note(n, "resource_spans["+itoa(ri)+"]: "+err.Error())
			continue
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				c, err := mapSpan(project, r.Entity, sp, ra, ss.GetScope(), lim)
				if err == nil && bytes+c.size > lim.MaxBytes {
					err = reject("span %s: the request's calls would take more than %d bytes; send smaller batches", c.id, lim.MaxBytes)
				}
				if err != nil {
					onlyProj = false
					note(1, err.Error())
					continue
				}
				bytes += c.size
				key := [2]string{project, c.id}
				if i, ok := index[key]; ok {
					bytes -= calls[i].size
					calls[i] = c
					continue
				}
				index[key] = len(calls)
				calls = append(calls, c)
			}
		}
	}
	if len(calls) == 0 && projFail != nil && onlyProj {
		return Result{}, projFail
	}
	written, err := g.write(ctx, calls, r.Authorize, note)
	if err != nil {
		return Result{}, err
	}
	res.Accepted = written
	if len(msgs) > maxMessages {
		msgs = append(msgs[:maxMessages], "...")
	}
	res.Message = strings.Join(msgs, "; ")
	return res, nil
}

// project is the project of a resource's spans, authorised.
func (g *Ingester) project(ra attrs, n int, r Request, lim Limits) (string, error) {
	if n > lim.MaxAttributes {
		return "", fault.Invalid("resource.attributes", "the resource has %d attributes, more than the %d allowed", n, lim.MaxAttributes)
	}
	if sz := len(compact(ra)); sz > lim.MaxResource {
		return "", fault.Invalid("resource.attributes", "the resource's attributes take %d bytes, more than the %d allowed", sz, lim.MaxResource)
	}
	entity, project := ra.str("wandb.entity"), ra.str("wandb.project")
	var pid, param string
	switch {
	case project != "":
		if entity == "" {
			entity = r.Entity
		}
		pid, param = entity+"/"+project, "resource.attributes.wandb.project"
	case entity != "":
		return "", fault.Invalid("resource.attributes.wandb.project", "the resource names wandb.entity but no wandb.project")
	case r.ProjectHeader != "":
		pid, param = r.ProjectHeader, "project_id"
	default:
		return "", fault.Invalid("project_id", "no project: set the resource attributes wandb.entity and wandb.project, or the project_id header (<entity>/<project>)")
	}
	if strings.ContainsRune(pid, 0) || len(pid) > 512 {
		return "", fault.Invalid(param, "%s is not a project id", param)
	}
	if _, _, err := auth.SplitProject(pid, param); err != nil {
		return "", err
	}
	if err := r.Authorize(pid, param); err != nil {
		return "", err
	}
	return pid, nil
}

// write records calls in one transaction. Should the store refuse one of them (a value
// none of the checks above foresaw), each is written alone and those refused are rejected.
func (g *Ingester) write(ctx context.Context, calls []spanCall, authorize trace.Authorizer, note func(int, string)) (int, error) {
	if len(calls) == 0 {
		return 0, nil
	}
	batch := func(cs []spanCall) trace.CallCreateBatchReq {
		req := trace.CallCreateBatchReq{Batch: make([]trace.CallBatchItem, 0, 2*len(cs))}
		for i := range cs {
			var s, e trace.CallBatchItem
			s.Mode, s.Req.Start = "start", &cs[i].start
			e.Mode, e.Req.End = "end", &cs[i].end
			req.Batch = append(req.Batch, s, e)
		}
		return req
	}
	_, err := g.Trace.CallUpsertBatch(ctx, batch(calls), authorize)
	if err == nil {
		return len(calls), nil
	}
	if f, ok := fault.As(err); !ok || f.Kind != fault.KindInvalid {
		return 0, err
	}
	written := 0
	for i := range calls {
		_, err := g.Trace.CallUpsertBatch(ctx, batch(calls[i:i+1]), authorize)
		var f *fault.Error
		switch {
		case err == nil:
			written++
		case errors.As(err, &f) && f.Kind == fault.KindInvalid:
			note(1, "span "+calls[i].id+": "+strings.TrimPrefix(f.Msg, "batch[0]."))
		default:
			return written, err
		}
	}
	return written, nil
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

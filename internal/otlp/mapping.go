package otlp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	common "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/trace"
)

// maxOpName is the longest op name kept whole (Weave's MAX_OP_NAME_LENGTH); a longer span
// name is shortened and marked with 4 hex digits of its SHA-256, so that long names stay apart.
const maxOpName = 128

// maxIDText bounds the thread, turn and display names taken from attributes; a longer value
// (or one holding NUL, which PostgreSQL's text cannot hold) stays an attribute only.
const maxIDText = 1024

// The attribute keys of inputs and outputs other than chat messages, in Weave's order
// (weave/trace_server/opentelemetry/constants.py): the first one set is the call's.
var (
	inputKeys = []string{"ai.prompt", "input.value", "mlflow.spanInputs", "pydantic_ai.all_messages",
		"traceloop.entity.input", "gcp.vertex.agent.tool_call_args", "gcp.vertex.agent.llm_request", "input", "inputs"}
	outputKeys = []string{"ai.response", "output.value", "mlflow.spanOutputs", "final_result", "gen_ai.content.completion",
		"traceloop.entity.output", "gcp.vertex.agent.tool_response", "gcp.vertex.agent.llm_response", "output", "outputs"}
)

// attributeKeys are the call attributes Weave derives from span attributes: for each, the
// keys it is read from, the first one set winning.
var attributeKeys = []struct {
	name string
	keys []string
}{
	{"system", []string{"gen_ai.system", "llm.system", "gen_ai.provider.name", "system_prompt"}},
	{"kind", []string{"weave.span.kind", "traceloop.span.kind", "openinference.span.kind"}},
	{"model", []string{"gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "ai.model.id"}},
	{"provider", []string{"llm.provider", "ai.model.provider", "gen_ai.provider.name"}},
	{"agent", []string{"gen_ai.agent.name", "agent.name"}},
	{"tools", []string{"gen_ai.agent.tools"}},
	{"operation", []string{"gen_ai.operation.name"}},
}

// usageKeys read token counts. Each count is stored under one name only (prompt_tokens or
// input_tokens, completion_tokens or output_tokens), since the store adds the two names up.
var usageKeys = []struct {
	name string
	keys []string
}{
	{"input_tokens", []string{"gen_ai.usage.input_tokens"}},
	{"prompt_tokens", []string{"gen_ai.usage.prompt_tokens", "llm.token_count.prompt", "ai.usage.promptTokens"}},
	{"output_tokens", []string{"gen_ai.usage.output_tokens"}},
	{"completion_tokens", []string{"gen_ai.usage.completion_tokens", "llm.token_count.completion", "ai.usage.completionTokens"}},
	{"total_tokens", []string{"llm.usage.total_tokens", "llm.token_count.total", "gen_ai.usage.total_tokens"}},
	{"cache_read_input_tokens", []string{"gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens", "llm.token_count.prompt_details.cache_read"}},
	{"cache_creation_input_tokens", []string{"gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens", "llm.token_count.prompt_details.cache_write"}},
}

// threadKeys name the conversation a span belongs to: Weave's wandb.thread_id, the GenAI
// conventions' conversation id, OpenInference's session.
var threadKeys = []string{"wandb.thread_id", "gen_ai.conversation.id", "session.id", "gcp.vertex.agent.session_id"}

// rejection is why a span was not taken.
type rejection struct{ msg string }

func (r *rejection) Error() string { return r.msg }

func reject(format string, args ...any) error { return &rejection{fmt.Sprintf(format, args...)} }

// spanCall is a span mapped to a call.
type spanCall struct {
	id    string
	start trace.StartedCallSchemaForInsert
	end   trace.EndedCallSchemaForInsert
	size  int
}

// validID is the hex of an id of n bytes, "" when it is not one (wrong length, all zeros).
func validID(b []byte, n int) string {
	if len(b) != n {
		return ""
	}
	for _, c := range b {
		if c != 0 {
			return hex.EncodeToString(b)
		}
	}
	return ""
}

func clean(s string) bool { return s != "" && len(s) <= maxIDText && !strings.ContainsRune(s, 0) }

// mapSpan maps one span of project to its call, or says why it is rejected.
func mapSpan(project, user string, sp *tracepb.Span, res attrs, scope *common.InstrumentationScope, lim Limits) (spanCall, error) {
	id := validID(sp.GetSpanId(), 8)
	if id == "" {
		return spanCall{}, reject("span_id must be 8 bytes, not all zero")
	}
	traceID := validID(sp.GetTraceId(), 16)
	if traceID == "" {
		return spanCall{}, reject("span %s: trace_id must be 16 bytes, not all zero", id)
	}
	var parent string
	if p := sp.GetParentSpanId(); len(p) > 0 {
		if parent = validID(p, 8); parent == "" {
			return spanCall{}, reject("span %s: parent_span_id must be empty or 8 bytes, not all zero", id)
		}
		if parent == id {
			return spanCall{}, reject("span %s: a span cannot be its own parent", id)
		}
	}
	name := sp.GetName()
	if name == "" {
		return spanCall{}, reject("span %s: name is empty", id)
	}
	if strings.ContainsRune(name, 0) {
		return spanCall{}, reject("span %s: name holds a NUL character", id)
	}
	if n := len(sp.GetAttributes()); n > lim.MaxAttributes {
		return spanCall{}, reject("span %s: %d attributes, more than the %d allowed", id, n, lim.MaxAttributes)
	}
	if n := len(sp.GetEvents()); n > lim.MaxEvents {
		return spanCall{}, reject("span %s: %d events, more than the %d allowed", id, n, lim.MaxEvents)
	}
	if n := len(sp.GetLinks()); n > lim.MaxLinks {
		return spanCall{}, reject("span %s: %d links, more than the %d allowed", id, n, lim.MaxLinks)
	}
	startNs, endNs := sp.GetStartTimeUnixNano(), sp.GetEndTimeUnixNano()
	if startNs == 0 || startNs > math.MaxInt64 {
		return spanCall{}, reject("span %s: start_time_unix_nano is required", id)
	}
	if endNs > math.MaxInt64 {
		return spanCall{}, reject("span %s: end_time_unix_nano is out of range", id)
	}
	a := attributes(sp.GetAttributes())
	events := make([]spanEvent, len(sp.GetEvents()))
	for i, e := range sp.GetEvents() {
		if n := len(e.GetAttributes()); n > lim.MaxAttributes {
			return spanCall{}, reject("span %s: event %d has %d attributes, more than the %d allowed", id, i, n, lim.MaxAttributes)
		}
		events[i] = spanEvent{name: e.GetName(), a: attributes(e.GetAttributes())}
	}
	for i, l := range sp.GetLinks() {
		if n := len(l.GetAttributes()); n > lim.MaxAttributes {
			return spanCall{}, reject("span %s: link %d has %d attributes, more than the %d allowed", id, i, n, lim.MaxAttributes)
		}
	}

	started := time.Unix(0, int64(startNs)).UTC()
	ended := started
	if endNs >= startNs {
		ended = time.Unix(0, int64(endNs)).UTC()
	}
	if t, ok := overrideTime(a["langfuse.startTime"]); ok {
		started = t
	}
	if t, ok := overrideTime(a["langfuse.endTime"]); ok && !t.Before(started) {
		ended = t
	}
	if ended.Before(started) {
		ended = started
	}

	consumed := map[string]bool{}
	callAttrs := map[string]any{}
	for _, k := range attributeKeys {
		for _, key := range k.keys {
			if v := a[key]; truthy(v) {
				callAttrs[k.name] = decodeJSONText(v)
				break
			}
		}
	}
	params := modelParameters(a)
	if params != nil {
		callAttrs["model_parameters"] = params
	}
	model := text(callAttrs["model"])
	if model == "" {
		if m, ok := params.(map[string]any); ok {
			model = text(m["model"])
		}
	}
	if custom, ok := decodeJSONText(a["wandb.attributes"]).(map[string]any); ok {
		for k, v := range custom {
			if k != "otel" {
				callAttrs[k] = v
			}
		}
	}

	inputs, output, usedEvents := io(a, events, model, consumed)

	otel := map[string]any{"span_kind": spanKind(sp.GetKind())}
	st := map[string]any{"code": statusCode(sp.GetStatus().GetCode())}
	if m := sp.GetStatus().GetMessage(); m != "" {
		st["message"] = m
	}
	otel["status"] = st
	rest := attrs{}
	for k, v := range a {
		if !consumed[k] {
			rest[k] = v
		}
	}
	otel["attributes"] = rest
	if len(res) > 0 {
		otel["resource"] = res
	}
	if scope != nil && (scope.GetName() != "" || scope.GetVersion() != "") {
		otel["scope"] = map[string]any{"name": scope.GetName(), "version": scope.GetVersion()}
	}
	var evs []any
	for i, e := range sp.GetEvents() {
		if usedEvents[i] {
			continue
		}
		ev := map[string]any{"name": e.GetName(), "attributes": events[i].a}
		if t := e.GetTimeUnixNano(); t > 0 && t <= math.MaxInt64 {
			ev["time"] = db.FormatTime(time.Unix(0, int64(t)))
		}
		evs = append(evs, ev)
	}
	if len(evs) > 0 {
		otel["events"] = evs
	}
	var links []any
	for _, l := range sp.GetLinks() {
		links = append(links, map[string]any{"trace_id": hex.EncodeToString(l.GetTraceId()), "span_id": hex.EncodeToString(l.GetSpanId()),
			"attributes": attributes(l.GetAttributes())})
	}
	if len(links) > 0 {
		otel["links"] = links
	}
	if ts := sp.GetTraceState(); ts != "" {
		otel["trace_state"] = ts
	}
	if n := sp.GetDroppedAttributesCount(); n > 0 {
		otel["dropped_attributes_count"] = n
	}
	if n := sp.GetDroppedEventsCount(); n > 0 {
		otel["dropped_events_count"] = n
	}
	if n := sp.GetDroppedLinksCount(); n > 0 {
		otel["dropped_links_count"] = n
	}
	callAttrs["otel"] = otel

	var summary json.RawMessage = json.RawMessage(`{}`)
	if u := usage(a); u != nil {
		key := model
		if key == "" {
			key = "usage"
		}
		summary = compact(map[string]any{"usage": map[string]any{key: u}})
	}

	c := spanCall{id: id}
	opName := shortName(name)
	startedAt, endedAt := db.FormatTime(started), db.FormatTime(ended)
	c.start = trace.StartedCallSchemaForInsert{ProjectID: project, ID: &id, OpName: opName, TraceID: &traceID,
		StartedAt: startedAt, Attributes: compact(callAttrs), Inputs: inputs}
	if parent != "" {
		c.start.ParentID = &parent
	}
	if user != "" {
		c.start.WBUserID = &user
	}
	if dn := a.str("wandb.display_name"); clean(dn) {
		c.start.DisplayName = &dn
	}
	for _, k := range threadKeys {
		if th := a.str(k); clean(th) {
			c.start.ThreadID = &th
			if truthy(a["wandb.is_turn"]) || parent == "" {
				turn := id
				c.start.TurnID = &turn
			}
			break
		}
	}
	if run := a.str("wandb.wb_run_id"); clean(run) {
		if !strings.ContainsAny(run, "/:") {
			run = project + ":" + run
		}
		c.start.WBRunID = &run
	}
	if step, ok := integer(a["wandb.wb_run_step"]); ok {
		c.start.WBRunStep = &step
	}
	c.end = trace.EndedCallSchemaForInsert{ProjectID: project, ID: id, EndedAt: endedAt, Output: output, Summary: summary,
		TraceID: &traceID, StartedAtHint: &startedAt}
	if step, ok := integer(a["wandb.wb_run_step_end"]); ok {
		c.end.WBRunStepEnd = &step
	}
	if ex, ok := exception(sp, events); ok {
		c.end.Exception = &ex
	}
	c.size = len(c.start.Attributes) + len(c.start.Inputs) + len(c.end.Output) + len(c.end.Summary) + len(name)
	if c.size > lim.MaxCallBytes {
		return spanCall{}, reject("span %s: its call would take %d bytes, more than the %d allowed", id, c.size, lim.MaxCallBytes)
	}
	return c, nil
}

// io finds a span's inputs and output; the attributes it took them from are marked consumed
// (they are not kept again under attributes.otel), and so are the events (by index).
func io(a attrs, events []spanEvent, model string, consumed map[string]bool) (inputs, output json.RawMessage, usedEvents map[int]bool) {
	usedEvents = map[int]bool{}
	take := func(keys ...string) {
		for _, k := range keys {
			for key := range a {
				if key == k || strings.HasPrefix(key, k+".") {
					consumed[key] = true
				}
			}
		}
	}

	// Chat messages, in every convention.
	var in []message
	var out []choice
	if v, ok := a["gen_ai.input.messages"]; ok {
		in, _ = genAIMessages(v)
		take("gen_ai.input.messages")
	}
	if v, ok := a["gen_ai.output.messages"]; ok {
		msgs, fin := genAIMessages(v)
		out = choices(msgs, fin)
		take("gen_ai.output.messages")
	}
	for i, e := range events {
		if e.name != "gen_ai.client.inference.operation.details" {
			continue
		}
		if v, ok := e.a["gen_ai.input.messages"]; ok && in == nil {
			in, _ = genAIMessages(v)
			usedEvents[i] = true
		}
		if v, ok := e.a["gen_ai.output.messages"]; ok && out == nil {
			msgs, fin := genAIMessages(v)
			out = choices(msgs, fin)
			usedEvents[i] = true
		}
		if v, ok := e.a["gen_ai.system_instructions"]; ok && a["gen_ai.system_instructions"] == nil {
			a["gen_ai.system_instructions"] = v
		}
	}
	if in == nil && a.hasUnder("llm.input_messages") {
		in = openInferenceMessages(a, "llm.input_messages")
		take("llm.input_messages")
	}
	if out == nil && a.hasUnder("llm.output_messages") {
		out = choices(openInferenceMessages(a, "llm.output_messages"), nil)
		take("llm.output_messages")
	}
	if in == nil && a.hasUnder("gen_ai.prompt") {
		in, _ = indexedMessages(a, "gen_ai.prompt")
		take("gen_ai.prompt")
	}
	if out == nil && a.hasUnder("gen_ai.completion") {
		out = choices(indexedMessages(a, "gen_ai.completion"))
		take("gen_ai.completion")
	}
	if in == nil || out == nil {
		evIn, evOut := eventMessages(events)
		if in == nil && evIn != nil {
			in = evIn
		}
		if out == nil && evOut != nil {
			out = evOut
		}
		if evIn != nil || evOut != nil {
			for i, e := range events {
				if strings.HasPrefix(e.name, "gen_ai.") && (strings.HasSuffix(e.name, ".message") || e.name == "gen_ai.choice") {
					usedEvents[i] = true
				}
			}
		}
	}
	if sys := systemInstructions(a["gen_ai.system_instructions"]); sys != nil {
		if len(in) == 0 || in[0].Role != "system" {
			in = append([]message{*sys}, in...)
		}
		take("gen_ai.system_instructions")
	}

	// The other conventions' inputs and outputs.
	genIn, genInKey := first(a, inputKeys)
	genOut, genOutKey := first(a, outputKeys)

	switch {
	case hasKey(genIn, "messages"): // a chat request's body (OpenInference's input.value)
		inputs = compact(genIn)
		take(genInKey)
	case len(in) > 0:
		req := map[string]any{"messages": in}
		if model != "" {
			req["model"] = model
		}
		if tools := toolDefinitions(a); tools != nil {
			req["tools"] = tools
		}
		inputs = compact(req)
	case genInKey != "":
		if _, ok := genIn.(map[string]any); ok {
			inputs = compact(genIn)
		} else {
			inputs = compact(map[string]any{genInKey: genIn})
		}
		take(genInKey)
	default:
		inputs = json.RawMessage(`{}`)
	}

	switch {
	case hasKey(genOut, "choices"): // a chat response (OpenInference's output.value)
		output = compact(genOut)
		take(genOutKey)
	case len(out) > 0:
		resp := map[string]any{"choices": out}
		if model != "" {
			resp["model"] = model
		}
		output = compact(resp)
	case genOutKey != "":
		output = compact(genOut)
		take(genOutKey)
	}
	if len(in) > 0 || len(out) > 0 || genInKey != "" || genOutKey != "" {
		// the mime types only describe the values taken out
		take("input.mime_type", "output.mime_type")
	}
	return inputs, output, usedEvents
}

// first is the value of the first of keys that is set (JSON text decoded), and its key.
func first(a attrs, keys []string) (any, string) {
	for _, k := range keys {
		if v, ok := a[k]; ok && truthy(v) {
			return decodeJSONText(v), k
		}
	}
	return nil, ""
}

// toolDefinitions are the tools a chat request offered, as OpenAI's tools: OpenInference's
// llm.tools.<i>.tool.json_schema, the GenAI conventions' gen_ai.tool.definitions, or
// OpenLLMetry's llm.request.functions.<i>.{name,description,parameters}.
func toolDefinitions(a attrs) []any {
	var out []any
	for _, it := range a.indexed("llm.tools") {
		if s, ok := decodeJSONText(it.a["tool.json_schema"]).(map[string]any); ok {
			out = append(out, s)
		}
	}
	if out != nil {
		return out
	}
	if arr, ok := decodeJSONText(a["gen_ai.tool.definitions"]).([]any); ok {
		for _, el := range arr {
			m, ok := el.(map[string]any)
			if !ok {
				continue
			}
			if _, ok := m["function"]; ok {
				out = append(out, m)
				continue
			}
			fn := map[string]any{"name": m["name"]}
			if d, ok := m["description"]; ok {
				fn["description"] = d
			}
			if p, ok := m["parameters"]; ok {
				fn["parameters"] = p
			}
			out = append(out, map[string]any{"type": "function", "function": fn})
		}
		return out
	}
	for _, it := range a.indexed("llm.request.functions") {
		fn := map[string]any{"name": it.a.str("name")}
		if d := it.a.str("description"); d != "" {
			fn["description"] = d
		}
		if p := decodeJSONText(it.a["parameters"]); p != nil {
			fn["parameters"] = p
		}
		out = append(out, map[string]any{"type": "function", "function": fn})
	}
	return out
}

// modelParameters are the request's parameters: OpenInference's llm.invocation_parameters
// (JSON text) or the GenAI conventions' gen_ai.request.* keys.
func modelParameters(a attrs) any {
	if p, ok := decodeJSONText(a["llm.invocation_parameters"]).(map[string]any); ok {
		return p
	}
	if sub := a.under("gen_ai.request"); len(sub) > 0 {
		return map[string]any(sub)
	}
	return nil
}

// usage is the span's token counts in summary.usage's shape, or nil when it gives none.
func usage(a attrs) map[string]any {
	u := map[string]any{}
	counts := map[string]int64{}
	for _, k := range usageKeys {
		for _, key := range k.keys {
			if n, ok := integer(a[key]); ok && n >= 0 {
				counts[k.name] = n
				break
			}
		}
	}
	if len(counts) == 0 {
		return nil
	}
	// One name per count: the store adds prompt and input tokens (and completion and output).
	if _, ok := counts["input_tokens"]; ok {
		delete(counts, "prompt_tokens")
	}
	if _, ok := counts["output_tokens"]; ok {
		delete(counts, "completion_tokens")
	}
	if _, ok := counts["total_tokens"]; !ok {
		counts["total_tokens"] = counts["input_tokens"] + counts["prompt_tokens"] + counts["output_tokens"] + counts["completion_tokens"]
	}
	for k, v := range counts {
		u[k] = v
	}
	u["requests"] = 1
	return u
}

func overrideTime(v any) (time.Time, bool) {
	switch x := v.(type) {
	case string:
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return t.UTC(), true
		}
	case int64:
		if x > 0 {
			return time.Unix(0, x).UTC(), true
		}
	}
	return time.Time{}, false
}

// exception is the call's exception: for a span whose status is ERROR, its exception event
// as the Python SDK writes one ({"type", "message", "traceback"}), else the status message.
func exception(sp *tracepb.Span, events []spanEvent) (string, bool) {
	if sp.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		return "", false
	}
	for _, e := range events {
		if e.name != "exception" {
			continue
		}
		ex := map[string]any{"type": e.a.str("exception.type"), "message": e.a.str("exception.message")}
		if ex["type"] == "" {
			ex["type"] = "Exception"
		}
		if st := e.a.str("exception.stacktrace"); st != "" {
			ex["traceback"] = []string{st}
		}
		return string(compact(ex)), true
	}
	if m := sp.GetStatus().GetMessage(); m != "" {
		return m, true
	}
	return "error", true
}

func spanKind(k tracepb.Span_SpanKind) string {
	return strings.TrimPrefix(k.String(), "SPAN_KIND_")
}

func statusCode(c tracepb.Status_StatusCode) string {
	return strings.TrimPrefix(c.String(), "STATUS_CODE_")
}

// shortName keeps an op name of at most maxOpName bytes, cut at a character boundary and
// marked with 4 hex digits of the whole name's SHA-256.
func shortName(name string) string {
	if len(name) <= maxOpName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	cut := maxOpName - 5
	for cut > 0 && !utf8Start(name[cut]) {
		cut--
	}
	return name[:cut] + ":" + hex.EncodeToString(sum[:2])
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

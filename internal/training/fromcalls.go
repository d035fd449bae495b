package training

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/trace"
)

// ChatOpName is the op of traced chat completions: Hone's chat API records its completions
// under it, and the weave SDK's OpenAI integration records openai's chat.completions.create
// as a ref to an op of that name (weave:///<entity>/<project>/op/openai.chat.completions.create:<digest>).
const ChatOpName = "openai.chat.completions.create"

// FromCallsRequest is POST /v1/preview/datasets/from-calls: which traced chat completions
// become a Weave Dataset of training examples.
type FromCallsRequest struct {
	Entity   string          `json:"entity"`
	Project  string          `json:"project"`
	Name     string          `json:"name"`
	OpNames  []string        `json:"op_names"`
	Feedback json.RawMessage `json:"feedback"`
	Query    json.RawMessage `json:"query"`
	Limit    *int            `json:"limit"`
	Kind     string          `json:"kind"`
	// Append keeps the rows of the dataset's latest version (when it exists) before the new
	// ones, instead of a version of the new rows alone.
	Append bool `json:"append"`
}

// FeedbackFilter keeps the calls that carry a matching feedback: a reaction (the emoji of a
// wandb.reaction.1 feedback, such as the weave SDK's call.feedback.add_reaction("👍") or the
// UI's thumbs), and/or any feedback of a type (feedback_type).
type FeedbackFilter struct {
	Reaction     string `json:"reaction"`
	FeedbackType string `json:"feedback_type"`
}

// FromCallsResult says what was built.
type FromCallsResult struct {
	DatasetRef      string         `json:"dataset_ref"`
	TableRef        string         `json:"table_ref"`
	TrainingDataURL string         `json:"training_data_url"`
	Kind            string         `json:"kind"`
	Rows            int            `json:"rows"`
	Calls           int            `json:"calls"`
	Skipped         int            `json:"skipped"`
	SkippedReasons  map[string]int `json:"skipped_reasons"`
	// WithoutLogprobs counts the RL choices that carry no logprobs (the RL job then needs
	// allow_training_without_logprobs).
	WithoutLogprobs int `json:"choices_without_logprobs,omitempty"`
	// PreviousRows counts the rows the dataset already had (append); Rows counts them too.
	PreviousRows int `json:"previous_rows,omitempty"`
}

// maxFromCalls bounds the calls one dataset is built from.
const maxFromCalls = 100000

// reactionType is the feedback type of a reaction.
const reactionType = "wandb.reaction.1"

// DatasetFromCalls builds a Weave Dataset (an object {_type: Dataset, name, description, rows}
// whose rows are a table, as the weave SDK publishes one) from the traced chat completions of
// <entity>/<project> that match the request: SFT examples {"messages", "tools"?} (the
// request's messages and the first choice's message), or, for kind "rl", ART trajectory
// groups (the calls with the same prompt messages and tools, each a trajectory whose reward
// comes from its feedback, see rewardOf). Nothing is written unless there is at least one row.
func (s *Service) DatasetFromCalls(ctx context.Context, req FromCallsRequest) (FromCallsResult, error) {
	if s.Trace == nil {
		return FromCallsResult{}, fault.Invalid("project", "this server has no trace store")
	}
	if err := validName("project", req.Project); err != nil {
		return FromCallsResult{}, err
	}
	switch req.Kind {
	case "":
		req.Kind = "sft"
	case "sft", "rl":
	default:
		return FromCallsResult{}, fault.Invalid("kind", "kind must be sft or rl, got %q", req.Kind)
	}
	if req.Name == "" {
		req.Name = req.Project + "-" + req.Kind
	}
	if err := validName("name", req.Name); err != nil {
		return FromCallsResult{}, err
	}
	limit := maxFromCalls
	if req.Limit != nil {
		if *req.Limit < 1 || *req.Limit > maxFromCalls {
			return FromCallsResult{}, fault.Invalid("limit", "limit must be from 1 to %d, got %d", maxFromCalls, *req.Limit)
		}
		limit = *req.Limit
	}
	ff, err := parseFeedbackFilter(req.Feedback)
	if err != nil {
		return FromCallsResult{}, err
	}
	project := req.Entity + "/" + req.Project
	ops := req.OpNames
	if len(ops) == 0 {
		ops = []string{ChatOpName}
	}
	// Each name matches Hone's plain op name and every version of the weave SDK's op ref.
	var filterOps []string
	for i, op := range ops {
		names := []string{op}
		if op == "" || strings.ContainsAny(op, " \t\n") {
			return FromCallsResult{}, fault.Invalid(fmt.Sprintf("op_names[%d]", i), "op_names[%d] %q is not an op name", i, op)
		}
		if !strings.HasPrefix(op, "weave:///") {
			names = append(names, "weave:///"+project+"/op/"+op+":*")
		}
		if len(req.OpNames) > 0 {
			n := 0
			one := 1
			err := s.Trace.CallsQuery(ctx, trace.CallsQueryReq{ProjectID: project, Filter: &trace.CallsFilter{OpNames: names}, Limit: &one, Columns: []string{"id"}},
				func(trace.CallSchema) error { n++; return nil })
			if err != nil {
				return FromCallsResult{}, err
			}
			if n == 0 {
				return FromCallsResult{}, fault.Invalid(fmt.Sprintf("op_names[%d]", i), "op_names[%d]: project %s has no calls of op %q", i, project, op)
			}
		}
		filterOps = append(filterOps, names...)
	}
	if _, err := trace.ParseQuery(req.Query); err != nil {
		return FromCallsResult{}, err
	}

	res := FromCallsResult{Kind: req.Kind, SkippedReasons: map[string]int{}}
	skip := func(reason string) { res.Skipped++; res.SkippedReasons[reason]++ }
	var examples []chatExample
	asc := []trace.SortBy{{Field: "started_at", Direction: "asc"}}
	err = s.Trace.CallsQuery(ctx, trace.CallsQueryReq{ProjectID: project, Filter: &trace.CallsFilter{OpNames: filterOps},
		Query: req.Query, SortBy: asc, IncludeFeedback: true},
		func(c trace.CallSchema) error {
			fb := callFeedback(c.Summary)
			if ff != nil && !ff.matches(fb) {
				return nil
			}
			if len(examples)+res.Skipped >= limit {
				return nil
			}
			res.Calls++
			ex, reason := exampleOf(c)
			if reason != "" {
				skip(reason)
				return nil
			}
			ex.feedback = fb
			examples = append(examples, ex)
			return nil
		})
	if err != nil {
		return FromCallsResult{}, err
	}
	if res.Calls == 0 {
		return FromCallsResult{}, fault.Invalid(matchParam(req), "no call of %s matches (op_names %v%s%s)", project, ops, feedbackNote(ff), queryNote(req.Query))
	}

	var rows []json.RawMessage
	if req.Kind == "sft" {
		for _, ex := range examples {
			row := map[string]any{"messages": append(append([]json.RawMessage(nil), ex.messages...), ex.reply)}
			if len(ex.tools) > 0 {
				row["tools"] = ex.tools
			}
			b, _ := json.Marshal(row)
			rows = append(rows, b)
		}
	} else {
		rows, res.WithoutLogprobs = rlGroups(examples, skip)
	}
	if len(rows) == 0 {
		return res, fault.Invalid(matchParam(req), "none of the %d matching calls makes a training example: %s", res.Calls, reasons(res.SkippedReasons))
	}

	if rows, err = s.appendRows(ctx, req, project, rows, &res); err != nil {
		return FromCallsResult{}, err
	}
	tbl, err := s.Trace.TableCreate(ctx, trace.TableCreateReq{Table: trace.TableSchemaForInsert{ProjectID: project, Rows: rows}})
	if err != nil {
		return FromCallsResult{}, err
	}
	tableRef := "weave:///" + project + "/table/" + tbl.Digest
	desc := fmt.Sprintf("%s examples from %d traced chat completions (Hone datasets/from-calls)", strings.ToUpper(req.Kind), res.Calls)
	// The fields in the order the weave SDK publishes a Dataset.
	val, _ := json.Marshal(struct {
		Type        string   `json:"_type"`
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Rows        string   `json:"rows"`
		ClassName   string   `json:"_class_name"`
		Bases       []string `json:"_bases"`
	}{"Dataset", req.Name, desc, tableRef, "Dataset", []string{"Object", "BaseModel"}})
	obj, err := s.Trace.ObjCreate(ctx, trace.ObjCreateReq{Obj: trace.ObjSchemaForInsert{ProjectID: project, ObjectID: req.Name, Val: val}}, req.Entity)
	if err != nil {
		return FromCallsResult{}, err
	}
	res.DatasetRef = "weave:///" + project + "/object/" + req.Name + ":" + obj.Digest
	res.TableRef = tableRef
	res.TrainingDataURL = res.DatasetRef
	res.Rows = len(rows)
	return res, nil
}

func matchParam(req FromCallsRequest) string {
	switch {
	case len(req.Feedback) > 0 && string(req.Feedback) != "null":
		return "feedback"
	case len(req.Query) > 0 && string(req.Query) != "null":
		return "query"
	case len(req.OpNames) > 0:
		return "op_names"
	}
	return "project"
}

func feedbackNote(f *FeedbackFilter) string {
	if f == nil {
		return ""
	}
	b, _ := json.Marshal(f)
	return ", feedback " + string(b)
}

func queryNote(q json.RawMessage) string {
	if len(q) == 0 || string(q) == "null" {
		return ""
	}
	return ", and the query"
}

func reasons(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, "; ")
}

// feedback is one feedback of a call, as include_feedback gives it.
type feedback struct {
	Type      string          `json:"feedback_type"`
	Payload   json.RawMessage `json:"payload"`
	CreatedAt string          `json:"created_at"`
}

func callFeedback(summary json.RawMessage) []feedback {
	var s struct {
		Weave struct {
			Feedback []feedback `json:"feedback"`
		} `json:"weave"`
	}
	json.Unmarshal(summary, &s)
	sort.SliceStable(s.Weave.Feedback, func(i, j int) bool { return s.Weave.Feedback[i].CreatedAt < s.Weave.Feedback[j].CreatedAt })
	return s.Weave.Feedback
}

func reactionOf(f feedback) (string, bool) {
	if f.Type != reactionType {
		return "", false
	}
	var p struct {
		Emoji string `json:"emoji"`
		Alias string `json:"alias"`
	}
	json.Unmarshal(f.Payload, &p)
	return p.Emoji, p.Emoji != ""
}

// parseFeedbackFilter reads the feedback filter; an unknown field is a fault naming it.
func parseFeedbackFilter(raw json.RawMessage) (*FeedbackFilter, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, fault.Invalid("feedback", "feedback must be an object such as {\"reaction\": \"👍\"}")
	}
	var ff FeedbackFilter
	for k, v := range m {
		var dst *string
		switch k {
		case "reaction":
			dst = &ff.Reaction
		case "feedback_type":
			dst = &ff.FeedbackType
		default:
			return nil, fault.Invalid("feedback."+k, "feedback.%s is not a feedback filter field (reaction, feedback_type)", k)
		}
		if json.Unmarshal(v, dst) != nil {
			return nil, fault.Invalid("feedback."+k, "feedback.%s must be a string", k)
		}
	}
	if ff.Reaction == "" && ff.FeedbackType == "" {
		return nil, fault.Invalid("feedback", "feedback needs reaction (an emoji such as 👍) or feedback_type")
	}
	return &ff, nil
}

func (ff *FeedbackFilter) matches(fb []feedback) bool {
	for _, f := range fb {
		if ff.FeedbackType != "" && f.Type != ff.FeedbackType {
			continue
		}
		if ff.Reaction != "" {
			if e, ok := reactionOf(f); !ok || !sameEmoji(e, ff.Reaction) {
				continue
			}
		}
		return true
	}
	return false
}

// sameEmoji compares emoji ignoring variation selectors and skin tones.
func sameEmoji(a, b string) bool {
	norm := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == 0xFE0F || r == 0xFE0E || (r >= 0x1F3FB && r <= 0x1F3FF) {
				return -1
			}
			return r
		}, s)
	}
	return norm(a) == norm(b)
}

// chatExample is one traced chat completion as a training example.
type chatExample struct {
	messages []json.RawMessage // the request's messages
	tools    []json.RawMessage
	reply    json.RawMessage // the first choice's message (role, content, tool_calls)
	choice   json.RawMessage // the first choice as an OpenAI Choice (RL)
	logprobs bool
	feedback []feedback
}

// messageKeys are the message fields kept (others, such as the weave SDK's _type or a
// reply's refusal/annotations/audio, are dropped).
var messageKeys = []string{"role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content"}

func cleanMessage(raw json.RawMessage) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	var role string
	if json.Unmarshal(m["role"], &role) != nil || role == "" {
		return nil, false
	}
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for _, k := range messageKeys {
		v, ok := m[k]
		if !ok || string(v) == "null" || (k == "tool_calls" && string(v) == "[]") {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(v)
		n++
	}
	b.WriteByte('}')
	return b.Bytes(), true
}

// exampleOf reads a call's messages and reply; a call that gives none says why.
func exampleOf(c trace.CallSchema) (chatExample, string) {
	if c.Exception != nil {
		return chatExample{}, "the call failed (exception)"
	}
	if c.EndedAt == nil {
		return chatExample{}, "the call has not finished"
	}
	var in struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(c.Inputs, &in) != nil || len(in.Messages) == 0 {
		return chatExample{}, "no inputs.messages"
	}
	var ex chatExample
	for _, m := range in.Messages {
		cm, ok := cleanMessage(m)
		if !ok {
			return chatExample{}, "a message of inputs.messages has no role"
		}
		ex.messages = append(ex.messages, cm)
	}
	ex.tools = in.Tools
	var out struct {
		Choices []json.RawMessage `json:"choices"`
	}
	if json.Unmarshal(c.Output, &out) != nil || len(out.Choices) == 0 {
		return chatExample{}, "no output.choices"
	}
	var ch struct {
		Message      json.RawMessage `json:"message"`
		FinishReason *string         `json:"finish_reason"`
		Logprobs     json.RawMessage `json:"logprobs"`
	}
	json.Unmarshal(out.Choices[0], &ch)
	reply, ok := cleanMessage(ch.Message)
	if !ok {
		return chatExample{}, "no output.choices[0].message"
	}
	var r struct {
		Role      string          `json:"role"`
		Content   *string         `json:"content"`
		ToolCalls json.RawMessage `json:"tool_calls"`
	}
	json.Unmarshal(reply, &r)
	if r.Role != "assistant" || ((r.Content == nil || *r.Content == "") && len(r.ToolCalls) == 0) {
		return chatExample{}, "the reply is empty or not an assistant message"
	}
	ex.reply = reply
	fr := "stop"
	if ch.FinishReason != nil && *ch.FinishReason != "" {
		fr = *ch.FinishReason
	}
	choice := map[string]any{"index": 0, "finish_reason": fr, "message": reply}
	if len(ch.Logprobs) > 0 && string(ch.Logprobs) != "null" {
		choice["logprobs"] = ch.Logprobs
		ex.logprobs = true
	}
	ex.choice, _ = json.Marshal(choice)
	return ex, ""
}

// rewardOf is the reward of a call for RL, from its feedback, the latest that gives one:
//   - a reaction: 👍 is 1, 👎 is 0 (other emoji give none);
//   - a payload with a number or boolean `reward` or `score` (true 1, false 0), as a
//     feedback of any type may carry, e.g. {"feedback_type": "reward", "payload": {"reward": 0.7}};
//   - a scorer's result recorded on the call (feedback wandb.runnable.<scorer>, payload
//     {"output": ...}): a number or boolean output, or its `reward` or `score` field.
func rewardOf(fb []feedback) (float64, bool) {
	for i := len(fb) - 1; i >= 0; i-- {
		f := fb[i]
		if e, ok := reactionOf(f); ok {
			switch {
			case sameEmoji(e, "👍"):
				return 1, true
			case sameEmoji(e, "👎"):
				return 0, true
			}
			continue
		}
		var p map[string]json.RawMessage
		if json.Unmarshal(f.Payload, &p) != nil {
			continue
		}
		if v, ok := numeric(p["reward"]); ok {
			return v, true
		}
		if v, ok := numeric(p["score"]); ok {
			return v, true
		}
		if out, ok := p["output"]; ok {
			if v, ok := numeric(out); ok {
				return v, true
			}
			var o map[string]json.RawMessage
			if json.Unmarshal(out, &o) == nil {
				if v, ok := numeric(o["reward"]); ok {
					return v, true
				}
				if v, ok := numeric(o["score"]); ok {
					return v, true
				}
			}
		}
	}
	return 0, false
}

func numeric(raw json.RawMessage) (float64, bool) {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return 0, false
	}
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, false
		}
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// rlGroups groups the examples by prompt (messages and tools) into ART trajectory groups, in
// the order of each prompt's first call. A call without a reward is skipped, as is a group
// whose rewards are all equal (every advantage zero: it would teach nothing).
func rlGroups(examples []chatExample, skip func(string)) ([]json.RawMessage, int) {
	type group struct {
		trajs []map[string]any
		first float64
		same  bool
		noLP  int
	}
	var order []string
	groups := map[string]*group{}
	for _, ex := range examples {
		r, ok := rewardOf(ex.feedback)
		if !ok {
			skip("no reward in the call's feedback (a 👍/👎 reaction, or a numeric reward, score or scorer output)")
			continue
		}
		kb, _ := json.Marshal([]any{ex.messages, ex.tools})
		key := string(kb)
		g := groups[key]
		if g == nil {
			g = &group{first: r, same: true}
			groups[key] = g
			order = append(order, key)
		}
		if r != g.first {
			g.same = false
		}
		mc := append(append([]json.RawMessage(nil), ex.messages...), ex.choice)
		t := map[string]any{"messages_and_choices": mc, "reward": r}
		if len(ex.tools) > 0 {
			t["tools"] = ex.tools
		}
		g.trajs = append(g.trajs, t)
		if !ex.logprobs {
			g.noLP++
		}
	}
	var rows []json.RawMessage
	noLP := 0
	for _, k := range order {
		g := groups[k]
		if g.same {
			for range g.trajs {
				if len(g.trajs) == 1 {
					skip("the only call with its prompt (a group needs rewards that differ)")
				} else {
					skip("every call with its prompt has the same reward (nothing to learn)")
				}
			}
			continue
		}
		b, _ := json.Marshal(map[string]any{"trajectories": g.trajs})
		rows = append(rows, b)
		noLP += g.noLP
	}
	return rows, noLP
}

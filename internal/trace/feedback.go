package trace

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/pyjson"
)

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
			return FeedbackQueryRes{}, fault.Invalid(fmt.Sprintf("fields[%d]", i), "fields[%d]: unknown feedback field %q", i, f)
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

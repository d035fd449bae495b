package trace

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/fault"
)

const feedbackCols = `project_id, id, weave_ref, wb_user_id, creator, created_at, feedback_type, payload, annotation_ref,
	runnable_ref, call_ref, trigger_ref, queue_id, scorer_tags, scorer_tag_reasons, scorer_tag_confidences, scorer_ratings,
	scorer_rating_reasons, scorer_rating_confidences, span_agent_name, span_agent_version, span_status_code,
	span_conversation_id, span_trace_id, scorer_trace_id`

// feedbackFields are the feedback columns a query, sort or `fields` list may name; the JSON
// ones (payload, the scorer_* maps and tags) also take dotted paths into them.
var feedbackFields = map[string]ValueType{
	"id": TText, "project_id": TText, "weave_ref": TText, "wb_user_id": TText, "creator": TText, "created_at": TText,
	"feedback_type": TText, "annotation_ref": TText, "runnable_ref": TText, "call_ref": TText, "trigger_ref": TText,
	"queue_id": TText, "span_agent_name": TText, "span_agent_version": TText, "span_status_code": TText,
	"span_conversation_id": TText, "span_trace_id": TText, "scorer_trace_id": TText,
	"payload": TText, "scorer_tags": TText, "scorer_tag_reasons": TText, "scorer_tag_confidences": TText,
	"scorer_ratings": TText, "scorer_rating_reasons": TText, "scorer_rating_confidences": TText,
}

var feedbackJSONColumns = map[string]bool{
	"payload": true, "scorer_tags": true, "scorer_tag_reasons": true, "scorer_tag_confidences": true,
	"scorer_ratings": true, "scorer_rating_reasons": true, "scorer_rating_confidences": true,
}

// FeedbackField reports whether a feedback query may name field.
func FeedbackField(field string) bool {
	if _, ok := feedbackFields[field]; ok {
		return true
	}
	col, _, ok := strings.Cut(field, ".")
	return ok && feedbackJSONColumns[col]
}

func (s *SQLStore) feedbackField(f string) (string, []any, ValueType, error) {
	return feedbackFieldSQL(s.db.Dialect(), "", f)
}

// feedbackFieldSQL resolves a feedback field for a table qualified by prefix ("" or "fb.").
func feedbackFieldSQL(d db.Dialect, prefix, f string) (string, []any, ValueType, error) {
	if t, ok := feedbackFields[f]; ok {
		return prefix + f, nil, t, nil
	}
	if col, rest, ok := strings.Cut(f, "."); ok && feedbackJSONColumns[col] {
		e, a, t := JSONField(d, prefix+col, strings.Split(rest, "."))
		return e, a, t, nil
	}
	return "", nil, 0, fault.Invalid("query", "unknown feedback field %q", f)
}

func feedbackArgs(f FeedbackRow) []any {
	return []any{f.ProjectID, f.ID, f.WeaveRef, f.WBUserID, f.Creator, f.CreatedAt, f.FeedbackType, string(f.Payload),
		f.AnnotationRef, f.RunnableRef, f.CallRef, f.TriggerRef, f.QueueID, string(f.ScorerTags), string(f.ScorerTagReasons),
		string(f.ScorerTagConfidences), string(f.ScorerRatings), string(f.ScorerRatingReasons), string(f.ScorerRatingConfidences),
		f.SpanAgentName, f.SpanAgentVersion, f.SpanStatusCode, f.SpanConversationID, f.SpanTraceID, f.ScorerTraceID}
}

// InsertFeedback stores feedback rows in one transaction. A row whose id exists with the same
// ref, type and payload is a retry and is skipped; with other content it is ErrConflict.
func (s *SQLStore) InsertFeedback(ctx context.Context, fs []FeedbackRow) error {
	return s.db.WriteTx(ctx, func(tx *db.Tx) error {
		for _, f := range fs {
			var ref, typ, payload string
			err := tx.QueryRow(ctx, `SELECT weave_ref, feedback_type, payload FROM trace_feedback WHERE project_id = ? AND id = ?`,
				f.ProjectID, f.ID).Scan(&ref, &typ, &payload)
			switch {
			case err == nil:
				if ref == f.WeaveRef && typ == f.FeedbackType && payload == string(f.Payload) {
					continue
				}
				return fmt.Errorf("%w: feedback %s exists with other content", ErrConflict, f.ID)
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO trace_feedback (`+feedbackCols+`) VALUES (`+
				strings.TrimSuffix(strings.Repeat("?, ", 25), ", ")+`)`, feedbackArgs(f)...); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReplaceFeedback replaces feedback by id; false when there is none.
func (s *SQLStore) ReplaceFeedback(ctx context.Context, f FeedbackRow) (bool, error) {
	var n int64
	err := s.db.WriteTx(ctx, func(tx *db.Tx) error {
		res, err := tx.Exec(ctx, `DELETE FROM trace_feedback WHERE project_id = ? AND id = ?`, f.ProjectID, f.ID)
		if err != nil {
			return err
		}
		if n, _ = res.RowsAffected(); n == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO trace_feedback (`+feedbackCols+`) VALUES (`+
			strings.TrimSuffix(strings.Repeat("?, ", 25), ", ")+`)`, feedbackArgs(f)...)
		return err
	})
	return n > 0, err
}

func (s *SQLStore) feedbackWhere(project string, cond Node) (string, []any, error) {
	where := "project_id = ?"
	args := []any{project}
	if cond != nil {
		c := Compiler{Dialect: s.db.Dialect(), Resolve: s.feedbackField}
		w, cargs, err := c.Compile(cond)
		if err != nil {
			return "", nil, err
		}
		where += " AND " + w
		args = append(args, cargs...)
	}
	return where, args, nil
}

// QueryFeedback lists a project's feedback.
func (s *SQLStore) QueryFeedback(ctx context.Context, project string, q GenericQuery) ([]FeedbackRow, error) {
	where, args, err := s.feedbackWhere(project, q.Cond)
	if err != nil {
		return nil, err
	}
	order := "created_at ASC, id ASC"
	if len(q.Sort) > 0 {
		o, sargs, err := SortSQL(s.db.Dialect(), q.Sort, s.feedbackField, "sort_by")
		if err != nil {
			return nil, err
		}
		order = o + ", id ASC"
		args = append(args, sargs...)
	}
	sqlq, args := s.limitOffset(`SELECT `+feedbackCols+` FROM trace_feedback WHERE `+where+` ORDER BY `+order, args, q.Limit, q.Offset)
	rows, err := s.db.Query(ctx, sqlq, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []FeedbackRow{}
	for rows.Next() {
		var f FeedbackRow
		var creator, ann, run, call, trig, queue sql.NullString
		var payload, tags, tagReasons, tagConf, ratings, ratingReasons, ratingConf string
		if err := rows.Scan(&f.ProjectID, &f.ID, &f.WeaveRef, &f.WBUserID, &creator, &f.CreatedAt, &f.FeedbackType, &payload,
			&ann, &run, &call, &trig, &queue, &tags, &tagReasons, &tagConf, &ratings, &ratingReasons, &ratingConf,
			&f.SpanAgentName, &f.SpanAgentVersion, &f.SpanStatusCode, &f.SpanConversationID, &f.SpanTraceID, &f.ScorerTraceID); err != nil {
			return nil, err
		}
		f.Creator, f.AnnotationRef, f.RunnableRef, f.CallRef, f.TriggerRef = strPtr(creator), strPtr(ann), strPtr(run), strPtr(call), strPtr(trig)
		f.QueueID = strPtr(queue)
		f.Payload = []byte(payload)
		f.ScorerTags, f.ScorerTagReasons, f.ScorerTagConfidences = []byte(tags), []byte(tagReasons), []byte(tagConf)
		f.ScorerRatings, f.ScorerRatingReasons, f.ScorerRatingConfidences = []byte(ratings), []byte(ratingReasons), []byte(ratingConf)
		out = append(out, f)
	}
	return out, rows.Err()
}

// CountFeedback counts a project's feedback matching cond.
func (s *SQLStore) CountFeedback(ctx context.Context, project string, cond Node) (int, error) {
	where, args, err := s.feedbackWhere(project, cond)
	if err != nil {
		return 0, err
	}
	var n int
	err = s.db.QueryRow(ctx, `SELECT COUNT(*) FROM trace_feedback WHERE `+where, args...).Scan(&n)
	return n, err
}

// PurgeFeedback deletes a project's feedback matching cond.
func (s *SQLStore) PurgeFeedback(ctx context.Context, project string, cond Node) (int, error) {
	c := Compiler{Dialect: s.db.Dialect(), Resolve: s.feedbackField}
	w, args, err := c.Compile(cond)
	if err != nil {
		return 0, err
	}
	res, err := s.db.Exec(ctx, `DELETE FROM trace_feedback WHERE project_id = ? AND `+w, append([]any{project}, args...)...)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

package trace

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/db"
)

const costCols = `id, llm_id, prompt_token_cost, completion_token_cost, cache_read_input_token_cost, cache_creation_input_token_cost,
	prompt_token_cost_unit, completion_token_cost_unit, effective_date, provider_id, pricing_level, pricing_level_id, created_at, created_by`

var costFields = map[string]ValueType{
	"id": TText, "llm_id": TText, "prompt_token_cost": TNum, "completion_token_cost": TNum,
	"cache_read_input_token_cost": TNum, "cache_creation_input_token_cost": TNum,
	"prompt_token_cost_unit": TText, "completion_token_cost_unit": TText, "effective_date": TText,
	"provider_id": TText, "pricing_level": TText, "pricing_level_id": TText, "created_at": TText, "created_by": TText,
}

func fieldResolver(fields map[string]ValueType, what string) FieldResolver {
	return func(f string) (string, []any, ValueType, error) {
		if t, ok := fields[f]; ok {
			return f, nil, t, nil
		}
		return "", nil, 0, apierror.BadRequest("query", "unknown %s field %q", what, f)
	}
}

func scanCost(sc interface{ Scan(...any) error }) (Cost, error) {
	var c Cost
	var by sql.NullString
	err := sc.Scan(&c.ID, &c.LLMID, &c.PromptTokenCost, &c.CompletionTokenCost, &c.CacheReadInputTokenCost, &c.CacheCreationInputTokenCost,
		&c.PromptTokenCostUnit, &c.CompletionTokenCostUnit, &c.EffectiveDate, &c.ProviderID, &c.PricingLevel, &c.PricingLevelID, &c.CreatedAt, &by)
	c.CreatedBy = strPtr(by)
	return c, err
}

// InsertCosts stores prices.
func (s *SQLStore) InsertCosts(ctx context.Context, costs []Cost) error {
	return s.db.WriteTx(ctx, func(tx *db.Tx) error {
		for _, c := range costs {
			if _, err := tx.Exec(ctx, `INSERT INTO trace_costs (`+costCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				c.ID, c.LLMID, c.PromptTokenCost, c.CompletionTokenCost, c.CacheReadInputTokenCost, c.CacheCreationInputTokenCost,
				c.PromptTokenCostUnit, c.CompletionTokenCostUnit, c.EffectiveDate, c.ProviderID, c.PricingLevel, c.PricingLevelID,
				c.CreatedAt, c.CreatedBy); err != nil {
				return err
			}
		}
		return nil
	})
}

// projectCostScope is the condition for prices visible to a project: its own and the defaults.
const projectCostScope = `((pricing_level = 'project' AND pricing_level_id = ?) OR pricing_level = 'default')`

// QueryCosts lists the prices visible to a project.
func (s *SQLStore) QueryCosts(ctx context.Context, project string, q GenericQuery) ([]Cost, error) {
	where := projectCostScope
	args := []any{project}
	if q.Cond != nil {
		c := Compiler{Dialect: s.db.Dialect(), Resolve: fieldResolver(costFields, "cost")}
		cond, cargs, err := c.Compile(q.Cond)
		if err != nil {
			return nil, err
		}
		where += " AND " + cond
		args = append(args, cargs...)
	}
	order := "llm_id ASC, effective_date DESC, id ASC"
	if len(q.Sort) > 0 {
		o, sargs, err := SortSQL(s.db.Dialect(), q.Sort, fieldResolver(costFields, "cost"), "sort_by")
		if err != nil {
			return nil, err
		}
		order = o + ", id ASC"
		args = append(args, sargs...)
	}
	sqlq, args := s.limitOffset(`SELECT `+costCols+` FROM trace_costs WHERE `+where+` ORDER BY `+order, args, q.Limit, q.Offset)
	rows, err := s.db.Query(ctx, sqlq, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Cost{}
	for rows.Next() {
		c, err := scanCost(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// PurgeCosts deletes a project's own prices matching cond (defaults are never purged).
func (s *SQLStore) PurgeCosts(ctx context.Context, project string, cond Node) (int, error) {
	c := Compiler{Dialect: s.db.Dialect(), Resolve: fieldResolver(costFields, "cost")}
	w, args, err := c.Compile(cond)
	if err != nil {
		return 0, err
	}
	res, err := s.db.Exec(ctx, `DELETE FROM trace_costs WHERE pricing_level = 'project' AND pricing_level_id = ? AND `+w,
		append([]any{project}, args...)...)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Prices returns, per model, the prices visible to a project, project prices first, then by
// effective date descending.
func (s *SQLStore) Prices(ctx context.Context, project string, models []string) (map[string][]Cost, error) {
	out := map[string][]Cost{}
	if len(models) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, `SELECT `+costCols+` FROM trace_costs WHERE `+projectCostScope+` AND llm_id IN `+inList(len(models))+`
		ORDER BY llm_id, CASE WHEN pricing_level = 'project' THEN 0 ELSE 1 END, effective_date DESC`, append([]any{project}, anys(models)...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		c, err := scanCost(rows)
		if err != nil {
			return nil, err
		}
		out[c.LLMID] = append(out[c.LLMID], c)
	}
	return out, rows.Err()
}

// ---- Feedback ----

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
	return "", nil, 0, apierror.BadRequest("query", "unknown feedback field %q", f)
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

// ---- Fields Hone does not know ----

// InsertExtraFields keeps request fields Hone did not know.
func (s *SQLStore) InsertExtraFields(ctx context.Context, rows []ExtraFieldsRow) error {
	if len(rows) == 0 {
		return nil
	}
	return s.db.WriteTx(ctx, func(tx *db.Tx) error {
		for _, r := range rows {
			if _, err := tx.Exec(ctx, `INSERT INTO trace_extra_fields (id, project_id, route, target, fields, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
				newID(), r.ProjectID, r.Route, r.Target, string(r.Fields), r.CreatedAt); err != nil {
				return err
			}
		}
		return nil
	})
}

// ExtraFields lists the unknown fields kept for a target of a project, oldest first.
func (s *SQLStore) ExtraFields(ctx context.Context, project, target string) ([]ExtraFieldsRow, error) {
	rows, err := s.db.Query(ctx, `SELECT project_id, route, target, fields, created_at FROM trace_extra_fields
		WHERE project_id = ? AND target = ? ORDER BY created_at, id`, project, target)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ExtraFieldsRow
	for rows.Next() {
		var r ExtraFieldsRow
		var fields string
		if err := rows.Scan(&r.ProjectID, &r.Route, &r.Target, &fields, &r.CreatedAt); err != nil {
			return nil, err
		}
		r.Fields = []byte(fields)
		out = append(out, r)
	}
	return out, rows.Err()
}

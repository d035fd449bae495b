package trace

import (
	"context"
	"database/sql"
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

const feedbackCols = `project_id, id, weave_ref, wb_user_id, creator, created_at, feedback_type, payload, annotation_ref, runnable_ref, call_ref, trigger_ref`

var feedbackFields = map[string]ValueType{
	"id": TText, "weave_ref": TText, "wb_user_id": TText, "creator": TText, "created_at": TText,
	"feedback_type": TText, "annotation_ref": TText, "runnable_ref": TText, "call_ref": TText, "trigger_ref": TText,
}

func (s *SQLStore) feedbackField(f string) (string, []any, ValueType, error) {
	if t, ok := feedbackFields[f]; ok {
		return f, nil, t, nil
	}
	if rest, ok := strings.CutPrefix(f, "payload."); ok {
		e, a, t := JSONField(s.db.Dialect(), "payload", strings.Split(rest, "."))
		return e, a, t, nil
	}
	return "", nil, 0, apierror.BadRequest("query", "unknown feedback field %q", f)
}

// InsertFeedback stores feedback.
func (s *SQLStore) InsertFeedback(ctx context.Context, f FeedbackRow) error {
	_, err := s.db.Exec(ctx, `INSERT INTO trace_feedback (`+feedbackCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		f.ProjectID, f.ID, f.WeaveRef, f.WBUserID, f.Creator, f.CreatedAt, f.FeedbackType, string(f.Payload),
		f.AnnotationRef, f.RunnableRef, f.CallRef, f.TriggerRef)
	return err
}

// ReplaceFeedback replaces feedback by id; false when there is none.
func (s *SQLStore) ReplaceFeedback(ctx context.Context, f FeedbackRow) (bool, error) {
	res, err := s.db.Exec(ctx, `UPDATE trace_feedback SET weave_ref = ?, wb_user_id = ?, creator = ?, created_at = ?, feedback_type = ?,
		payload = ?, annotation_ref = ?, runnable_ref = ?, call_ref = ?, trigger_ref = ? WHERE project_id = ? AND id = ?`,
		f.WeaveRef, f.WBUserID, f.Creator, f.CreatedAt, f.FeedbackType, string(f.Payload), f.AnnotationRef, f.RunnableRef,
		f.CallRef, f.TriggerRef, f.ProjectID, f.ID)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// QueryFeedback lists a project's feedback.
func (s *SQLStore) QueryFeedback(ctx context.Context, project string, q GenericQuery) ([]FeedbackRow, error) {
	where := "project_id = ?"
	args := []any{project}
	if q.Cond != nil {
		c := Compiler{Dialect: s.db.Dialect(), Resolve: s.feedbackField}
		cond, cargs, err := c.Compile(q.Cond)
		if err != nil {
			return nil, err
		}
		where += " AND " + cond
		args = append(args, cargs...)
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
		var creator, ann, run, call, trig sql.NullString
		var payload string
		if err := rows.Scan(&f.ProjectID, &f.ID, &f.WeaveRef, &f.WBUserID, &creator, &f.CreatedAt, &f.FeedbackType, &payload,
			&ann, &run, &call, &trig); err != nil {
			return nil, err
		}
		f.Creator, f.AnnotationRef, f.RunnableRef, f.CallRef, f.TriggerRef = strPtr(creator), strPtr(ann), strPtr(run), strPtr(call), strPtr(trig)
		f.Payload = []byte(payload)
		out = append(out, f)
	}
	return out, rows.Err()
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

package trace

import (
	"context"
	"database/sql"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/fault"
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
		return "", nil, 0, fault.Invalid("query", "unknown %s field %q", what, f)
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

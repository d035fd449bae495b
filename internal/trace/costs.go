package trace

import (
	"context"
)

// CostCreate adds project prices.
func (s *Service) CostCreate(ctx context.Context, req CostCreateReq, createdBy string) (CostCreateRes, error) {
	if len(req.Costs) == 0 {
		return CostCreateRes{}, badField("costs", "must name at least one model")
	}
	var costs []Cost
	res := CostCreateRes{IDs: [][2]string{}}
	now := s.nowString()
	for _, llm := range sortedKeys(req.Costs) {
		in := req.Costs[llm]
		p := "costs." + llm
		if llm == "" || len(llm) > 256 {
			return CostCreateRes{}, badField("costs", "invalid model id %q", llm)
		}
		for name, v := range map[string]float64{"prompt_token_cost": in.PromptTokenCost, "completion_token_cost": in.CompletionTokenCost} {
			if v < 0 {
				return CostCreateRes{}, badField(p+"."+name, "must be >= 0")
			}
		}
		c := Cost{ID: newID(), LLMID: llm, PromptTokenCost: in.PromptTokenCost, CompletionTokenCost: in.CompletionTokenCost,
			PromptTokenCostUnit: "USD", CompletionTokenCostUnit: "USD", EffectiveDate: now, ProviderID: "default",
			PricingLevel: "project", PricingLevelID: req.ProjectID, CreatedAt: now}
		if createdBy != "" {
			cb := createdBy
			c.CreatedBy = &cb
		}
		if in.CacheReadInputTokenCost != nil {
			c.CacheReadInputTokenCost = *in.CacheReadInputTokenCost
		}
		if in.CacheCreationInputTokenCost != nil {
			c.CacheCreationInputTokenCost = *in.CacheCreationInputTokenCost
		}
		if in.PromptTokenCostUnit != nil {
			c.PromptTokenCostUnit = *in.PromptTokenCostUnit
		}
		if in.CompletionTokenCostUnit != nil {
			c.CompletionTokenCostUnit = *in.CompletionTokenCostUnit
		}
		if in.ProviderID != nil && *in.ProviderID != "" {
			c.ProviderID = *in.ProviderID
		}
		if in.EffectiveDate != nil && *in.EffectiveDate != "" {
			eff, err := normTime(p+".effective_date", *in.EffectiveDate)
			if err != nil {
				return CostCreateRes{}, err
			}
			c.EffectiveDate = eff
		}
		costs = append(costs, c)
		res.IDs = append(res.IDs, [2]string{c.ID, llm})
	}
	if err := s.store.InsertCosts(ctx, costs); err != nil {
		return CostCreateRes{}, err
	}
	ex := s.extrasFor(ctx, req.ProjectID)
	for _, c := range costs {
		ex.claim("costs."+c.LLMID+".", "cost:"+c.ID)
	}
	return res, s.keepExtras(ctx, ex)
}

// CostQuery lists prices visible to a project (its own and the defaults).
func (s *Service) CostQuery(ctx context.Context, req CostQueryReq) (CostQueryRes, error) {
	if err := checkFields(req.Fields, costFields, "fields"); err != nil {
		return CostQueryRes{}, err
	}
	limit, offset, err := checkLimitOffset(req.Limit, req.Offset)
	if err != nil {
		return CostQueryRes{}, err
	}
	cond, err := ParseQuery(req.Query)
	if err != nil {
		return CostQueryRes{}, err
	}
	costs, err := s.store.QueryCosts(ctx, req.ProjectID, GenericQuery{Cond: cond, Sort: req.SortBy, Limit: limit, Offset: offset})
	if err != nil {
		return CostQueryRes{}, err
	}
	res := CostQueryRes{Results: make([]map[string]any, len(costs))}
	for i, c := range costs {
		res.Results[i] = selectFields(toMap(c), req.Fields)
	}
	return res, nil
}

// CostPurge deletes a project's own prices matching the query.
func (s *Service) CostPurge(ctx context.Context, req CostPurgeReq) error {
	cond, err := ParseQuery(req.Query)
	if err != nil {
		return err
	}
	if cond == nil {
		return badField("query", "is required")
	}
	_, err = s.store.PurgeCosts(ctx, req.ProjectID, cond)
	return err
}

// lazyPricer returns a Pricer that loads a project's prices for a model on first use.
func (s *Service) lazyPricer(ctx context.Context, project string) Pricer {
	cache := map[string][]Cost{}
	return func(model, startedAt string) (Price, bool) {
		costs, ok := cache[model]
		if !ok {
			m, err := s.store.Prices(ctx, project, []string{model})
			if err == nil {
				costs = m[model]
			}
			cache[model] = costs
		}
		return pickPrice(costs, startedAt)
	}
}

// pickPrice ranks prices as Weave does: one effective at the call's start first (project
// over default, newest effective date), else the newest.
func pickPrice(costs []Cost, startedAt string) (Price, bool) {
	if len(costs) == 0 {
		return Price{}, false
	}
	pick := costs[0]
	for _, c := range costs { // project prices come first, each level by effective date descending
		if startedAt == "" || c.EffectiveDate <= startedAt {
			pick = c
			break
		}
	}
	return Price{Prompt: pick.PromptTokenCost, Completion: pick.CompletionTokenCost,
		CacheRead: pick.CacheReadInputTokenCost, CacheCreation: pick.CacheCreationInputTokenCost}, true
}

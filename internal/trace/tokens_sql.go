package trace

import "github.com/honeai/hone/internal/db"

// TotalTokensField is a derived call field of queries and sorts (a Hone addition, beside
// Weave's summary.weave.latency_ms): the sum over the models of a call's summary.usage of
// total_tokens, or of prompt (input) plus completion (output) tokens where total_tokens is 0
// or absent; missing (sorted last) for a call without usage. Hone Studio sorts the calls table
// by it.
const TotalTokensField = "summary.weave.total_tokens"

// totalTokensSQL reads TotalTokensField of the current trace_calls row.
func totalTokensSQL(d db.Dialect) string {
	if d == db.Postgres {
		f := func(k string) string { return "hone_try_float(u.value->>'" + k + "')" }
		return "(SELECT SUM(COALESCE(NULLIF(" + f("total_tokens") + ", 0), COALESCE(" + f("prompt_tokens") + ", " + f("input_tokens") + ", 0) + COALESCE(" +
			f("completion_tokens") + ", " + f("output_tokens") + ", 0))) FROM jsonb_each(CASE WHEN jsonb_typeof(hone_jsonb(summary)->'usage') = 'object' " +
			"THEN hone_jsonb(summary)->'usage' ELSE '{}'::jsonb END) AS u)"
	}
	f := func(k string) string { return "json_extract(u.value, '$." + k + "')" }
	return "(SELECT SUM(COALESCE(NULLIF(" + f("total_tokens") + ", 0), COALESCE(" + f("prompt_tokens") + ", " + f("input_tokens") + ", 0) + COALESCE(" +
		f("completion_tokens") + ", " + f("output_tokens") + ", 0))) FROM json_each(CASE WHEN json_type(summary, '$.usage') = 'object' " +
		"THEN json_extract(summary, '$.usage') ELSE '{}' END) AS u)"
}

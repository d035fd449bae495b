package trace

import (
	"fmt"
	"strings"

	"github.com/honeai/hone/internal/db"
)

// schema is written once for both dialects; {{BLOB}} and {{REAL}} differ.
const schema = `
CREATE TABLE trace_objects (
	project_id TEXT NOT NULL,
	object_id TEXT NOT NULL,
	digest TEXT NOT NULL,
	kind TEXT NOT NULL,
	base_object_class TEXT,
	leaf_object_class TEXT,
	val TEXT NOT NULL,
	size_bytes BIGINT NOT NULL,
	created_at TEXT NOT NULL,
	version_index INTEGER NOT NULL,
	is_latest INTEGER NOT NULL DEFAULT 0,
	deleted_at TEXT,
	wb_user_id TEXT,
	PRIMARY KEY (project_id, object_id, digest)
);
CREATE INDEX trace_objects_latest ON trace_objects (project_id, is_latest, object_id);
CREATE INDEX trace_objects_version ON trace_objects (project_id, object_id, version_index);
CREATE INDEX trace_objects_created ON trace_objects (project_id, created_at);
CREATE TABLE trace_tags (
	project_id TEXT NOT NULL, object_id TEXT NOT NULL, digest TEXT NOT NULL, tag TEXT NOT NULL, created_at TEXT NOT NULL,
	PRIMARY KEY (project_id, object_id, digest, tag)
);
CREATE INDEX trace_tags_tag ON trace_tags (project_id, tag);
CREATE TABLE trace_aliases (
	project_id TEXT NOT NULL, object_id TEXT NOT NULL, alias TEXT NOT NULL, digest TEXT NOT NULL, created_at TEXT NOT NULL,
	PRIMARY KEY (project_id, object_id, alias)
);
CREATE TABLE trace_tables (
	project_id TEXT NOT NULL, digest TEXT NOT NULL, row_count INTEGER NOT NULL, created_at TEXT NOT NULL,
	PRIMARY KEY (project_id, digest)
);
CREATE TABLE trace_table_entries (
	project_id TEXT NOT NULL, table_digest TEXT NOT NULL, idx INTEGER NOT NULL, row_digest TEXT NOT NULL,
	PRIMARY KEY (project_id, table_digest, idx)
);
CREATE INDEX trace_table_entries_row ON trace_table_entries (project_id, table_digest, row_digest);
CREATE TABLE trace_rows (
	project_id TEXT NOT NULL, digest TEXT NOT NULL, val TEXT NOT NULL, size_bytes BIGINT NOT NULL,
	PRIMARY KEY (project_id, digest)
);
CREATE TABLE trace_calls (
	project_id TEXT NOT NULL,
	id TEXT NOT NULL,
	trace_id TEXT NOT NULL,
	parent_id TEXT,
	thread_id TEXT,
	turn_id TEXT,
	op_name TEXT NOT NULL,
	display_name TEXT,
	started_at TEXT,
	ended_at TEXT,
	exception TEXT,
	attributes TEXT,
	inputs TEXT,
	output TEXT,
	summary TEXT,
	input_refs TEXT,
	output_refs TEXT,
	otel_dump TEXT,
	wb_user_id TEXT,
	wb_run_id TEXT,
	wb_run_step BIGINT,
	wb_run_step_end BIGINT,
	deleted_at TEXT,
	sdk_cumulative INTEGER NOT NULL DEFAULT 0,
	size_bytes BIGINT,
	PRIMARY KEY (project_id, id)
);
CREATE INDEX trace_calls_trace ON trace_calls (project_id, trace_id);
CREATE INDEX trace_calls_parent ON trace_calls (project_id, parent_id);
CREATE INDEX trace_calls_started ON trace_calls (project_id, started_at);
CREATE INDEX trace_calls_op ON trace_calls (project_id, op_name);
CREATE INDEX trace_calls_thread ON trace_calls (project_id, thread_id);
CREATE TABLE trace_files (
	project_id TEXT NOT NULL, digest TEXT NOT NULL, name TEXT NOT NULL, size_bytes BIGINT NOT NULL,
	content {{BLOB}} NOT NULL, created_at TEXT NOT NULL,
	PRIMARY KEY (project_id, digest)
);
CREATE TABLE trace_costs (
	id TEXT PRIMARY KEY,
	llm_id TEXT NOT NULL,
	prompt_token_cost {{REAL}} NOT NULL,
	completion_token_cost {{REAL}} NOT NULL,
	cache_read_input_token_cost {{REAL}} NOT NULL DEFAULT 0,
	cache_creation_input_token_cost {{REAL}} NOT NULL DEFAULT 0,
	prompt_token_cost_unit TEXT NOT NULL,
	completion_token_cost_unit TEXT NOT NULL,
	effective_date TEXT NOT NULL,
	provider_id TEXT NOT NULL,
	pricing_level TEXT NOT NULL,
	pricing_level_id TEXT NOT NULL,
	created_at TEXT NOT NULL,
	created_by TEXT
);
CREATE INDEX trace_costs_llm ON trace_costs (llm_id, pricing_level, pricing_level_id);
CREATE TABLE trace_feedback (
	project_id TEXT NOT NULL, id TEXT NOT NULL, weave_ref TEXT NOT NULL, wb_user_id TEXT NOT NULL, creator TEXT,
	created_at TEXT NOT NULL, feedback_type TEXT NOT NULL, payload TEXT NOT NULL, annotation_ref TEXT,
	runnable_ref TEXT, call_ref TEXT, trigger_ref TEXT,
	PRIMARY KEY (project_id, id)
);
CREATE INDEX trace_feedback_ref ON trace_feedback (project_id, weave_ref)`

// pgFunctions are helpers the compiled queries use on PostgreSQL.
const pgFunctions = `
CREATE OR REPLACE FUNCTION hone_try_float(t text) RETURNS double precision AS $$
BEGIN
	RETURN t::double precision;
EXCEPTION WHEN others THEN
	RETURN NULL;
END
$$ LANGUAGE plpgsql IMMUTABLE`

// pgJSONB reads a JSON text column as jsonb on PostgreSQL. jsonb cannot hold a NUL character
// (\u0000) nor a lone UTF-16 surrogate, which JSON text (and so the stored value) can; such a
// value is read with each NUL as U+FFFF and each lone surrogate as U+FFFD (escapes only: an
// escaped backslash before "u0000" is text, not an escape), so that filters and sorts on it
// work. The stored text is never changed. Values without such escapes take the fast path.
const pgJSONB = `
CREATE OR REPLACE FUNCTION hone_jsonb_slow(t text) RETURNS jsonb AS $$
BEGIN
	RETURN regexp_replace(regexp_replace(regexp_replace(t,
		'(?<!\\)((?:\\\\)*)\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})', '\1\\ufffd', 'g'),
		'(?<!\\)((?:\\\\)*)(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}', '\1\\ufffd', 'g'),
		'(?<!\\)((?:\\\\)*)\\u0000', '\1\\uffff', 'g')::jsonb;
EXCEPTION WHEN others THEN
	RETURN NULL;
END
$$ LANGUAGE plpgsql IMMUTABLE;
CREATE OR REPLACE FUNCTION hone_jsonb(t text) RETURNS jsonb AS $$
	SELECT CASE WHEN t !~* '\\u(0000|d[89a-f])' THEN t::jsonb ELSE hone_jsonb_slow(t) END
$$ LANGUAGE sql IMMUTABLE`

// defaultPrices are the default token prices (USD per token) seeded for common models, from
// the providers' public price lists; a project's own prices (POST /cost/create) take precedence.
var defaultPrices = []struct {
	llm, provider                     string
	prompt, completion, cacheRead, cw float64
}{
	{"gpt-4o", "openai", 2.5e-6, 1e-5, 1.25e-6, 0},
	{"gpt-4o-2024-08-06", "openai", 2.5e-6, 1e-5, 1.25e-6, 0},
	{"gpt-4o-mini", "openai", 1.5e-7, 6e-7, 7.5e-8, 0},
	{"gpt-4o-mini-2024-07-18", "openai", 1.5e-7, 6e-7, 7.5e-8, 0},
	{"gpt-4.1", "openai", 2e-6, 8e-6, 5e-7, 0},
	{"gpt-4.1-mini", "openai", 4e-7, 1.6e-6, 1e-7, 0},
	{"gpt-4.1-nano", "openai", 1e-7, 4e-7, 2.5e-8, 0},
	{"gpt-4-turbo", "openai", 1e-5, 3e-5, 0, 0},
	{"gpt-3.5-turbo", "openai", 5e-7, 1.5e-6, 0, 0},
	{"o1", "openai", 1.5e-5, 6e-5, 7.5e-6, 0},
	{"o3", "openai", 2e-6, 8e-6, 5e-7, 0},
	{"o3-mini", "openai", 1.1e-6, 4.4e-6, 5.5e-7, 0},
	{"o4-mini", "openai", 1.1e-6, 4.4e-6, 2.75e-7, 0},
	{"claude-3-5-sonnet-20241022", "anthropic", 3e-6, 1.5e-5, 3e-7, 3.75e-6},
	{"claude-3-5-haiku-20241022", "anthropic", 8e-7, 4e-6, 8e-8, 1e-6},
	{"claude-3-7-sonnet-20250219", "anthropic", 3e-6, 1.5e-5, 3e-7, 3.75e-6},
	{"claude-3-opus-20240229", "anthropic", 1.5e-5, 7.5e-5, 1.5e-6, 1.875e-5},
	{"claude-sonnet-4-20250514", "anthropic", 3e-6, 1.5e-5, 3e-7, 3.75e-6},
	{"claude-opus-4-20250514", "anthropic", 1.5e-5, 7.5e-5, 1.5e-6, 1.875e-5},
	{"gemini-1.5-pro", "google", 1.25e-6, 5e-6, 0, 0},
	{"gemini-1.5-flash", "google", 7.5e-8, 3e-7, 0, 0},
	{"gemini-2.0-flash", "google", 1e-7, 4e-7, 2.5e-8, 0},
}

func seedPrices() string {
	var b strings.Builder
	for _, p := range defaultPrices {
		fmt.Fprintf(&b, "INSERT INTO trace_costs (id, llm_id, prompt_token_cost, completion_token_cost, cache_read_input_token_cost, "+
			"cache_creation_input_token_cost, prompt_token_cost_unit, completion_token_cost_unit, effective_date, provider_id, "+
			"pricing_level, pricing_level_id, created_at, created_by) VALUES ('default-%s', '%s', %g, %g, %g, %g, 'USD', 'USD', "+
			"'2024-01-01T00:00:00.000000Z', '%s', 'default', 'default', '2024-01-01T00:00:00.000000Z', NULL);\n",
			p.llm, p.llm, p.prompt, p.completion, p.cacheRead, p.cw, p.provider)
	}
	return b.String()
}

// Migrations are the trace component's schema.
var Migrations = []db.Migration{
	{
		Version:  1,
		SQLite:   strings.NewReplacer("{{BLOB}}", "BLOB", "{{REAL}}", "REAL").Replace(schema),
		Postgres: strings.NewReplacer("{{BLOB}}", "BYTEA", "{{REAL}}", "DOUBLE PRECISION").Replace(schema),
	},
	{Version: 2, SQLite: "SELECT 1", Postgres: pgFunctions},
	{Version: 3, SQLite: seedPrices()},
	// Most calls have no thread: index only those that do (cheaper ingest).
	{Version: 4, SQLite: `DROP INDEX trace_calls_thread;
		CREATE INDEX trace_calls_thread ON trace_calls (project_id, thread_id) WHERE thread_id IS NOT NULL`},
	// Table entries point at rows by an integer id instead of their digest: a table scan
	// reads entries in key order (SQLite: WITHOUT ROWID) and finds each row with one integer
	// B-tree descent rather than text-key comparisons.
	{Version: 5, SQLite: `
CREATE TABLE trace_rows_new (
	id INTEGER PRIMARY KEY, project_id TEXT NOT NULL, digest TEXT NOT NULL, val TEXT NOT NULL, size_bytes BIGINT NOT NULL
);
INSERT INTO trace_rows_new (project_id, digest, val, size_bytes) SELECT project_id, digest, val, size_bytes FROM trace_rows;
DROP TABLE trace_rows;
ALTER TABLE trace_rows_new RENAME TO trace_rows;
CREATE UNIQUE INDEX trace_rows_digest ON trace_rows (project_id, digest);
CREATE TABLE trace_table_entries_new (
	project_id TEXT NOT NULL, table_digest TEXT NOT NULL, idx INTEGER NOT NULL, row_id INTEGER NOT NULL,
	PRIMARY KEY (project_id, table_digest, idx)
) WITHOUT ROWID;
INSERT INTO trace_table_entries_new SELECT e.project_id, e.table_digest, e.idx, r.id
	FROM trace_table_entries e JOIN trace_rows r ON r.project_id = e.project_id AND r.digest = e.row_digest;
DROP TABLE trace_table_entries;
ALTER TABLE trace_table_entries_new RENAME TO trace_table_entries;
CREATE INDEX trace_table_entries_row ON trace_table_entries (project_id, table_digest, row_id)`,
		Postgres: `
ALTER TABLE trace_rows ADD COLUMN id BIGSERIAL;
CREATE UNIQUE INDEX trace_rows_id ON trace_rows (id);
ALTER TABLE trace_table_entries ADD COLUMN row_id BIGINT;
UPDATE trace_table_entries e SET row_id = r.id FROM trace_rows r WHERE r.project_id = e.project_id AND r.digest = e.row_digest;
ALTER TABLE trace_table_entries ALTER COLUMN row_id SET NOT NULL;
ALTER TABLE trace_table_entries DROP COLUMN row_digest;
CREATE INDEX trace_table_entries_row ON trace_table_entries (project_id, table_digest, row_id)`},
	// Feedback carries Weave 0.54's structured scorer and agent-span fields; request fields
	// Hone does not know are kept as sent, beside what they came with.
	{Version: 6, SQLite: feedbackV6 + ";\n" + extraFieldsTable, Postgres: feedbackV6 + ";\n" + extraFieldsTable},
	// JSON values holding NUL or lone surrogates are queryable on PostgreSQL (pgJSONB).
	{Version: 7, SQLite: "SELECT 1", Postgres: pgJSONB},
	// A call's usage counts beside its summary (usagecol.go), so the usage roll-up parses no
	// JSON; NULL in rows written before (their summary is parsed instead).
	{Version: 8, SQLite: usageColumn, Postgres: usageColumn},
}

const usageColumn = `ALTER TABLE trace_calls ADD COLUMN summary_usage TEXT`

const feedbackV6 = `ALTER TABLE trace_feedback ADD COLUMN queue_id TEXT;
ALTER TABLE trace_feedback ADD COLUMN scorer_tags TEXT NOT NULL DEFAULT '[]';
ALTER TABLE trace_feedback ADD COLUMN scorer_tag_reasons TEXT NOT NULL DEFAULT '{}';
ALTER TABLE trace_feedback ADD COLUMN scorer_tag_confidences TEXT NOT NULL DEFAULT '{}';
ALTER TABLE trace_feedback ADD COLUMN scorer_ratings TEXT NOT NULL DEFAULT '{}';
ALTER TABLE trace_feedback ADD COLUMN scorer_rating_reasons TEXT NOT NULL DEFAULT '{}';
ALTER TABLE trace_feedback ADD COLUMN scorer_rating_confidences TEXT NOT NULL DEFAULT '{}';
ALTER TABLE trace_feedback ADD COLUMN span_agent_name TEXT NOT NULL DEFAULT '';
ALTER TABLE trace_feedback ADD COLUMN span_agent_version TEXT NOT NULL DEFAULT '';
ALTER TABLE trace_feedback ADD COLUMN span_status_code TEXT NOT NULL DEFAULT 'UNSET';
ALTER TABLE trace_feedback ADD COLUMN span_conversation_id TEXT NOT NULL DEFAULT '';
ALTER TABLE trace_feedback ADD COLUMN span_trace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE trace_feedback ADD COLUMN scorer_trace_id TEXT NOT NULL DEFAULT '';
CREATE INDEX trace_feedback_type ON trace_feedback (project_id, feedback_type)`

const extraFieldsTable = `CREATE TABLE trace_extra_fields (
	id TEXT PRIMARY KEY, project_id TEXT NOT NULL, route TEXT NOT NULL, target TEXT NOT NULL,
	fields TEXT NOT NULL, created_at TEXT NOT NULL
);
CREATE INDEX trace_extra_fields_target ON trace_extra_fields (project_id, target)`

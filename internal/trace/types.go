package trace

import (
	"encoding/json"
)

// The request and response types of the Weave trace server interface, with Weave's field
// names. Arbitrary JSON values (object vals, call inputs, outputs, summaries) stay raw so that
// their key order survives; digests are computed from them with internal/pyjson.

// SortBy is one sort key. Weave sends `direction`; the seed's /table/query sends `order`; both
// are accepted.
type SortBy struct {
	Field     string `json:"field"`
	Direction string `json:"direction,omitempty"`
	Order     string `json:"order,omitempty"`
}

// Dir returns the sort direction ("" when neither field is set).
func (s SortBy) Dir() string {
	if s.Direction != "" {
		return s.Direction
	}
	return s.Order
}

// ObjSchemaForInsert is the object of /obj/create.
type ObjSchemaForInsert struct {
	ProjectID          string          `json:"project_id"`
	ObjectID           string          `json:"object_id"`
	Val                json.RawMessage `json:"val"`
	BuiltinObjectClass *string         `json:"builtin_object_class,omitempty"`
	SetBaseObjectClass *string         `json:"set_base_object_class,omitempty"`
	ExpectedDigest     *string         `json:"expected_digest,omitempty"`
	WBUserID           *string         `json:"wb_user_id,omitempty"`
}

// ObjCreateReq is the body of POST /obj/create.
type ObjCreateReq struct {
	Obj ObjSchemaForInsert `json:"obj"`
}

// ObjCreateRes is its answer.
type ObjCreateRes struct {
	Digest   string `json:"digest"`
	ObjectID string `json:"object_id"`
}

// ObjSchema is a stored object version.
type ObjSchema struct {
	ProjectID       string          `json:"project_id"`
	ObjectID        string          `json:"object_id"`
	CreatedAt       string          `json:"created_at"`
	DeletedAt       *string         `json:"deleted_at"`
	Digest          string          `json:"digest"`
	VersionIndex    int             `json:"version_index"`
	IsLatest        int             `json:"is_latest"`
	Kind            string          `json:"kind"`
	BaseObjectClass *string         `json:"base_object_class"`
	LeafObjectClass *string         `json:"leaf_object_class"`
	Val             json.RawMessage `json:"val"`
	WBUserID        *string         `json:"wb_user_id"`
	SizeBytes       *int64          `json:"size_bytes,omitempty"`
	Tags            *[]string       `json:"tags,omitempty"`
	Aliases         *[]string       `json:"aliases,omitempty"`
}

// ObjReadReq is the body of POST /obj/read.
type ObjReadReq struct {
	ProjectID             string `json:"project_id"`
	ObjectID              string `json:"object_id"`
	Digest                string `json:"digest"`
	MetadataOnly          bool   `json:"metadata_only,omitempty"`
	IncludeTagsAndAliases bool   `json:"include_tags_and_aliases,omitempty"`
}

// ObjReadRes is its answer.
type ObjReadRes struct {
	Obj ObjSchema `json:"obj"`
}

// ObjDeleteReq is the body of POST /obj/delete.
type ObjDeleteReq struct {
	ProjectID string   `json:"project_id"`
	ObjectID  string   `json:"object_id"`
	Digests   []string `json:"digests,omitempty"`
}

// DeletedVersion describes one deleted version.
type DeletedVersion struct {
	Digest          string  `json:"digest"`
	BaseObjectClass *string `json:"base_object_class"`
	LeafObjectClass *string `json:"leaf_object_class"`
}

// ObjDeleteRes is its answer.
type ObjDeleteRes struct {
	NumDeleted      int              `json:"num_deleted"`
	DeletedVersions []DeletedVersion `json:"deleted_versions"`
}

// ObjectVersionFilter filters /objs/query.
type ObjectVersionFilter struct {
	BaseObjectClasses        []string `json:"base_object_classes,omitempty"`
	ExcludeBaseObjectClasses []string `json:"exclude_base_object_classes,omitempty"`
	LeafObjectClasses        []string `json:"leaf_object_classes,omitempty"`
	ObjectIDs                []string `json:"object_ids,omitempty"`
	IsOp                     *bool    `json:"is_op,omitempty"`
	LatestOnly               *bool    `json:"latest_only,omitempty"`
	Tags                     []string `json:"tags,omitempty"`
	Aliases                  []string `json:"aliases,omitempty"`
}

// ObjQueryReq is the body of POST /objs/query.
type ObjQueryReq struct {
	ProjectID             string               `json:"project_id"`
	Filter                *ObjectVersionFilter `json:"filter,omitempty"`
	Limit                 *int                 `json:"limit,omitempty"`
	Offset                *int                 `json:"offset,omitempty"`
	SortBy                []SortBy             `json:"sort_by,omitempty"`
	MetadataOnly          *bool                `json:"metadata_only,omitempty"`
	IncludeStorageSize    *bool                `json:"include_storage_size,omitempty"`
	IncludeTagsAndAliases *bool                `json:"include_tags_and_aliases,omitempty"`
}

// ObjQueryRes is its answer.
type ObjQueryRes struct {
	Objs []ObjSchema `json:"objs"`
}

// TagsReq is the body of the tag routes.
type TagsReq struct {
	ProjectID string   `json:"project_id"`
	Tags      []string `json:"tags"`
}

// AliasesSetReq is the body of PUT /objs/{object_id}/aliases.
type AliasesSetReq struct {
	ProjectID string   `json:"project_id"`
	Digest    string   `json:"digest"`
	Aliases   []string `json:"aliases"`
}

// AliasesRemoveReq is the body of POST /objs/{object_id}/aliases/remove.
type AliasesRemoveReq struct {
	ProjectID string   `json:"project_id"`
	Aliases   []string `json:"aliases"`
}

// TagsListRes answers GET /tags.
type TagsListRes struct {
	Tags []string `json:"tags"`
}

// ProjectsListRes answers GET /projects (a Hone addition): the key's entity's projects
// ("<entity>/<project>") that hold calls or objects, sorted.
type ProjectsListRes struct {
	Projects []string `json:"projects"`
}

// AliasesListRes answers GET /aliases.
type AliasesListRes struct {
	Aliases []string `json:"aliases"`
}

// TableSchemaForInsert is the table of /table/create.
type TableSchemaForInsert struct {
	ProjectID      string            `json:"project_id"`
	Rows           []json.RawMessage `json:"rows"`
	ExpectedDigest *string           `json:"expected_digest,omitempty"`
}

// TableCreateReq is the body of POST /table/create.
type TableCreateReq struct {
	Table TableSchemaForInsert `json:"table"`
}

// TableCreateRes is its answer.
type TableCreateRes struct {
	Digest     string   `json:"digest"`
	RowDigests []string `json:"row_digests"`
}

// TableUpdateSpec is one update: exactly one of Append, Pop, Insert.
type TableUpdateSpec struct {
	Append *struct {
		Row json.RawMessage `json:"row"`
	} `json:"append,omitempty"`
	Pop *struct {
		Index *int `json:"index"`
	} `json:"pop,omitempty"`
	Insert *struct {
		Index *int            `json:"index"`
		Row   json.RawMessage `json:"row"`
	} `json:"insert,omitempty"`
}

// TableUpdateReq is the body of POST /table/update.
type TableUpdateReq struct {
	ProjectID  string            `json:"project_id"`
	BaseDigest string            `json:"base_digest"`
	Updates    []TableUpdateSpec `json:"updates"`
}

// TableUpdateRes is its answer.
type TableUpdateRes struct {
	Digest            string   `json:"digest"`
	UpdatedRowDigests []string `json:"updated_row_digests"`
}

// TableCreateFromDigestsReq is the body of POST /table/create_from_digests.
type TableCreateFromDigestsReq struct {
	ProjectID      string   `json:"project_id"`
	RowDigests     []string `json:"row_digests"`
	ExpectedDigest *string  `json:"expected_digest,omitempty"`
}

// TableCreateFromDigestsRes is its answer.
type TableCreateFromDigestsRes struct {
	Digest string `json:"digest"`
}

// TableRowFilter filters /table/query.
type TableRowFilter struct {
	RowDigests []string `json:"row_digests,omitempty"`
}

// TableQueryReq is the body of POST /table/query.
type TableQueryReq struct {
	ProjectID string          `json:"project_id"`
	Digest    string          `json:"digest"`
	Filter    *TableRowFilter `json:"filter,omitempty"`
	Limit     *int            `json:"limit,omitempty"`
	Offset    *int            `json:"offset,omitempty"`
	SortBy    []SortBy        `json:"sort_by,omitempty"`
}

// TableRowSchema is one row of a table.
type TableRowSchema struct {
	Digest        string          `json:"digest"`
	Val           json.RawMessage `json:"val"`
	OriginalIndex int             `json:"original_index"`
}

// TableQueryRes is the answer of /table/query.
type TableQueryRes struct {
	Rows []TableRowSchema `json:"rows"`
}

// TableQueryStatsReq is the body of POST /table/query_stats.
type TableQueryStatsReq struct {
	ProjectID string `json:"project_id"`
	Digest    string `json:"digest"`
}

// TableQueryStatsRes is its answer.
type TableQueryStatsRes struct {
	Count int `json:"count"`
}

// TableQueryStatsBatchReq is the body of POST /table/query_stats_batch.
type TableQueryStatsBatchReq struct {
	ProjectID          string   `json:"project_id"`
	Digests            []string `json:"digests"`
	IncludeStorageSize bool     `json:"include_storage_size,omitempty"`
}

// TableStats is one entry of TableQueryStatsBatchRes.
type TableStats struct {
	Digest           string `json:"digest"`
	Count            int    `json:"count"`
	StorageSizeBytes *int64 `json:"storage_size_bytes,omitempty"`
}

// TableQueryStatsBatchRes is its answer.
type TableQueryStatsBatchRes struct {
	Tables []TableStats `json:"tables"`
}

// StartedCallSchemaForInsert is the start of a call.
type StartedCallSchemaForInsert struct {
	ProjectID   string          `json:"project_id"`
	ID          *string         `json:"id,omitempty"`
	OpName      string          `json:"op_name"`
	DisplayName *string         `json:"display_name,omitempty"`
	TraceID     *string         `json:"trace_id,omitempty"`
	ParentID    *string         `json:"parent_id,omitempty"`
	ThreadID    *string         `json:"thread_id,omitempty"`
	TurnID      *string         `json:"turn_id,omitempty"`
	StartedAt   string          `json:"started_at"`
	Attributes  json.RawMessage `json:"attributes"`
	Inputs      json.RawMessage `json:"inputs"`
	OtelDump    json.RawMessage `json:"otel_dump,omitempty"`
	WBUserID    *string         `json:"wb_user_id,omitempty"`
	WBRunID     *string         `json:"wb_run_id,omitempty"`
	WBRunStep   *int64          `json:"wb_run_step,omitempty"`
}

// EndedCallSchemaForInsert is the end of a call.
type EndedCallSchemaForInsert struct {
	ProjectID     string          `json:"project_id"`
	ID            string          `json:"id"`
	EndedAt       string          `json:"ended_at"`
	Exception     *string         `json:"exception,omitempty"`
	Output        json.RawMessage `json:"output,omitempty"`
	Summary       json.RawMessage `json:"summary"`
	DisplayName   *string         `json:"display_name,omitempty"`
	WBRunStepEnd  *int64          `json:"wb_run_step_end,omitempty"`
	TraceID       *string         `json:"trace_id,omitempty"`
	StartedAtHint *string         `json:"started_at,omitempty"`
	// IsEval is the SDK's hint that the call belongs to an evaluation (Weave routes such
	// calls to its evaluation tables); Hone keeps every call in one table and needs no hint.
	IsEval *bool `json:"is_eval,omitempty"`
}

// CallStartReq is the body of POST /call/start.
type CallStartReq struct {
	Start StartedCallSchemaForInsert `json:"start"`
}

// CallStartRes is its answer.
type CallStartRes struct {
	ID      string `json:"id"`
	TraceID string `json:"trace_id"`
}

// CallEndReq is the body of POST /call/end.
type CallEndReq struct {
	End EndedCallSchemaForInsert `json:"end"`
}

// CallBatchItem is one entry of /call/upsert_batch: mode "start" with req.start, or mode
// "end" with req.end.
type CallBatchItem struct {
	Mode string `json:"mode"`
	Req  struct {
		Start *StartedCallSchemaForInsert `json:"start,omitempty"`
		End   *EndedCallSchemaForInsert   `json:"end,omitempty"`
	} `json:"req"`
}

// CallCreateBatchReq is the body of POST /call/upsert_batch.
type CallCreateBatchReq struct {
	Batch []CallBatchItem `json:"batch"`
}

// CallCreateBatchRes is its answer: CallStartRes for starts, {} for ends.
type CallCreateBatchRes struct {
	Res []any `json:"res"`
}

// CallsFilter selects calls.
type CallsFilter struct {
	OpNames        []string `json:"op_names,omitempty"`
	InputRefs      []string `json:"input_refs,omitempty"`
	OutputRefs     []string `json:"output_refs,omitempty"`
	ParentIDs      []string `json:"parent_ids,omitempty"`
	TraceIDs       []string `json:"trace_ids,omitempty"`
	CallIDs        []string `json:"call_ids,omitempty"`
	ThreadIDs      []string `json:"thread_ids,omitempty"`
	TurnIDs        []string `json:"turn_ids,omitempty"`
	TraceRootsOnly *bool    `json:"trace_roots_only,omitempty"`
	WBUserIDs      []string `json:"wb_user_ids,omitempty"`
	WBRunIDs       []string `json:"wb_run_ids,omitempty"`
}

// CallsQueryReq is the body of POST /calls/stream_query.
type CallsQueryReq struct {
	ProjectID                  string          `json:"project_id"`
	Filter                     *CallsFilter    `json:"filter,omitempty"`
	Limit                      *int            `json:"limit,omitempty"`
	Offset                     *int            `json:"offset,omitempty"`
	SortBy                     []SortBy        `json:"sort_by,omitempty"`
	Query                      json.RawMessage `json:"query,omitempty"`
	IncludeCosts               bool            `json:"include_costs,omitempty"`
	IncludeFeedback            bool            `json:"include_feedback,omitempty"`
	IncludeStorageSize         bool            `json:"include_storage_size,omitempty"`
	IncludeTotalStorageSize    bool            `json:"include_total_storage_size,omitempty"`
	Columns                    []string        `json:"columns,omitempty"`
	ExpandColumns              []string        `json:"expand_columns,omitempty"`
	ReturnExpandedColumnValues *bool           `json:"return_expanded_column_values,omitempty"`
	IncludeUsernames           bool            `json:"include_usernames,omitempty"`
	LatestOnly                 bool            `json:"latest_only,omitempty"`
}

// CallSchema is a stored call.
type CallSchema struct {
	ID                    string          `json:"id"`
	ProjectID             string          `json:"project_id"`
	OpName                string          `json:"op_name"`
	DisplayName           *string         `json:"display_name"`
	TraceID               string          `json:"trace_id"`
	ParentID              *string         `json:"parent_id"`
	ThreadID              *string         `json:"thread_id"`
	TurnID                *string         `json:"turn_id"`
	StartedAt             *string         `json:"started_at"`
	Attributes            json.RawMessage `json:"attributes"`
	Inputs                json.RawMessage `json:"inputs"`
	EndedAt               *string         `json:"ended_at"`
	Exception             *string         `json:"exception"`
	Output                json.RawMessage `json:"output"`
	Summary               json.RawMessage `json:"summary"`
	WBUserID              *string         `json:"wb_user_id"`
	WBUsername            *string         `json:"wb_username,omitempty"`
	WBRunID               *string         `json:"wb_run_id"`
	WBRunStep             *int64          `json:"wb_run_step"`
	WBRunStepEnd          *int64          `json:"wb_run_step_end"`
	DeletedAt             *string         `json:"deleted_at"`
	StorageSizeBytes      *int64          `json:"storage_size_bytes,omitempty"`
	TotalStorageSizeBytes *int64          `json:"total_storage_size_bytes,omitempty"`
}

// CallsQueryStatsReq is the body of POST /calls/query_stats.
type CallsQueryStatsReq struct {
	ProjectID               string          `json:"project_id"`
	Filter                  *CallsFilter    `json:"filter,omitempty"`
	Query                   json.RawMessage `json:"query,omitempty"`
	Limit                   *int            `json:"limit,omitempty"`
	IncludeTotalStorageSize bool            `json:"include_total_storage_size,omitempty"`
	ExpandColumns           []string        `json:"expand_columns,omitempty"`
}

// CallsQueryStatsRes is its answer.
type CallsQueryStatsRes struct {
	Count                 int    `json:"count"`
	TotalStorageSizeBytes *int64 `json:"total_storage_size_bytes,omitempty"`
}

// CallReadReq is the body of POST /call/read.
type CallReadReq struct {
	ProjectID               string `json:"project_id"`
	ID                      string `json:"id"`
	IncludeCosts            bool   `json:"include_costs,omitempty"`
	IncludeStorageSize      bool   `json:"include_storage_size,omitempty"`
	IncludeTotalStorageSize bool   `json:"include_total_storage_size,omitempty"`
}

// CallReadRes is its answer.
type CallReadRes struct {
	Call *CallSchema `json:"call"`
}

// CallUpdateReq is the body of POST /call/update.
type CallUpdateReq struct {
	ProjectID   string  `json:"project_id"`
	CallID      string  `json:"call_id"`
	DisplayName *string `json:"display_name,omitempty"`
	WBUserID    *string `json:"wb_user_id,omitempty"`
}

// CallsDeleteReq is the body of POST /calls/delete.
type CallsDeleteReq struct {
	ProjectID string   `json:"project_id"`
	CallIDs   []string `json:"call_ids"`
	WBUserID  *string  `json:"wb_user_id,omitempty"`
}

// CallsDeleteRes is its answer.
type CallsDeleteRes struct {
	NumDeleted int `json:"num_deleted"`
}

// TraceUsageReq is the body of POST /trace/usage.
type TraceUsageReq struct {
	ProjectID    string          `json:"project_id"`
	Filter       *CallsFilter    `json:"filter,omitempty"`
	Query        json.RawMessage `json:"query,omitempty"`
	IncludeCosts bool            `json:"include_costs,omitempty"`
	Limit        *int            `json:"limit,omitempty"`
}

// CallsUsageReq is the body of POST /calls/usage.
type CallsUsageReq struct {
	ProjectID    string   `json:"project_id"`
	CallIDs      []string `json:"call_ids"`
	IncludeCosts bool     `json:"include_costs,omitempty"`
	Limit        *int     `json:"limit,omitempty"`
}

// UsageRes answers /trace/usage and /calls/usage: call id → model → usage.
type UsageRes struct {
	CallUsage         map[string]map[string]*AggregatedUsage `json:"call_usage"`
	UnfinishedCallIDs []string                               `json:"unfinished_call_ids"`
	// rendered is the JSON of call_usage up to its last member, written with the result
	// (rollUpRendered); nil: MarshalJSON writes it from CallUsage.
	rendered []byte
}

// AggregatedUsage is the usage of one model, summed.
type AggregatedUsage struct {
	Requests                          int64    `json:"requests"`
	PromptTokens                      int64    `json:"prompt_tokens"`
	CompletionTokens                  int64    `json:"completion_tokens"`
	TotalTokens                       int64    `json:"total_tokens"`
	CacheReadInputTokens              int64    `json:"cache_read_input_tokens"`
	CacheCreationInputTokens          int64    `json:"cache_creation_input_tokens"`
	PromptTokensTotalCost             *float64 `json:"prompt_tokens_total_cost,omitempty"`
	CompletionTokensTotalCost         *float64 `json:"completion_tokens_total_cost,omitempty"`
	CacheReadInputTokensTotalCost     *float64 `json:"cache_read_input_tokens_total_cost,omitempty"`
	CacheCreationInputTokensTotalCost *float64 `json:"cache_creation_input_tokens_total_cost,omitempty"`
}

// CostCreateInput is one model's price in /cost/create.
type CostCreateInput struct {
	PromptTokenCost             float64  `json:"prompt_token_cost"`
	CompletionTokenCost         float64  `json:"completion_token_cost"`
	CacheReadInputTokenCost     *float64 `json:"cache_read_input_token_cost,omitempty"`
	CacheCreationInputTokenCost *float64 `json:"cache_creation_input_token_cost,omitempty"`
	PromptTokenCostUnit         *string  `json:"prompt_token_cost_unit,omitempty"`
	CompletionTokenCostUnit     *string  `json:"completion_token_cost_unit,omitempty"`
	EffectiveDate               *string  `json:"effective_date,omitempty"`
	ProviderID                  *string  `json:"provider_id,omitempty"`
}

// CostCreateReq is the body of POST /cost/create.
type CostCreateReq struct {
	ProjectID string                     `json:"project_id"`
	Costs     map[string]CostCreateInput `json:"costs"`
	WBUserID  *string                    `json:"wb_user_id,omitempty"`
}

// CostCreateRes is its answer: [id, llm_id] pairs.
type CostCreateRes struct {
	IDs [][2]string `json:"ids"`
}

// CostQueryReq is the body of POST /cost/query.
type CostQueryReq struct {
	ProjectID string          `json:"project_id"`
	Fields    []string        `json:"fields,omitempty"`
	Query     json.RawMessage `json:"query,omitempty"`
	SortBy    []SortBy        `json:"sort_by,omitempty"`
	Limit     *int            `json:"limit,omitempty"`
	Offset    *int            `json:"offset,omitempty"`
}

// Cost is a stored price.
type Cost struct {
	ID                          string  `json:"id"`
	LLMID                       string  `json:"llm_id"`
	PromptTokenCost             float64 `json:"prompt_token_cost"`
	CompletionTokenCost         float64 `json:"completion_token_cost"`
	CacheReadInputTokenCost     float64 `json:"cache_read_input_token_cost"`
	CacheCreationInputTokenCost float64 `json:"cache_creation_input_token_cost"`
	PromptTokenCostUnit         string  `json:"prompt_token_cost_unit"`
	CompletionTokenCostUnit     string  `json:"completion_token_cost_unit"`
	EffectiveDate               string  `json:"effective_date"`
	ProviderID                  string  `json:"provider_id"`
	PricingLevel                string  `json:"pricing_level"`
	PricingLevelID              string  `json:"pricing_level_id"`
	CreatedAt                   string  `json:"created_at"`
	CreatedBy                   *string `json:"created_by"`
}

// CostQueryRes is the answer of /cost/query.
type CostQueryRes struct {
	Results []map[string]any `json:"results"`
}

// CostPurgeReq is the body of POST /cost/purge.
type CostPurgeReq struct {
	ProjectID string          `json:"project_id"`
	Query     json.RawMessage `json:"query"`
}

// FeedbackCreateReq is the body of POST /feedback/create and one item of
// /feedback/batch/create. The scorer_* and span_* fields are the structured results of
// scorers and agent-span feedback (Weave 0.54); absent ones take Weave's defaults.
type FeedbackCreateReq struct {
	ProjectID               string             `json:"project_id"`
	WeaveRef                string             `json:"weave_ref"`
	Creator                 *string            `json:"creator,omitempty"`
	FeedbackType            string             `json:"feedback_type"`
	Payload                 json.RawMessage    `json:"payload"`
	AnnotationRef           *string            `json:"annotation_ref,omitempty"`
	RunnableRef             *string            `json:"runnable_ref,omitempty"`
	CallRef                 *string            `json:"call_ref,omitempty"`
	TriggerRef              *string            `json:"trigger_ref,omitempty"`
	WBUserID                *string            `json:"wb_user_id,omitempty"`
	ID                      *string            `json:"id,omitempty"`
	QueueID                 *string            `json:"queue_id,omitempty"`
	ScorerTags              []string           `json:"scorer_tags,omitempty"`
	ScorerTagReasons        map[string]string  `json:"scorer_tag_reasons,omitempty"`
	ScorerTagConfidences    map[string]float64 `json:"scorer_tag_confidences,omitempty"`
	ScorerRatings           map[string]float64 `json:"scorer_ratings,omitempty"`
	ScorerRatingReasons     map[string]string  `json:"scorer_rating_reasons,omitempty"`
	ScorerRatingConfidences map[string]float64 `json:"scorer_rating_confidences,omitempty"`
	SpanAgentName           *string            `json:"span_agent_name,omitempty"`
	SpanAgentVersion        *string            `json:"span_agent_version,omitempty"`
	SpanStatusCode          *string            `json:"span_status_code,omitempty"`
	SpanConversationID      *string            `json:"span_conversation_id,omitempty"`
	SpanTraceID             *string            `json:"span_trace_id,omitempty"`
	ScorerTraceID           *string            `json:"scorer_trace_id,omitempty"`
}

// FeedbackReplaceReq is the body of POST /feedback/replace: new feedback that takes the
// place of feedback_id.
type FeedbackReplaceReq struct {
	FeedbackCreateReq
	FeedbackID string `json:"feedback_id"`
}

// FeedbackCreateRes is its answer.
type FeedbackCreateRes struct {
	ID        string          `json:"id"`
	CreatedAt string          `json:"created_at"`
	WBUserID  string          `json:"wb_user_id"`
	Payload   json.RawMessage `json:"payload"`
}

// FeedbackBatchCreateReq is the body of POST /feedback/batch/create.
type FeedbackBatchCreateReq struct {
	Batch []FeedbackCreateReq `json:"batch"`
}

// FeedbackBatchCreateRes is its answer, one entry per item in order.
type FeedbackBatchCreateRes struct {
	Res []FeedbackCreateRes `json:"res"`
}

// FeedbackQueryReq is the body of POST /feedback/query.
type FeedbackQueryReq struct {
	ProjectID string          `json:"project_id"`
	Fields    []string        `json:"fields,omitempty"`
	Query     json.RawMessage `json:"query,omitempty"`
	SortBy    []SortBy        `json:"sort_by,omitempty"`
	Limit     *int            `json:"limit,omitempty"`
	Offset    *int            `json:"offset,omitempty"`
}

// FeedbackQueryRes is its answer: the page asked for and how many match in all.
type FeedbackQueryRes struct {
	Result     []map[string]any `json:"result"`
	TotalCount int              `json:"total_count"`
}

// FeedbackPurgeReq is the body of POST /feedback/purge.
type FeedbackPurgeReq struct {
	ProjectID string          `json:"project_id"`
	Query     json.RawMessage `json:"query"`
}

// FileContentReadReq is the body of POST /file/content.
type FileContentReadReq struct {
	ProjectID string `json:"project_id"`
	Digest    string `json:"digest"`
}

// FileCreateRes answers /file/create.
type FileCreateRes struct {
	Digest string `json:"digest"`
}

// RefsReadBatchReq is the body of POST /refs/read_batch.
type RefsReadBatchReq struct {
	Refs []string `json:"refs"`
}

// RefsReadBatchRes is its answer.
type RefsReadBatchRes struct {
	Vals []json.RawMessage `json:"vals"`
}

// Empty is the `{}` answer of several routes.
type Empty struct{}

// CompletedCallSchemaForInsert is a call sent whole, start and end together (the v2
// /calls/complete route the Weave Python SDK uses).
type CompletedCallSchemaForInsert struct {
	StartedCallSchemaForInsert
	EndedAt      string          `json:"ended_at"`
	Exception    *string         `json:"exception,omitempty"`
	Output       json.RawMessage `json:"output,omitempty"`
	Summary      json.RawMessage `json:"summary"`
	WBRunStepEnd *int64          `json:"wb_run_step_end,omitempty"`
}

// CallsCompleteReq is the body of POST /v2/{entity}/{project}/calls/complete.
type CallsCompleteReq struct {
	Batch []CompletedCallSchemaForInsert `json:"batch"`
}

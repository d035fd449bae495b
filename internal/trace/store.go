package trace

import (
	"context"
	"encoding/json"
	"errors"
)

// Store is what the trace service needs from storage. The service validates requests, computes
// digests and derived fields; the store persists and queries. SQLStore implements it on
// internal/db (SQLite and PostgreSQL).
type Store interface {
	// Objects.
	InsertObject(ctx context.Context, o ObjectRow) (created bool, err error)
	ReadObject(ctx context.Context, project, objectID string, sel VersionSelector) (ObjectRow, error)
	QueryObjects(ctx context.Context, project string, q ObjectQuery) ([]ObjectRow, error)
	DeleteObjects(ctx context.Context, project, objectID string, digests []string, at string) ([]DeletedVersion, error)
	AddTags(ctx context.Context, project, objectID, digest string, tags []string, at string) error
	RemoveTags(ctx context.Context, project, objectID, digest string, tags []string) error
	SetAliases(ctx context.Context, project, objectID, digest string, aliases []string, at string) error
	RemoveAliases(ctx context.Context, project, objectID string, aliases []string) error
	ListTags(ctx context.Context, project string) ([]string, error)
	ListAliases(ctx context.Context, project string) ([]string, error)
	// ListProjects lists the projects of entity that hold calls or objects.
	ListProjects(ctx context.Context, entity string) ([]string, error)
	TagsAndAliases(ctx context.Context, project string, keys []ObjectKey) (map[ObjectKey][]string, map[ObjectKey][]string, error)

	// Tables.
	InsertTable(ctx context.Context, project, digest string, rowDigests []string, rows []RowData, at string) error
	TableRowDigests(ctx context.Context, project, digest string) ([]string, error)
	QueryTable(ctx context.Context, project, digest string, q TableQuery) ([]TableRowSchema, error)
	TableStats(ctx context.Context, project string, digests []string) ([]TableStats, error)
	RowsExist(ctx context.Context, project string, digests []string) (missing []string, err error)
	ReadRows(ctx context.Context, project string, digests []string) (map[string]json.RawMessage, error)

	// Calls.
	UpsertCalls(ctx context.Context, writes []CallWrite) error
	// UpsertCallStream writes, in one transaction, the writes next returns, until it returns
	// none (then commits) or an error (then rolls back and returns it). Ingest decodes a
	// batch's later items while its earlier ones are written (CallUpsertBatchBody).
	UpsertCallStream(ctx context.Context, next func() ([]CallWrite, error)) error
	QueryCalls(ctx context.Context, project string, q CallQuery, each func(CallRow) error) error
	CountCalls(ctx context.Context, project string, q CallQuery) (count int, size int64, err error)
	UpdateCall(ctx context.Context, project, id string, displayName *string) (bool, error)
	DeleteCalls(ctx context.Context, project string, ids []string, at string) (int, error)
	UsageCalls(ctx context.Context, project string, q CallQuery, withStart bool) ([]UsageCall, error)
	// QueryCallUsage streams the id, start and usage counts of the calls matching q in the
	// order of q.Sort's keys after the first, then id (the cost sort, costsort.go).
	QueryCallUsage(ctx context.Context, project string, q CallQuery, each func(id, startedAt string, usage []ModelCount) error) error

	// Files.
	PutFile(ctx context.Context, project, digest, name string, content []byte, at string) error
	GetFile(ctx context.Context, project, digest string) ([]byte, error)

	// Costs.
	InsertCosts(ctx context.Context, costs []Cost) error
	QueryCosts(ctx context.Context, project string, q GenericQuery) ([]Cost, error)
	PurgeCosts(ctx context.Context, project string, cond Node) (int, error)
	Prices(ctx context.Context, project string, models []string) (map[string][]Cost, error)

	// Feedback.
	InsertFeedback(ctx context.Context, fs []FeedbackRow) error
	ReplaceFeedback(ctx context.Context, f FeedbackRow) (bool, error)
	QueryFeedback(ctx context.Context, project string, q GenericQuery) ([]FeedbackRow, error)
	CountFeedback(ctx context.Context, project string, cond Node) (int, error)
	PurgeFeedback(ctx context.Context, project string, cond Node) (int, error)

	// Request fields Hone does not know, kept as sent (see drift.go).
	InsertExtraFields(ctx context.Context, rows []ExtraFieldsRow) error
	ExtraFields(ctx context.Context, project, target string) ([]ExtraFieldsRow, error)
}

// ErrConflict is returned when an insert names an id that exists with other content.
var ErrConflict = errors.New("trace: conflict")

// Errors of the store.
var (
	ErrNotFound = errors.New("trace: not found")
	ErrDeleted  = errors.New("trace: deleted")
)

// ObjectRow is one stored object version.
type ObjectRow struct {
	ProjectID       string
	ObjectID        string
	Digest          string
	Kind            string
	BaseObjectClass string
	LeafObjectClass string
	Val             []byte // compact JSON, key order as received
	SizeBytes       int64  // length of Python's json.dumps text of val
	CreatedAt       string
	VersionIndex    int
	IsLatest        bool
	DeletedAt       string
	WBUserID        string
}

// ObjectKey names an object version.
type ObjectKey struct{ ObjectID, Digest string }

// VersionSelector picks a version of an object: a digest, "latest", "v<N>" or an alias.
type VersionSelector struct {
	Digest  string
	Latest  bool
	Version int // >= 0 when selecting by version index
	Alias   string
}

// ObjectQuery is a validated /objs/query.
type ObjectQuery struct {
	Filter       ObjectVersionFilter
	Sort         []SortBy // fields object_id/created_at, directions asc/desc
	Limit        int      // -1 for none
	Offset       int
	MetadataOnly bool
}

// RowData is a table row to store.
type RowData struct {
	Digest string
	Val    []byte
}

// TableQuery is a validated /table/query.
type TableQuery struct {
	RowDigests []string
	Sort       []SortBy
	Limit      int // -1 for none
	Offset     int
}

// CallWrite is one start or end of a call.
type CallWrite struct {
	Project string
	Start   *CallStartRow
	End     *CallEndRow
}

// CallStartRow is a validated call start.
type CallStartRow struct {
	ID, TraceID, ParentID, ThreadID, TurnID, OpName, DisplayName, StartedAt string
	Attributes, Inputs, OtelDump                                            []byte
	InputRefs                                                               []byte // JSON array
	WBUserID, WBRunID                                                       string
	WBRunStep                                                               *int64
	Cumulative                                                              bool
}

// CallEndRow is a validated call end.
type CallEndRow struct {
	ID, TraceID, EndedAt, Exception, DisplayName string
	HasException                                 bool
	Output, Summary                              []byte
	OutputRefs                                   []byte // JSON array
	Usage                                        string // summary_usage (usagecol.go)
	WBRunStepEnd                                 *int64
}

// CallQuery is a validated calls query.
type CallQuery struct {
	Filter CallsFilter
	Cond   Node
	Sort   []SortBy
	Limit  int // -1 for none
	Offset int
}

// CallRow is a stored call.
type CallRow struct {
	CallSchema
	Cumulative bool
}

// GenericQuery is a query over costs or feedback.
type GenericQuery struct {
	Cond   Node
	Sort   []SortBy
	Limit  int
	Offset int
}

// FeedbackRow is stored feedback.
type FeedbackRow struct {
	ProjectID, ID, WeaveRef, WBUserID, CreatedAt, FeedbackType  string
	Creator, AnnotationRef, RunnableRef, CallRef, TriggerRef    *string
	QueueID                                                     *string
	Payload                                                     []byte
	ScorerTags                                                  []byte // JSON array of strings
	ScorerTagReasons, ScorerTagConfidences                      []byte // JSON objects
	ScorerRatings, ScorerRatingReasons, ScorerRatingConfidences []byte // JSON objects
	SpanAgentName, SpanAgentVersion, SpanStatusCode             string
	SpanConversationID, SpanTraceID, ScorerTraceID              string
}

// ExtraFieldsRow is a set of request fields Hone did not know, kept as sent: the route, the
// stored thing they came with (target, e.g. "call:<id>"; "" for the request as a whole) and
// the fields (a JSON object from each field's path, relative to the item, to its value).
type ExtraFieldsRow struct {
	ProjectID, Route, Target, CreatedAt string
	Fields                              []byte
}

// TableSorter is implemented by stores that can list a table's positions in a sort order, so
// the service can cache the order of an immutable table and serve sorted pages by position.
type TableSorter interface {
	SortedTablePositions(ctx context.Context, project, digest string, sorts []SortBy) ([]int32, error)
	TableRowsAt(ctx context.Context, project, digest string, positions []int32) ([]TableRowSchema, error)
}

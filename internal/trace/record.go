package trace

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/db"
)

// RecordedCall is a finished call that Hone itself records (a traced chat completion, a
// logged trajectory): it is written whole, start and end in one transaction.
type RecordedCall struct {
	Project    string // <entity>/<project>
	OpName     string
	Started    time.Time
	Ended      time.Time
	Attributes any // JSON-marshalled; nil is {}
	Inputs     json.RawMessage
	Output     json.RawMessage
	Summary    any    // JSON-marshalled; nil is {}
	Exception  string // "" when the call succeeded
	UserID     string // wb_user_id, "" when none
}

// RecordCall writes a finished call under new call and trace ids, and returns its id. The
// caller has authorised the project; a call is recorded whole or not at all.
func (s *Service) RecordCall(ctx context.Context, c RecordedCall) (id string, err error) {
	ids, err := s.RecordCalls(ctx, []RecordedCall{c})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// RecordCalls writes several finished calls in one transaction and returns their ids.
func (s *Service) RecordCalls(ctx context.Context, calls []RecordedCall) ([]string, error) {
	var batch CallCreateBatchReq
	ids := make([]string, len(calls))
	for i, c := range calls {
		attrs, err := marshalOr(c.Attributes)
		if err != nil {
			return nil, err
		}
		summary, err := marshalOr(c.Summary)
		if err != nil {
			return nil, err
		}
		inputs := c.Inputs
		if !json.Valid(inputs) {
			inputs = json.RawMessage(`{}`)
		}
		id, traceID := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
		ids[i] = id
		started := db.FormatTime(c.Started)
		start := StartedCallSchemaForInsert{ProjectID: c.Project, ID: &id, TraceID: &traceID, OpName: c.OpName,
			StartedAt: started, Attributes: attrs, Inputs: inputs}
		if c.UserID != "" {
			user := c.UserID
			start.WBUserID = &user
		}
		end := EndedCallSchemaForInsert{ProjectID: c.Project, ID: id, EndedAt: db.FormatTime(c.Ended), Output: c.Output,
			Summary: summary, TraceID: &traceID, StartedAtHint: &started}
		if c.Exception != "" {
			ex := c.Exception
			end.Exception = &ex
		}
		var a, b CallBatchItem
		a.Mode, a.Req.Start = "start", &start
		b.Mode, b.Req.End = "end", &end
		batch.Batch = append(batch.Batch, a, b)
	}
	if len(batch.Batch) == 0 {
		return ids, nil
	}
	if _, err := s.CallUpsertBatch(ctx, batch, func(string, string) error { return nil }); err != nil {
		return nil, err
	}
	return ids, nil
}

func marshalOr(v any) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage(`{}`), nil
	}
	return json.Marshal(v)
}

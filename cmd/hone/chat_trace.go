package main

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/chatapi"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/trace"
)

// chatTracer records chat completions in the trace store as calls named like the Weave
// OpenAI integration's (`openai.chat.completions.create`), with the token usage under the
// model's name in summary.usage, so /trace/usage and /calls/usage count inference.
type chatTracer struct{ svc *trace.Service }

// chatOpName is the op name of traced completions.
const chatOpName = "openai.chat.completions.create"

func (t chatTracer) TraceChat(ctx context.Context, c chatapi.TracedCall) error {
	output, err := json.Marshal(c.Output)
	if err != nil {
		return err
	}
	u := c.Usage
	summary, err := json.Marshal(map[string]any{"usage": map[string]any{c.Model: map[string]any{
		"requests": 1, "prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens,
	}}})
	if err != nil {
		return err
	}
	attrs, _ := json.Marshal(map[string]any{"hone": map[string]any{"request_id": c.RequestID, "model": c.Model, "source": "chat.completions"}})
	inputs := c.Inputs
	if !json.Valid(inputs) {
		inputs = json.RawMessage(`{}`)
	}
	id, traceID := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
	started := db.FormatTime(c.Started)
	start := trace.StartedCallSchemaForInsert{ProjectID: c.Project, ID: &id, TraceID: &traceID, OpName: chatOpName,
		StartedAt: started, Attributes: attrs, Inputs: inputs}
	if c.PrincipalUserID != "" {
		user := c.PrincipalUserID
		start.WBUserID = &user
	}
	end := trace.EndedCallSchemaForInsert{ProjectID: c.Project, ID: id, EndedAt: db.FormatTime(c.Ended), Output: output,
		Summary: summary, TraceID: &traceID, StartedAtHint: &started}
	if c.Exception != "" {
		ex := c.Exception
		end.Exception = &ex
	}
	// Start and end in one transaction: a completion is recorded whole or not at all.
	var batch trace.CallCreateBatchReq
	var s, e trace.CallBatchItem
	s.Mode, s.Req.Start = "start", &start
	e.Mode, e.Req.End = "end", &end
	batch.Batch = []trace.CallBatchItem{s, e}
	_, err = t.svc.CallUpsertBatch(ctx, batch, func(string, string) error { return nil })
	return err
}

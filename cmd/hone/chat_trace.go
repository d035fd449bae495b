package main

import (
	"context"
	"encoding/json"

	"github.com/honeai/hone/internal/chatapi"
	"github.com/honeai/hone/internal/trace"
)

// chatTracer records chat completions in the trace store as calls named like the Weave
// OpenAI integration's (`openai.chat.completions.create`; a Responses API request
// `openai.responses.create` with the response object as output), with the token usage under the
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
	op, source := chatOpName, "chat.completions"
	if c.Op != "" {
		op, source = c.Op, "responses"
	}
	_, err = t.svc.RecordCall(ctx, trace.RecordedCall{
		Project: c.Project, OpName: op, Started: c.Started, Ended: c.Ended,
		Attributes: map[string]any{"hone": map[string]any{"request_id": c.RequestID, "model": c.Model, "source": source}},
		Inputs:     c.Inputs, Output: output,
		Summary: map[string]any{"usage": map[string]any{c.Model: map[string]any{
			"requests": 1, "prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens,
		}}},
		Exception: c.Exception, UserID: c.PrincipalUserID,
	})
	return err
}

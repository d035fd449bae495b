package chatapi

import (
	"encoding/json"
	"fmt"
	"net/http"
)

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        delta     `json:"delta"`
	Logprobs     *Logprobs `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
	StopReason   any       `json:"stop_reason,omitempty"`
	TokenIDs     []int     `json:"token_ids,omitempty"`
}

type delta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	Reasoning *string         `json:"reasoning,omitempty"`
	ToolCalls []deltaToolCall `json:"tool_calls,omitempty"`
}

type chunk struct {
	ID             string        `json:"id"`
	Object         string        `json:"object"`
	Created        int64         `json:"created"`
	Model          string        `json:"model"`
	Choices        []chunkChoice `json:"choices"`
	Usage          *Usage        `json:"usage,omitempty"`
	PromptTokenIDs []int         `json:"prompt_token_ids,omitempty"`
}

// streamState is what one choice has streamed.
type streamState struct {
	sentTokens, sentLogprobs int
	done                     bool
	calls                    bool // a tool call was streamed
}

// stream answers with server-sent events as vLLM does.
func (ru *run) stream(w http.ResponseWriter, r *http.Request, trace func(*http.Request, *run, *Response, string)) {
	req := ru.pr.plan.req
	sse := startSSE(w)
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage != nil && *req.StreamOptions.IncludeUsage
	continuous := req.StreamOptions != nil && req.StreamOptions.ContinuousUsageStats
	send := func(c chunk) bool { return sse.data(c) }
	base := func() chunk {
		return chunk{ID: ru.id, Object: "chat.completion.chunk", Created: ru.created, Model: ru.pr.name}
	}
	usageFor := func(i int) *Usage {
		if !continuous {
			return nil
		}
		u := Usage{PromptTokens: len(ru.pr.ids), CompletionTokens: len(ru.choices[i].tokens), PromptTokensDetails: &PromptDetails{CachedTokens: ru.h.CachedTokens}}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		return &u
	}
	states := make([]streamState, len(ru.choices))
	for i := range ru.choices {
		empty := ""
		c := base()
		c.Choices = []chunkChoice{{Index: i, Delta: delta{Role: "assistant", Content: &empty}}}
		if req.ReturnTokenIDs {
			c.PromptTokenIDs = ru.pr.ids
		}
		c.Usage = usageFor(i)
		if !send(c) {
			return
		}
		if req.Echo {
			if e := lastContent(req.Messages, "assistant"); e != "" {
				c := base()
				c.Choices = []chunkChoice{{Index: i, Delta: delta{Content: &e}}}
				send(c)
			}
		}
	}
	for ev := range ru.h.Events() {
		i := ru.apply(ev)
		if i < 0 || states[i].done {
			continue
		}
		cs := ru.choices[i]
		st := &states[i]
		finished := cs.finish != ""
		cc := chunkChoice{Index: i}
		if ev.Text.Reasoning != "" {
			d := ev.Text.Reasoning
			cc.Delta.Reasoning = &d
		}
		if ev.Text.Content != "" {
			d := ev.Text.Content
			cc.Delta.Content = &d
		}
		if req.Logprobs && len(cs.logprobs) > st.sentLogprobs {
			cc.Logprobs = &Logprobs{Content: cs.logprobs[st.sentLogprobs:]}
			st.sentLogprobs = len(cs.logprobs)
		}
		if req.ReturnTokenIDs && len(cs.tokens) > st.sentTokens {
			cc.TokenIDs = cs.tokens[st.sentTokens:]
			st.sentTokens = len(cs.tokens)
		}
		// Tool calls: a call's first delta has its id, type and name with empty arguments; its
		// arguments follow in deltas of their own, one chunk each.
		var tools []deltaToolCall
		for _, d := range ev.Text.Calls {
			if d.ID != "" {
				empty := ""
				tools = append(tools, deltaToolCall{Index: d.Index, ID: d.ID, Type: "function", Function: deltaFunction{Name: d.Name, Arguments: &empty}})
				st.calls = true
			}
			if d.Arguments != "" {
				a := d.Arguments
				tools = append(tools, deltaToolCall{Index: d.Index, Function: deltaFunction{Arguments: &a}})
			}
		}
		var finish chunkChoice
		if finished {
			f := cs.finish
			if st.calls {
				f = ru.pr.plan.tools.finishReason(f)
			}
			finish.FinishReason = &f
			finish.StopReason = cs.stopReason
			st.done = true
		}
		var ccs []chunkChoice
		if len(tools) > 0 {
			cc.Delta.ToolCalls = tools[:1]
			ccs = append(ccs, cc)
			for _, t := range tools[1:] {
				ccs = append(ccs, chunkChoice{Index: i, Delta: delta{ToolCalls: []deltaToolCall{t}}})
			}
		} else {
			ccs = append(ccs, cc)
		}
		last := &ccs[len(ccs)-1]
		last.FinishReason, last.StopReason = finish.FinishReason, finish.StopReason
		if len(ccs) == 1 && cc.Delta.Content == nil && cc.Delta.Reasoning == nil && cc.Delta.ToolCalls == nil && last.FinishReason == nil && cc.TokenIDs == nil && cc.Logprobs == nil {
			continue // nothing new to say (held back or a partial character)
		}
		gone := false
		for _, one := range ccs {
			c := base()
			c.Choices = []chunkChoice{one}
			c.Usage = usageFor(i)
			if !send(c) {
				gone = true
				break
			}
		}
		if gone {
			for ev := range ru.h.Events() { // the client is gone: the engine aborts; drain
				ru.apply(ev)
			}
			trace(r, ru, ru.response(), "the client went away before the completion finished")
			return
		}
	}
	if r.Context().Err() != nil {
		trace(r, ru, ru.response(), "the client went away before the completion finished")
		return
	}
	trace(r, ru, ru.response(), "")
	if includeUsage {
		u := ru.usage()
		c := base()
		c.Choices = []chunkChoice{}
		c.Usage = &u
		send(c)
	}
	sse.done()
}

// sseWriter writes server-sent events.
type sseWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
}

// startSSE answers 200 with an event stream.
func startSSE(w http.ResponseWriter) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sseWriter{w: w, flusher: f}
}

// event writes v as an event's data (after an `event:` line when name is not ""); false when
// the client is gone.
func (s *sseWriter) event(name string, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	if name != "" {
		_, err = fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	} else {
		_, err = fmt.Fprintf(s.w, "data: %s\n\n", b)
	}
	if err != nil {
		return false
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return true
}

// data writes v as an event's data.
func (s *sseWriter) data(v any) bool { return s.event("", v) }

// done ends an OpenAI stream: data: [DONE].
func (s *sseWriter) done() {
	fmt.Fprint(s.w, "data: [DONE]\n\n")
	if s.flusher != nil {
		s.flusher.Flush()
	}
}

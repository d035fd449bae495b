package chatapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/membudget"
	"github.com/honeai/hone/internal/respstore"
)

// POST /v1/responses: OpenAI's Responses API, the interface of OpenAI's newer SDK examples
// and of agent frameworks (the OpenAI Agents SDK). A request is turned into a chat request
// (instructions as the system message, the stored conversation of previous_response_id, input
// items as messages, function calls and their outputs as assistant tool calls and tool
// messages, function tools, tool_choice, text.format as response_format) and run as one; its
// answer is turned into output items (reasoning, a message of output_text, function calls),
// streamed as the Responses events when asked, and stored (store, by default) with the
// conversation it ends, for previous_response_id and GET/DELETE /v1/responses/{id}
// (internal/respstore). Conversations objects, background responses and stored prompts are
// refused, naming the field.

// ResponsesOp is the op of a traced Responses API call, as Weave's OpenAI integration names it.
const ResponsesOp = "openai.responses.create"

// ResponsesRequest is the body of POST /v1/responses (unknown fields are ignored).
type ResponsesRequest struct {
	Model             string            `json:"model"`
	Input             json.RawMessage   `json:"input"`
	Instructions      *string           `json:"instructions"`
	MaxOutputTokens   *int              `json:"max_output_tokens"`
	Temperature       *float64          `json:"temperature"`
	TopP              *float64          `json:"top_p"`
	TopLogprobs       *int              `json:"top_logprobs"`
	Include           []string          `json:"include"`
	Tools             []json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	Text              *struct {
		Format    json.RawMessage `json:"format"`
		Verbosity *string         `json:"verbosity"`
	} `json:"text"`
	Reasoning *struct {
		Effort *string `json:"effort"`
	} `json:"reasoning"`
	Stream             bool            `json:"stream"`
	Store              *bool           `json:"store"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Background         bool            `json:"background"`
	Prompt             json.RawMessage `json:"prompt"`
	Metadata           json.RawMessage `json:"metadata"`
	User               *string         `json:"user"`
	Truncation         *string         `json:"truncation"`
	ServiceTier        *string         `json:"service_tier"`
	// vLLM's extras.
	Seed     *json.Number `json:"seed"`
	TopK     *int         `json:"top_k"`
	MinP     *float64     `json:"min_p"`
	Priority json.Number  `json:"priority"`
}

// ResponseObject is a response of the Responses API.
type ResponseObject struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	Model              string          `json:"model"`
	Output             OutputItems     `json:"output"`
	Usage              *ResponsesUsage `json:"usage"`
	Error              any             `json:"error"`
	IncompleteDetails  any             `json:"incomplete_details"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	Tools              []any           `json:"tools"`
	ToolChoice         any             `json:"tool_choice"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	Text               map[string]any  `json:"text"`
	Reasoning          map[string]any  `json:"reasoning"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Store              bool            `json:"store"`
	Truncation         string          `json:"truncation"`
	Metadata           json.RawMessage `json:"metadata"`
	User               *string         `json:"user"`
}

// OutputItems are a response's output items: *ReasoningItem, *MessageItem and
// *FunctionCallItem. Each item type lists its fields in the order of their names, as the
// items were first written as maps (stored responses and clients' tests compare bytes).
type OutputItems []OutputItem

// JSONSchemaAlias documents the items as objects in the OpenAPI document.
func (OutputItems) JSONSchemaAlias() any { return []map[string]any{} }

// OutputItem is one output item of a response.
type OutputItem interface{ outputItem() }

// ReasoningItem is the model's reasoning (its <think> block) as an output item.
type ReasoningItem struct {
	Content []ReasoningText `json:"content"`
	ID      string          `json:"id"`
	Status  string          `json:"status"`
	Summary []any           `json:"summary"` // always empty
	Type    string          `json:"type"`    // reasoning
}

// ReasoningText is a reasoning item's text.
type ReasoningText struct {
	Text string `json:"text"`
	Type string `json:"type"` // reasoning_text
}

// MessageItem is the assistant's answer as an output item.
type MessageItem struct {
	Content []OutputText `json:"content"`
	ID      string       `json:"id"`
	Role    string       `json:"role"` // assistant
	Status  string       `json:"status"`
	Type    string       `json:"type"` // message
}

// OutputText is a message item's text, with its tokens' logprobs when asked for.
type OutputText struct {
	Annotations []any            `json:"annotations"` // always empty
	Logprobs    *[]OutputLogprob `json:"logprobs,omitempty"`
	Text        string           `json:"text"`
	Type        string           `json:"type"` // output_text
}

// OutputLogprob is one token's logprob in an output text.
type OutputLogprob struct {
	Bytes       []int              `json:"bytes"`
	Logprob     float64            `json:"logprob"`
	Token       string             `json:"token"`
	TopLogprobs []OutputTopLogprob `json:"top_logprobs"`
}

// OutputTopLogprob is one alternative of an output token.
type OutputTopLogprob struct {
	Bytes   []int   `json:"bytes"`
	Logprob float64 `json:"logprob"`
	Token   string  `json:"token"`
}

// FunctionCallItem is a function call as an output item.
type FunctionCallItem struct {
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Type      string `json:"type"` // function_call
}

func (*ReasoningItem) outputItem()    {}
func (*MessageItem) outputItem()      {}
func (*FunctionCallItem) outputItem() {}

// chatMessage is a chat message of the conversation a Responses request runs as and a
// stored response keeps (fields in the order of their names, as the messages were first
// maps: a chat template may print a message or its calls as JSON).
type chatMessage struct {
	Content    any            `json:"content"` // a string, content parts, or null beside calls
	Role       string         `json:"role"`
	ToolCallID *string        `json:"tool_call_id,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
}

// chatToolCall is an assistant message's function call.
type chatToolCall struct {
	Function struct {
		Arguments string `json:"arguments"`
		Name      string `json:"name"`
	} `json:"function"`
	ID   string `json:"id"`
	Type string `json:"type"` // function
}

// ResponsesUsage is a response's token usage.
type ResponsesUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// textOf reads the text of a content: a string, or a list of text parts (input_text,
// output_text, text); another part (an image) is kept as an image_url part for the chat
// template to refuse on a text-only model.
func textOf(raw json.RawMessage, where string) (json.RawMessage, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return json.Marshal(s)
	}
	var parts []map[string]any
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, bad(where, "`%s` must be a string or a list of content parts.", where)
	}
	var out []map[string]any
	for i, p := range parts {
		switch p["type"] {
		case "input_text", "output_text", "text":
			t, _ := p["text"].(string)
			out = append(out, map[string]any{"type": "text", "text": t})
		case "input_image":
			out = append(out, map[string]any{"type": "image_url", "image_url": map[string]any{"url": p["image_url"]}})
		default:
			return nil, bad(fmt.Sprintf("%s[%d].type", where, i), "Content part type %v is not supported (input_text, output_text).", p["type"])
		}
	}
	return json.Marshal(out)
}

// chatRequest turns a Responses request into the chat request it runs as: its instructions,
// then history (the conversation of the response it continues, as chat messages), then its
// input, which it also answers as chat messages.
func (rr *ResponsesRequest) chatRequest(history []chatMessage) (*Request, []chatMessage, error) {
	switch {
	case len(rr.Conversation) > 0 && string(rr.Conversation) != "null":
		return nil, nil, bad("conversation", "conversation is not supported: Hone stores no conversations; send the conversation in `input`.")
	case rr.Background:
		return nil, nil, bad("background", "background responses are not supported.")
	case len(rr.Prompt) > 0 && string(rr.Prompt) != "null":
		return nil, nil, bad("prompt", "stored prompts are not supported.")
	}
	var msgs []chatMessage
	if len(rr.Input) == 0 || string(rr.Input) == "null" {
		return nil, nil, bad("input", "Field required: `input`")
	}
	var one string
	if json.Unmarshal(rr.Input, &one) == nil {
		msgs = append(msgs, chatMessage{Role: "user", Content: one})
	} else {
		var items []map[string]json.RawMessage
		if err := json.Unmarshal(rr.Input, &items); err != nil {
			return nil, nil, bad("input", "`input` must be a string or a list of input items.")
		}
		for i, it := range items {
			where := fmt.Sprintf("input[%d]", i)
			var typ, role string
			json.Unmarshal(it["type"], &typ)
			json.Unmarshal(it["role"], &role)
			switch {
			case typ == "message" || typ == "" && role != "":
				switch role {
				case "user", "system", "assistant":
				case "developer":
					role = "system"
				default:
					return nil, nil, bad(where+".role", "Input message role %q is not supported (user, system, developer, assistant).", role)
				}
				content, err := textOf(it["content"], where+".content")
				if err != nil {
					return nil, nil, err
				}
				msgs = append(msgs, chatMessage{Role: role, Content: content})
			case typ == "function_call":
				var name, args, callID string
				json.Unmarshal(it["name"], &name)
				json.Unmarshal(it["arguments"], &args)
				json.Unmarshal(it["call_id"], &callID)
				if name == "" || callID == "" {
					return nil, nil, bad(where, "A function_call item needs name and call_id.")
				}
				call := chatToolCall{ID: callID, Type: "function"}
				call.Function.Name, call.Function.Arguments = name, args
				// Calls in a row are one assistant turn.
				if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" && msgs[n-1].ToolCalls != nil {
					msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
				} else {
					msgs = append(msgs, chatMessage{Role: "assistant", ToolCalls: []chatToolCall{call}})
				}
			case typ == "function_call_output":
				var callID string
				json.Unmarshal(it["call_id"], &callID)
				output, err := textOf(it["output"], where+".output")
				if err != nil {
					return nil, nil, err
				}
				msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: &callID, Content: output})
			case typ == "reasoning":
				// The model's earlier reasoning: chat templates drop it from past turns.
			case typ == "item_reference":
				return nil, nil, bad(where+".type", "item_reference is not supported: Hone stores no items; send the item itself.")
			default:
				return nil, nil, bad(where+".type", "Input item type %q is not supported (message, function_call, function_call_output, reasoning).", typ)
			}
		}
	}
	input := msgs
	msgs = append(append([]chatMessage(nil), history...), input...)
	if rr.Instructions != nil && *rr.Instructions != "" {
		msgs = append([]chatMessage{{Role: "system", Content: *rr.Instructions}}, msgs...)
	}
	messages, err := json.Marshal(msgs)
	if err != nil {
		return nil, nil, err
	}
	req := &Request{Common: Common{Model: rr.Model, Stream: rr.Stream, MaxTokens: rr.MaxOutputTokens, Temperature: rr.Temperature,
		TopP: rr.TopP, TopK: rr.TopK, MinP: rr.MinP, Seed: rr.Seed, User: rr.User, Priority: rr.Priority},
		Messages: messages, ParallelToolCalls: rr.ParallelToolCalls, ServiceTier: rr.ServiceTier}
	if rr.Reasoning != nil {
		req.ReasoningEffort = rr.Reasoning.Effort
	}
	for _, inc := range rr.Include {
		if inc == "message.output_text.logprobs" {
			req.Logprobs = true
		}
	}
	if rr.TopLogprobs != nil && *rr.TopLogprobs > 0 {
		req.Logprobs = true
		k := json.Number(fmt.Sprint(*rr.TopLogprobs))
		req.TopLogprobs = &k
	}
	if len(rr.Tools) > 0 {
		var tools []map[string]any
		for i, raw := range rr.Tools {
			var t map[string]any
			if err := json.Unmarshal(raw, &t); err != nil {
				return nil, nil, bad(fmt.Sprintf("tools[%d]", i), "A tool must be an object.")
			}
			if t["type"] != "function" {
				return nil, nil, bad(fmt.Sprintf("tools[%d].type", i), "Tool type %v is not supported: Hone runs function tools only.", t["type"])
			}
			fn := map[string]any{}
			for _, k := range []string{"name", "description", "parameters", "strict"} {
				if v, ok := t[k]; ok {
					fn[k] = v
				}
			}
			tools = append(tools, map[string]any{"type": "function", "function": fn})
		}
		req.Tools, _ = json.Marshal(tools)
	}
	if len(rr.ToolChoice) > 0 && string(rr.ToolChoice) != "null" {
		var s string
		if json.Unmarshal(rr.ToolChoice, &s) == nil {
			req.ToolChoice = rr.ToolChoice
		} else {
			var tc struct {
				Type string `json:"type"`
				Name string `json:"name"`
			}
			if json.Unmarshal(rr.ToolChoice, &tc) != nil || tc.Type != "function" || tc.Name == "" {
				return nil, nil, bad("tool_choice", "tool_choice must be auto, none, required or {\"type\": \"function\", \"name\": ...}.")
			}
			req.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]any{"name": tc.Name}})
		}
	}
	forced := string(rr.ToolChoice) == `"required"` || len(req.ToolChoice) > 0 && req.ToolChoice[0] == '{'
	// text.format shapes a text answer, which a required or named tool call leaves out: as
	// OpenAI takes the two together (the Agents SDK sends both), the call's constraint wins.
	if rr.Text != nil && len(rr.Text.Format) > 0 && string(rr.Text.Format) != "null" && !forced {
		var f map[string]any
		if err := json.Unmarshal(rr.Text.Format, &f); err != nil {
			return nil, nil, bad("text.format", "text.format must be an object.")
		}
		switch f["type"] {
		case "text":
		case "json_object":
			req.ResponseFormat = json.RawMessage(`{"type":"json_object"}`)
		case "json_schema":
			if _, ok := f["schema"].(map[string]any); !ok {
				return nil, nil, bad("text.format.schema", "text.format of type json_schema needs a `schema` object.")
			}
			js := map[string]any{}
			for _, k := range []string{"name", "schema", "strict", "description"} {
				if v, ok := f[k]; ok {
					js[k] = v
				}
			}
			req.ResponseFormat, _ = json.Marshal(map[string]any{"type": "json_schema", "json_schema": js})
		default:
			return nil, nil, bad("text.format.type", "text.format type %v is not supported (text, json_object, json_schema).", f["type"])
		}
	}
	return req, input, nil
}

// renameParam turns a chat request's field names in an error into the Responses request's.
func renameParam(err error) error {
	ae, ok := apierror.As(err)
	if !ok || ae.Param == "" {
		return err
	}
	for _, ft := range [][2]string{{"max_tokens", "max_output_tokens"}, {"response_format.json_schema", "text.format"}, {"response_format", "text.format"}, {"messages", "input"}} {
		from, to := ft[0], ft[1]
		if ae.Param == from || strings.HasPrefix(ae.Param, from+".") {
			ae.Param = to + strings.TrimPrefix(ae.Param, from)
			if from == "max_tokens" {
				ae.Message = strings.ReplaceAll(ae.Message, "max_tokens", "max_output_tokens")
			}
			break
		}
	}
	return ae
}

func (a *API) responses(w http.ResponseWriter, r *http.Request) {
	var rr ResponsesRequest
	body, err := decodeBody(r, &rr)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	var history []chatMessage
	if rr.PreviousResponseID != nil && *rr.PreviousResponseID != "" {
		if why := httpx.BadText(*rr.PreviousResponseID); why != "" {
			apierror.Write(w, r, bad("previous_response_id", "previous_response_id %s.", why))
			return
		}
		if a.Responses == nil {
			apierror.Write(w, r, bad("previous_response_id", "previous_response_id is not supported: this server stores no responses; send the conversation in `input`."))
			return
		}
		prev, err := a.Responses.Get(r.Context(), entityOf(r), *rr.PreviousResponseID)
		if errors.Is(err, respstore.ErrNotFound) {
			apierror.Write(w, r, apierror.NotFound("previous_response_id", "Previous response with id '%s' not found.", *rr.PreviousResponseID))
			return
		} else if err != nil {
			apierror.Write(w, r, err)
			return
		}
		if err := json.Unmarshal(prev.Conversation, &history); err != nil {
			apierror.Write(w, r, err)
			return
		}
	}
	req, input, err := rr.chatRequest(history)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	pr, err := a.prepareChat(r.Context(), principalOf(r), r.Header.Get(TraceHeader), req, body)
	if err != nil {
		apierror.Write(w, r, renameParam(err))
		return
	}
	id := "resp_" + strings.ReplaceAll(httpx.RequestID(r.Context()), "-", "")
	run, ok := a.submit(w, r, pr, id)
	if !ok {
		return
	}
	rs := &responseState{rr: &rr, run: run, id: id, created: time.Now().Unix(), history: history, input: input}
	run.traceAs = func(resp *Response) any { return rs.object(resp) }
	if rr.Stream {
		rs.stream(w, r, a)
		return
	}
	resp, ok := a.finish(w, r, run)
	if !ok {
		return
	}
	o := rs.object(resp)
	a.storeResponse(r, rs, o)
	httpx.WriteJSON(w, http.StatusOK, o)
}

// ResponseStore keeps stored responses (respstore.Store).
type ResponseStore interface {
	Put(ctx context.Context, r respstore.Record) error
	Get(ctx context.Context, entity, id string) (respstore.Record, error)
	Delete(ctx context.Context, entity, id string) error
}

func entityOf(r *http.Request) string { return principalOf(r).Entity }

// storeResponse keeps a finished response when the request asks (store, true by default):
// its conversation (the one it continued, its input, its output as chat messages), its input
// items and the response. A failure is logged; the response is still answered.
func (a *API) storeResponse(r *http.Request, rs *responseState, o *ResponseObject) {
	if a.Responses == nil || rs.rr.Store != nil && !*rs.rr.Store {
		return
	}
	conv := append(append(append([]chatMessage(nil), rs.history...), rs.input...), outputMessages(o)...)
	cj, err := json.Marshal(conv)
	if err != nil {
		return
	}
	oj, err := json.Marshal(o)
	if err != nil {
		return
	}
	items := inputItems(rs.rr.Input, rs.id)
	ij, _ := json.Marshal(items)
	if err := a.Responses.Put(context.WithoutCancel(r.Context()), respstore.Record{ID: o.ID, Entity: entityOf(r), Model: o.Model,
		Conversation: cj, InputItems: ij, Response: oj}); err != nil {
		a.Logger.ErrorContext(r.Context(), "response not stored", "id", o.ID, "err", err)
	}
}

// outputMessages is a response's output as the chat messages of the conversation it ends:
// one assistant message with its text and its function calls (reasoning is left out).
func outputMessages(o *ResponseObject) []chatMessage {
	var text strings.Builder
	var calls []chatToolCall
	for _, item := range o.Output {
		switch item := item.(type) {
		case *MessageItem:
			for _, c := range item.Content {
				text.WriteString(c.Text)
			}
		case *FunctionCallItem:
			call := chatToolCall{ID: item.CallID, Type: "function"}
			call.Function.Name, call.Function.Arguments = item.Name, item.Arguments
			calls = append(calls, call)
		}
	}
	msg := chatMessage{Role: "assistant", Content: text.String()}
	if len(calls) > 0 {
		msg.ToolCalls = calls
		if text.Len() == 0 {
			msg.Content = nil
		}
	}
	return []chatMessage{msg}
}

// inputItems is a request's input as the items GET …/input_items lists (a string is one user
// message); items without an id get one.
func inputItems(raw json.RawMessage, respID string) []map[string]any {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []map[string]any{{"id": "msg_" + respID[5:] + "_0", "type": "message", "role": "user", "status": "completed",
			"content": []any{map[string]any{"type": "input_text", "text": one}}}}
	}
	var items []map[string]any
	json.Unmarshal(raw, &items)
	for i, it := range items {
		if it == nil {
			items[i] = map[string]any{}
			it = items[i]
		}
		if _, ok := it["id"]; !ok {
			it["id"] = fmt.Sprintf("item_%s_%d", respID[5:], i)
		}
		if _, ok := it["type"]; !ok {
			it["type"] = "message"
		}
	}
	return items
}

// getResponse is GET /v1/responses/{response_id}: a stored response of the caller's entity.
func (a *API) getResponse(w http.ResponseWriter, r *http.Request) {
	rec, ok := a.storedResponse(w, r)
	if ok {
		w.Header().Set("Content-Type", "application/json")
		w.Write(rec.Response)
	}
}

// responseInputItems is GET /v1/responses/{response_id}/input_items: its input items.
func (a *API) responseInputItems(w http.ResponseWriter, r *http.Request) {
	rec, ok := a.storedResponse(w, r)
	if !ok {
		return
	}
	var items []map[string]any
	json.Unmarshal(rec.InputItems, &items)
	if items == nil {
		items = []map[string]any{}
	}
	if r.URL.Query().Get("order") == "desc" {
		slices.Reverse(items)
	}
	list := map[string]any{"object": "list", "data": items, "has_more": false, "first_id": nil, "last_id": nil}
	if len(items) > 0 {
		list["first_id"], list["last_id"] = items[0]["id"], items[len(items)-1]["id"]
	}
	httpx.WriteJSON(w, http.StatusOK, list)
}

// deleteResponse is DELETE /v1/responses/{response_id}.
func (a *API) deleteResponse(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.storedResponse(w, r); !ok {
		return
	}
	id := r.PathValue("response_id")
	if err := a.Responses.Delete(r.Context(), entityOf(r), id); err != nil && !errors.Is(err, respstore.ErrNotFound) {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.deleted", "deleted": true})
}

func (a *API) storedResponse(w http.ResponseWriter, r *http.Request) (respstore.Record, bool) {
	id := r.PathValue("response_id")
	if a.Responses == nil {
		apierror.Write(w, r, apierror.NotFound("response_id", "Response with id '%s' not found: this server stores no responses.", id))
		return respstore.Record{}, false
	}
	rec, err := a.Responses.Get(r.Context(), entityOf(r), id)
	if errors.Is(err, respstore.ErrNotFound) {
		apierror.Write(w, r, apierror.NotFound("response_id", "Response with id '%s' not found.", id))
		return rec, false
	} else if err != nil {
		apierror.Write(w, r, err)
		return rec, false
	}
	// What was loaded, and what the answer is built from, counts towards the process's
	// memory budget for requests (Heavy) until the request ends.
	if err := membudget.Charge(r.Context(), 2*(len(rec.Conversation)+len(rec.InputItems)+len(rec.Response))); err != nil {
		apierror.Write(w, r, err)
		return rec, false
	}
	return rec, true
}

// responseState builds a response's output from its chat run.
type responseState struct {
	rr      *ResponsesRequest
	run     *run
	id      string
	created int64
	seq     int
	// history is the conversation the response continues, input its input, as chat messages.
	history, input []chatMessage
}

// object is the response: status completed (incomplete at max_output_tokens) and its
// output items, or, before the run finished (resp nil), in progress with none.
func (rs *responseState) object(resp *Response) *ResponseObject {
	rr := rs.rr
	o := &ResponseObject{ID: rs.id, Object: "response", CreatedAt: rs.created, Status: "in_progress", Model: rs.run.pr.name,
		Output: OutputItems{}, Instructions: rr.Instructions, MaxOutputTokens: rr.MaxOutputTokens, Temperature: rr.Temperature,
		TopP: rr.TopP, Tools: []any{}, ToolChoice: "auto", ParallelToolCalls: rr.ParallelToolCalls == nil || *rr.ParallelToolCalls,
		Text: map[string]any{"format": map[string]any{"type": "text"}}, Reasoning: map[string]any{"effort": nil, "summary": nil},
		Store: rr.Store == nil || *rr.Store, Truncation: "disabled", Metadata: rr.Metadata, User: rr.User, PreviousResponseID: rr.PreviousResponseID}
	if len(o.Metadata) == 0 {
		o.Metadata = json.RawMessage("{}")
	}
	for _, t := range rr.Tools {
		o.Tools = append(o.Tools, t)
	}
	if len(rr.ToolChoice) > 0 && string(rr.ToolChoice) != "null" {
		o.ToolChoice = rr.ToolChoice
	}
	if rr.Text != nil && len(rr.Text.Format) > 0 && string(rr.Text.Format) != "null" {
		o.Text["format"] = rr.Text.Format
	}
	if rr.Reasoning != nil && rr.Reasoning.Effort != nil {
		o.Reasoning["effort"] = *rr.Reasoning.Effort
	}
	if resp == nil {
		return o
	}
	ch := resp.Choices[0]
	o.Status = "completed"
	if ch.FinishReason == "length" {
		o.Status = "incomplete"
		o.IncompleteDetails = map[string]any{"reason": "max_output_tokens"}
	}
	u := resp.Usage
	o.Usage = &ResponsesUsage{InputTokens: u.PromptTokens, InputTokensDetails: map[string]int{"cached_tokens": 0},
		OutputTokens: u.CompletionTokens, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}, TotalTokens: u.TotalTokens}
	if u.PromptTokensDetails != nil {
		o.Usage.InputTokensDetails["cached_tokens"] = u.PromptTokensDetails.CachedTokens
	}
	if ch.Message.Reasoning != nil && *ch.Message.Reasoning != "" {
		o.Output = append(o.Output, rs.reasoningItem(*ch.Message.Reasoning))
	}
	if ch.Message.Content != nil && (*ch.Message.Content != "" || len(ch.Message.ToolCalls) == 0) {
		o.Output = append(o.Output, rs.messageItem(*ch.Message.Content, ch.Logprobs, itemStatus(ch.FinishReason)))
	}
	for i, tc := range ch.Message.ToolCalls {
		o.Output = append(o.Output, rs.callItem(i, tc.ID, tc.Function.Name, tc.Function.Arguments, "completed"))
	}
	return o
}

// itemStatus is the status of a message item whose choice ended with finish: incomplete when
// cut at max_output_tokens (or not ended yet, while streaming a tool call after it: completed).
func itemStatus(finish string) string {
	if finish == "length" {
		return "incomplete"
	}
	return "completed"
}

func (rs *responseState) reasoningItem(text string) *ReasoningItem {
	return &ReasoningItem{Type: "reasoning", ID: "rs_" + rs.id[5:], Summary: []any{},
		Content: []ReasoningText{{Type: "reasoning_text", Text: text}}, Status: "completed"}
}

func (rs *responseState) messageItem(text string, lps *Logprobs, status string) *MessageItem {
	part := rs.textPart(text, lps)
	content := []OutputText{}
	if status != "in_progress" {
		content = append(content, part)
	}
	return &MessageItem{Type: "message", ID: "msg_" + rs.id[5:], Status: status, Role: "assistant", Content: content}
}

func (rs *responseState) textPart(text string, lps *Logprobs) OutputText {
	part := OutputText{Type: "output_text", Text: text, Annotations: []any{}}
	if lps != nil {
		l := responseLogprobs(lps.Content)
		part.Logprobs = &l
	}
	return part
}

func responseLogprobs(lps []TokenLogprob) []OutputLogprob {
	out := []OutputLogprob{}
	for _, l := range lps {
		top := []OutputTopLogprob{}
		for _, t := range l.TopLogprobs {
			top = append(top, OutputTopLogprob{Token: t.Token, Logprob: t.Logprob, Bytes: t.Bytes})
		}
		out = append(out, OutputLogprob{Token: l.Token, Logprob: l.Logprob, Bytes: l.Bytes, TopLogprobs: top})
	}
	return out
}

func (rs *responseState) callItem(i int, callID, name, args, status string) *FunctionCallItem {
	return &FunctionCallItem{Type: "function_call", ID: fmt.Sprintf("fc_%s_%d", rs.id[5:], i), CallID: callID, Name: name,
		Arguments: args, Status: status}
}

// stream answers with the Responses API's server-sent events: response.created and
// .in_progress, then per output item its .added, its deltas (output_text.delta,
// function_call_arguments.delta, reasoning_text.delta), its .done events, and
// response.completed with the whole response; each event numbered (sequence_number).
func (rs *responseState) stream(w http.ResponseWriter, r *http.Request, a *API) {
	sse := startSSE(w)
	gone := false
	emit := func(typ string, ev map[string]any) {
		if gone {
			return
		}
		ev["type"], ev["sequence_number"] = typ, rs.seq
		rs.seq++
		gone = !sse.event(typ, ev)
	}
	emit("response.created", map[string]any{"response": rs.object(nil)})
	emit("response.in_progress", map[string]any{"response": rs.object(nil)})
	ru := rs.run
	req := ru.pr.plan.req
	// The items as they open: a reasoning item, a message, function calls.
	next := 0
	reasoningAt, messageAt := -1, -1
	var reasoning, text strings.Builder
	sentLP := 0
	type callState struct {
		at               int
		id, callID, name string
		args             strings.Builder
	}
	var calls []*callState
	closeReasoning := func() {
		if reasoningAt < 0 {
			return
		}
		item := rs.reasoningItem(reasoning.String())
		emit("response.reasoning_text.done", map[string]any{"item_id": item.ID, "output_index": reasoningAt, "content_index": 0, "text": reasoning.String()})
		emit("response.output_item.done", map[string]any{"output_index": reasoningAt, "item": item})
		reasoningAt = -2
	}
	closeMessage := func() {
		if messageAt < 0 {
			return
		}
		var lps *Logprobs
		if req.Logprobs {
			lps = &Logprobs{Content: ru.choices[0].logprobs}
		}
		item := rs.messageItem(text.String(), lps, itemStatus(ru.choices[0].finish))
		part := rs.textPart(text.String(), lps)
		emit("response.output_text.done", map[string]any{"item_id": item.ID, "output_index": messageAt, "content_index": 0, "text": text.String(), "logprobs": []any{}})
		emit("response.content_part.done", map[string]any{"item_id": item.ID, "output_index": messageAt, "content_index": 0, "part": part})
		emit("response.output_item.done", map[string]any{"output_index": messageAt, "item": item})
		messageAt = -2
	}
	for ev := range ru.h.Events() {
		if ru.apply(ev) < 0 || gone {
			continue
		}
		if d := ev.Text.Reasoning; d != "" && reasoningAt != -2 {
			if reasoningAt < 0 {
				reasoningAt, next = next, next+1
				item := rs.reasoningItem("")
				item.Content, item.Status = []ReasoningText{}, "in_progress"
				emit("response.output_item.added", map[string]any{"output_index": reasoningAt, "item": item})
			}
			reasoning.WriteString(d)
			emit("response.reasoning_text.delta", map[string]any{"item_id": "rs_" + rs.id[5:], "output_index": reasoningAt, "content_index": 0, "delta": d})
		}
		if d := ev.Text.Content; d != "" {
			closeReasoning()
			if messageAt == -1 {
				messageAt, next = next, next+1
				item := rs.messageItem("", nil, "in_progress")
				emit("response.output_item.added", map[string]any{"output_index": messageAt, "item": item})
				emit("response.content_part.added", map[string]any{"item_id": item.ID, "output_index": messageAt, "content_index": 0,
					"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			}
			if messageAt >= 0 {
				text.WriteString(d)
				lps := []OutputLogprob{}
				if req.Logprobs && len(ru.choices[0].logprobs) > sentLP {
					lps = responseLogprobs(ru.choices[0].logprobs[sentLP:])
					sentLP = len(ru.choices[0].logprobs)
				}
				emit("response.output_text.delta", map[string]any{"item_id": "msg_" + rs.id[5:], "output_index": messageAt, "content_index": 0, "delta": d, "logprobs": lps})
			}
		}
		for _, cd := range ev.Text.Calls {
			closeReasoning()
			closeMessage()
			if cd.ID != "" {
				cs := &callState{at: next, callID: cd.ID, name: cd.Name}
				next++
				cs.id = fmt.Sprintf("fc_%s_%d", rs.id[5:], len(calls))
				calls = append(calls, cs)
				item := rs.callItem(len(calls)-1, cs.callID, cs.name, "", "in_progress")
				emit("response.output_item.added", map[string]any{"output_index": cs.at, "item": item})
			}
			if cd.Arguments != "" && cd.Index < len(calls) {
				cs := calls[cd.Index]
				cs.args.WriteString(cd.Arguments)
				emit("response.function_call_arguments.delta", map[string]any{"item_id": cs.id, "output_index": cs.at, "delta": cd.Arguments})
			}
		}
	}
	if r.Context().Err() != nil || gone {
		a.trace(r, ru, ru.response(), "the client went away before the completion finished")
		return
	}
	resp := ru.response()
	closeReasoning()
	if messageAt == -1 && len(calls) == 0 {
		// Nothing was said: an empty message, as the whole response has.
		messageAt, next = next, next+1
		item := rs.messageItem("", nil, "in_progress")
		emit("response.output_item.added", map[string]any{"output_index": messageAt, "item": item})
		emit("response.content_part.added", map[string]any{"item_id": item.ID, "output_index": messageAt, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	}
	closeMessage()
	for i, cs := range calls {
		item := rs.callItem(i, cs.callID, cs.name, cs.args.String(), "completed")
		emit("response.function_call_arguments.done", map[string]any{"item_id": cs.id, "output_index": cs.at, "name": cs.name, "arguments": cs.args.String()})
		emit("response.output_item.done", map[string]any{"output_index": cs.at, "item": item})
	}
	final := rs.object(resp)
	if ru.failed() {
		final.Status = "failed"
		final.Error = map[string]any{"code": "server_error", "message": fmt.Sprintf("the model %s produced non-finite logits (NaN or infinity), so no token can be sampled", ru.pr.name)}
		ru.traceAs = func(*Response) any { return final }
		a.trace(r, ru, resp, "the model produced non-finite logits")
		emit("response.failed", map[string]any{"response": final})
		return
	}
	a.storeResponse(r, rs, final)
	ru.traceAs = func(*Response) any { return final }
	a.trace(r, ru, resp, "")
	if final.Status == "incomplete" {
		emit("response.incomplete", map[string]any{"response": final})
		return
	}
	emit("response.completed", map[string]any{"response": final})
}

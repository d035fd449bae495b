// Package chatapi serves the OpenAI/vLLM-compatible chat completions routes on the served
// models of internal/serving: POST /v1/chat/completions (and its trailing-slash form), POST
// /v1/chat/completions/render, POST /v1/completions (text completions, completions.go), POST
// /v1/responses (the Responses API, responses.go), vLLM's /tokenize, /detokenize and
// /tokenizer_info (tokenize.go) and GET /v1/models.
package chatapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/openapi"
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/toolcall"
)

// API serves the chat routes.
type API struct {
	Models *serving.Models
	// Adapters resolves trained checkpoints named as models (nil: only base models).
	Adapters        serving.AdapterResolver
	MaxLogprobs     int // default 20
	PriorityEnabled bool
	Logger          *slog.Logger
	// Tracer, when set, records completions whose request names a trace project in the
	// TraceHeader header.
	Tracer Tracer
	// Responses, when set, keeps the Responses API's stored responses (previous_response_id,
	// GET and DELETE /v1/responses/{id}); nil stores none.
	Responses ResponseStore
	// Heavy, when set, wraps the routes that read stored responses (httpx.Heavy: a per-key
	// limit and the process's memory budget for requests).
	Heavy httpx.Middleware
}

// TraceHeader names the trace project (`<entity>/<project>`, the key's own entity) a chat
// completion is recorded in.
const TraceHeader = "X-Hone-Trace-Project"

// Tracer records finished chat completions as calls of a trace project.
type Tracer interface {
	TraceChat(ctx context.Context, c TracedCall) error
}

// TracedCall is one chat completion as a trace call: the request body as its inputs, the
// response (for a stream, the response the chunks add up to) as its output, and the token usage
// under the model's name.
type TracedCall struct {
	Project         string
	RequestID       string
	Started, Ended  time.Time
	Inputs          json.RawMessage
	Output          any    // the response: a *Response, or a Responses API *ResponseObject
	Op              string // the call's op: "" for a chat completion, ResponsesOp
	Model           string
	Usage           Usage
	Exception       string // set when the completion was cut short (client gone)
	PrincipalUserID string
}

// Register adds the routes behind bearer authentication.
func (a *API) Register(r *httpx.Router, bearer httpx.Middleware) {
	if a.MaxLogprobs == 0 {
		a.MaxLogprobs = 20
	}
	if a.Logger == nil {
		a.Logger = slog.Default()
	}
	g := r.Group(bearer, httpx.CheckParams()).Secured(openapi.BearerAuth)
	op := &openapi.Operation{Summary: "Create a chat completion", Tags: []string{"chat"}, Request: Request{}, Response: Response{},
		Description: "OpenAI/vLLM-compatible chat completions on Hone's engine; `stream: true` answers with server-sent events."}
	g.HandleFunc("POST /v1/chat/completions", a.complete, op)
	g.HandleFunc("POST /v1/chat/completions/", a.complete, &openapi.Operation{Summary: "Create a chat completion (trailing-slash form)", Tags: []string{"chat"}, Request: Request{}, Response: Response{}})
	g.HandleFunc("POST /v1/chat/completions/render", a.render, &openapi.Operation{Summary: "Render the prompt of a chat request without generating", Tags: []string{"chat"}, Request: Request{}, Response: RenderResponse{}})
	g.HandleFunc("POST /v1/chat/completions/{segment}", func(w http.ResponseWriter, r *http.Request) {
		apierror.Write(w, r, apierror.NotFound("", "Unknown route /v1/chat/completions/%s: the chat completions routes are /v1/chat/completions, /v1/chat/completions/ and /v1/chat/completions/render.", r.PathValue("segment")))
	}, &openapi.Operation{Summary: "Unknown chat completions segment (404)", Tags: []string{"chat"}})
	g.HandleFunc("POST /v1/responses", a.responses, &openapi.Operation{Summary: "Create a response (Responses API)", Tags: []string{"chat"}, Request: ResponsesRequest{}, Response: ResponseObject{},
		Description: "OpenAI's Responses API: input items and function tools run as a chat completion; `stream: true` answers with the Responses events; stored responses (`store`, default true) are continued with `previous_response_id`."})
	hg := g // the routes that read what is stored
	if a.Heavy != nil {
		hg = r.Group(bearer, httpx.CheckParams(), a.Heavy).Secured(openapi.BearerAuth)
	}
	hg.HandleFunc("GET /v1/responses/{response_id}", a.getResponse, &openapi.Operation{Summary: "Get a stored response", Tags: []string{"chat"}, Response: ResponseObject{}})
	g.HandleFunc("DELETE /v1/responses/{response_id}", a.deleteResponse, &openapi.Operation{Summary: "Delete a stored response", Tags: []string{"chat"}})
	hg.HandleFunc("GET /v1/responses/{response_id}/input_items", a.responseInputItems, &openapi.Operation{Summary: "List a stored response's input items", Tags: []string{"chat"}})
	g.HandleFunc("POST /v1/completions", a.completions, &openapi.Operation{Summary: "Create a text completion", Tags: []string{"chat"}, Request: CompletionRequest{}, Response: CompletionResponse{},
		Description: "OpenAI/vLLM-compatible (legacy) text completions: prompts continued without a chat template; `echo` with `logprobs` scores a text's tokens; `stream: true` answers with server-sent events."})
	g.HandleFunc("POST /tokenize", a.tokenize, &openapi.Operation{Summary: "Tokenize a prompt or chat messages (vLLM's route)", Tags: []string{"chat"}, Request: TokenizeRequest{}, Response: TokenizeResponse{}})
	g.HandleFunc("POST /detokenize", a.detokenize, &openapi.Operation{Summary: "Turn token ids into text (vLLM's route)", Tags: []string{"chat"}, Request: DetokenizeRequest{}})
	g.HandleFunc("GET /tokenizer_info", a.tokenizerInfo, &openapi.Operation{Summary: "The tokenizer's special tokens, chat template and context (vLLM's route)", Tags: []string{"chat"}})
	g.HandleFunc("GET /v1/models", a.models, &openapi.Operation{Summary: "List the served models", Tags: []string{"chat"}, Response: ModelList{}})
}

// ModelList is GET /v1/models.
type ModelList struct {
	Object string      `json:"object"`
	Data   []ModelCard `json:"data"`
}

// ModelCard is one served model.
type ModelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Root        string `json:"root"`
	Parent      any    `json:"parent"`
	MaxModelLen int    `json:"max_model_len"`
}

func (a *API) models(w http.ResponseWriter, r *http.Request) {
	list := ModelList{Object: "list", Data: []ModelCard{}}
	for _, s := range a.Models.List() {
		list.Data = append(list.Data, ModelCard{ID: s.Name, Object: "model", Created: s.Created, OwnedBy: "hone", Root: s.Dir, MaxModelLen: s.MaxModelLen()})
	}
	// The caller's trained models, as vLLM lists LoRA adapters: their parent is the base.
	if a.Adapters != nil {
		trained, err := a.Adapters.ListAdapters(r.Context(), entityOf(r))
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		for _, t := range trained {
			base, ok := a.Models.Get(t.Base)
			if !ok {
				continue // its base is not served here: it cannot be chatted with
			}
			list.Data = append(list.Data, ModelCard{ID: t.Name, Object: "model", Created: t.Created, OwnedBy: t.Owner,
				Root: t.Name + ":latest", Parent: t.Base, MaxModelLen: base.MaxModelLen()})
		}
	}
	httpx.WriteJSON(w, http.StatusOK, list)
}

func (a *API) complete(w http.ResponseWriter, r *http.Request) {
	pr, err := a.prepare(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	run, ok := a.submit(w, r, pr, completionID(r, pr.plan.req))
	if !ok {
		return
	}
	if pr.plan.req.Stream {
		run.stream(w, r, a.trace)
		return
	}
	resp, ok := a.finish(w, r, run)
	if ok {
		httpx.WriteJSON(w, http.StatusOK, resp)
	}
}

// finish collects a run's completion; when the client went away or a choice failed it
// answers (or not) itself and ok is false. The completion is traced when asked.
func (a *API) finish(w http.ResponseWriter, r *http.Request, run *run) (*Response, bool) {
	resp := run.collect()
	if r.Context().Err() != nil {
		a.trace(r, run, resp, "the client went away before the completion finished")
		return nil, false
	}
	if run.failed() {
		err := nonFinite(run.pr.name)
		a.Logger.ErrorContext(r.Context(), "chat completion failed: non-finite logits", "model", run.pr.name)
		a.trace(r, run, resp, err.Error())
		apierror.Write(w, r, err)
		return nil, false
	}
	a.trace(r, run, resp, "")
	return resp, true
}

// submit starts a prepared request on its model's engine; on failure it answers the error
// and ok is false.
func (a *API) submit(w http.ResponseWriter, r *http.Request, pr *prepared, id string) (*run, bool) {
	p := pr.plan
	var gf inference.GuideFactory
	if p.structured != nil {
		c, err := pr.served.Guides().Compile(p.structured)
		if err != nil {
			apierror.Write(w, r, apierror.BadRequest("structured_outputs", "Invalid structured output constraint: %v", err))
			return nil, false
		}
		gf = pr.served.GuideFactory(c)
		gf = pr.thinkFirst(gf)
	}
	out := pr.output()
	if s := p.structured; s != nil && s.Kind != "structural_tag" && !pr.thinksFirst() {
		// The constraint holds from the first token and leaves no free text: the answer is
		// all the constrained output, never reasoning (a "</think>" a JSON string holds, say).
		out.Reasoning = false
	}
	h, err := pr.served.Engine.Submit(r.Context(), &inference.Request{Guide: gf, ID: id, Key: pr.who.KeyID, Prompt: pr.ids, Params: p.params, N: p.n,
		MaxTokens: p.maxTokens, IgnoreEOS: p.req.IgnoreEOS, Adapter: pr.adapter, Priority: p.priority,
		Logprobs: p.req.Logprobs, TopLogprobs: p.topLogprobs, PromptLogprobs: p.promptLP >= 0, PromptTopLogprobs: p.promptLP, CacheSalt: p.cacheSalt, Repetition: p.repetition, Beam: p.beam,
		Output: out, Speculative: p.spec, NoSpeculative: p.noSpec})
	if err != nil {
		apierror.Write(w, r, p.submitError(err, pr.served, len(pr.ids)))
		return nil, false
	}
	return newRun(pr, h, id, out.Reasoning), true
}

// submitError is the API's answer to the engine refusing a request of a promptLen-token
// prompt.
func (p *plan) submitError(err error, served *serving.Served, promptLen int) error {
	switch {
	case errors.Is(err, inference.ErrKeyQueueFull):
		_, perKey := served.Engine.QueueLimits()
		return apierror.TooManyRequests("The server is busy: this API key's share of the waiting queue (%d sequences, --max-queue-per-key) is taken by its own requests. Retry later.", perKey)
	case errors.Is(err, inference.ErrQueueFull):
		return apierror.TooManyRequests("The server is busy: the waiting queue is full. Retry later.")
	case errors.Is(err, inference.ErrTooManySequences):
		_, perKey := served.Engine.QueueLimits()
		return apierror.BadRequest("n", "This request asks for %d sequences; an API key may have at most %d waiting (--max-queue-per-key). Please request fewer choices.", p.n, perKey)
	case errors.Is(err, inference.ErrPriorityNotEnabled):
		return apierror.BadRequest("priority", "Got priority %d but Priority scheduling is not enabled.", p.priority)
	case errors.Is(err, inference.ErrTooLarge):
		return apierror.BadRequest("n", "The KV cache holds %d tokens; %d sequences of up to %d tokens (a %d-token prompt and up to %d output tokens each) do not fit in it. Please request fewer choices or fewer output tokens.",
			served.Engine.KVCache().Tokens(), p.n, promptLen+p.maxTokens, promptLen, p.maxTokens)
	}
	return err
}

// nonFinite is the answer to a completion whose logits were not finite.
func nonFinite(model string) error {
	return fault.Invalid("model", "the model %s produced non-finite logits (NaN or infinity), so no token can be sampled: its weights or adapter are broken (for a trained checkpoint: its training diverged)", model)
}

// trace records a finished completion when its request asked for it. A failure to record is
// logged and does not fail the completion.
func (a *API) trace(r *http.Request, ru *run, resp *Response, exception string) {
	pr := ru.pr
	if pr.traceProject == "" || a.Tracer == nil {
		return
	}
	c := TracedCall{Project: pr.traceProject, RequestID: ru.id, Started: pr.started, Ended: time.Now(),
		Inputs: pr.body, Output: resp, Model: pr.name, Usage: resp.Usage, Exception: exception, PrincipalUserID: pr.who.KeyID}
	if ru.traceAs != nil { // a Responses API request: its op and its response object
		c.Op, c.Output = ResponsesOp, ru.traceAs(resp)
	}
	// The request's own context may be cancelled already (client gone); the record is still due.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	if err := a.Tracer.TraceChat(ctx, c); err != nil && a.Logger != nil {
		a.Logger.Warn("chat: could not trace the completion", "project", pr.traceProject, "request_id", ru.id, "err", err)
	}
}

// Response is a non-streaming chat completion.
type Response struct {
	ID                string           `json:"id"`
	Object            string           `json:"object"`
	Created           int64            `json:"created"`
	Model             string           `json:"model"`
	Choices           []Choice         `json:"choices"`
	Usage             Usage            `json:"usage"`
	PromptLogprobs    []map[string]any `json:"prompt_logprobs"`
	PromptTokenIDs    []int            `json:"prompt_token_ids"`
	KVTransferParams  json.RawMessage  `json:"kv_transfer_params"`
	SystemFingerprint *string          `json:"system_fingerprint"`
	ServiceTier       *string          `json:"service_tier"`
}

// Choice is one choice of a response.
type Choice struct {
	Index        int       `json:"index"`
	Message      Message   `json:"message"`
	Logprobs     *Logprobs `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
	StopReason   any       `json:"stop_reason"`
	TokenIDs     []int     `json:"token_ids"`
}

// Message is an assistant message.
type Message struct {
	Role         string     `json:"role"`
	Content      *string    `json:"content"`
	Refusal      any        `json:"refusal"`
	Annotations  any        `json:"annotations"`
	Audio        any        `json:"audio"`
	FunctionCall any        `json:"function_call"`
	ToolCalls    []ToolCall `json:"tool_calls"`
	Reasoning    *string    `json:"reasoning"`
}

// Logprobs is a choice's logprobs.
type Logprobs struct {
	Content []TokenLogprob `json:"content"`
}

// TokenLogprob is one token's logprob entry.
type TokenLogprob struct {
	Token       string         `json:"token"`
	Logprob     float64        `json:"logprob"`
	Bytes       []int          `json:"bytes"`
	TopLogprobs []TopLogprobJS `json:"top_logprobs"`
}

// TopLogprobJS is one alternative.
type TopLogprobJS struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// Usage is token accounting.
type Usage struct {
	PromptTokens        int            `json:"prompt_tokens"`
	TotalTokens         int            `json:"total_tokens"`
	CompletionTokens    int            `json:"completion_tokens"`
	PromptTokensDetails *PromptDetails `json:"prompt_tokens_details"`
	// Speculative counts speculative decoding's work when the request speculated.
	Speculative *SpecUsage `json:"speculative,omitempty"`
}

// PromptDetails reports prefix-cache hits.
type PromptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// output is how the engine turns the request's tokens into text: the detokeniser's
// options, the stop strings and whether the template thinks (<think>…</think> is then
// reported as reasoning, unless include_reasoning is false).
func (pr *prepared) output() *inference.Output {
	req := pr.plan.req
	include := req.IncludeReasoning == nil || *req.IncludeReasoning
	return &inference.Output{Tok: pr.served.Tok, SkipSpecial: req.SkipSpecialTokens == nil || *req.SkipSpecialTokens,
		Stops: pr.plan.stops, IncludeStop: req.IncludeStopStrInOutput, ToolCalls: pr.plan.tools.output(),
		Reasoning: include && pr.served.Template != nil && strings.Contains(pr.served.Template.Source(), "<think>")}
}

// thinkFirst defers a constraint (structured outputs, a required or named tool call) until a
// thinking model's <think> block ends, as vLLM with a reasoning parser applies it after the
// reasoning, when the request asks the model to think (chat_template_kwargs.enable_thinking
// true, or a reasoning_effort other than none), the template thinks, <think> and </think> are
// tokens of the vocabulary, and the prompt did not close the block itself. Otherwise the
// constraint holds from the first token, and the model answers without thinking.
func (pr *prepared) thinkFirst(gf inference.GuideFactory) inference.GuideFactory {
	if !pr.thinksFirst() {
		return gf
	}
	start, _ := pr.served.Tok.TokenID("<think>")
	end, _ := pr.served.Tok.TokenID("</think>")
	return inference.ThinkFirst(gf, start, end, strings.HasSuffix(strings.TrimRight(pr.prompt, " \t\r\n"), "<think>"))
}

// thinksFirst reports whether the request's constraint waits for its <think> block to end
// (thinkFirst's conditions).
func (pr *prepared) thinksFirst() bool {
	tpl := pr.served.Template
	if pr.plan.req.ChatTemplate != nil || tpl == nil || !strings.Contains(tpl.Source(), "<think>") {
		return false
	}
	var kw struct {
		EnableThinking *bool `json:"enable_thinking"`
	}
	if json.Unmarshal(pr.plan.req.templateKwargs(), &kw) != nil || kw.EnableThinking == nil || !*kw.EnableThinking {
		return false
	}
	_, ok1 := pr.served.Tok.TokenID("<think>")
	_, ok2 := pr.served.Tok.TokenID("</think>")
	return ok1 && ok2 && !strings.HasSuffix(strings.TrimRight(pr.prompt, " \t\r\n"), "</think>")
}

// choiceState is one choice as the engine's events left it.
type choiceState struct {
	text       string   // the whole text, once finished
	callIDs    []string // the ids the engine's events gave its tool calls, in order
	tokens     []int
	logprobs   []TokenLogprob
	finish     string
	stopReason any
}

type run struct {
	// traceAs, when set, is what a traced call records as its output instead of the chat
	// response (the Responses API's response object).
	traceAs  func(*Response) any
	pr       *prepared
	h        *inference.Handle
	id       string
	created  int64
	choices  []*choiceState
	promptLP []map[string]any
	think    bool
}

func newRun(pr *prepared, h *inference.Handle, id string, think bool) *run {
	ru := &run{pr: pr, h: h, id: id, created: time.Now().Unix(), think: think}
	for i := 0; i < pr.plan.n; i++ {
		ru.choices = append(ru.choices, &choiceState{})
	}
	return ru
}

// apply takes one engine event into the choice's state; it returns the choice index or -1.
func (ru *run) apply(ev inference.Event) int {
	if ev.PromptLogprobs != nil {
		ru.promptLP = ru.formatPromptLogprobs(ev.PromptLogprobs)
		return -1
	}
	c := ru.choices[ev.Choice]
	for _, d := range ev.Text.Calls {
		if d.ID != "" {
			c.callIDs = append(c.callIDs, d.ID)
		}
	}
	if ev.HasToken {
		c.tokens = append(c.tokens, ev.Token)
		if ru.pr.plan.req.Logprobs {
			c.logprobs = append(c.logprobs, ru.tokenLogprob(ev))
		}
	}
	if ev.Finish != "" {
		c.text = ev.Text.Full
		c.finish, c.stopReason = ev.Finish, ev.StopReason
	}
	return ev.Choice
}

func (ru *run) tokenString(id int) string {
	if ru.pr.plan.req.ReturnTokensAsTokenIDs {
		return fmt.Sprintf("token_id:%d", id)
	}
	return ru.pr.served.Tok.Decode([]int{id}, false)
}

// tokenBytes is a token's own bytes, as OpenAI returns them in `bytes`: a token that is part
// of a multi-byte character has its raw bytes there (its `token` string, which JSON must
// carry as valid UTF-8, shows U+FFFD), so a client can join the bytes of consecutive tokens
// into the text, and a trainer can tell exactly which token was sampled.
func (ru *run) tokenBytes(id int) []int {
	b := ru.pr.served.Tok.TokenBytes(id)
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

func clampLP(v float32) float64 { return max(float64(v), -9999.0) }

func (ru *run) tokenLogprob(ev inference.Event) TokenLogprob {
	tok := ru.tokenString(ev.Token)
	tl := TokenLogprob{Token: tok, Logprob: clampLP(ev.Logprob), Bytes: ru.tokenBytes(ev.Token), TopLogprobs: []TopLogprobJS{}}
	if ru.pr.plan.topLogprobs > 0 {
		// vLLM's order: the sampled token first, then the most likely ones.
		tl.TopLogprobs = append(tl.TopLogprobs, TopLogprobJS{Token: tok, Logprob: clampLP(ev.Logprob), Bytes: tl.Bytes})
		for _, t := range ev.Top {
			if len(tl.TopLogprobs) >= ru.pr.plan.topLogprobs {
				break
			}
			if t.Token == ev.Token {
				continue
			}
			s := ru.tokenString(t.Token)
			tl.TopLogprobs = append(tl.TopLogprobs, TopLogprobJS{Token: s, Logprob: clampLP(t.Logprob), Bytes: ru.tokenBytes(t.Token)})
		}
	}
	return tl
}

func (ru *run) formatPromptLogprobs(lps []inference.PromptLogprob) []map[string]any {
	out := make([]map[string]any, len(lps))
	for i, lp := range lps {
		if i == 0 {
			continue // the first prompt token has no logprob: null
		}
		m := map[string]any{fmt.Sprint(lp.Token): map[string]any{"logprob": clampLP(lp.Logprob), "rank": lp.Rank, "decoded_token": ru.tokenString(lp.Token)}}
		for k, t := range lp.Top {
			if _, ok := m[fmt.Sprint(t.Token)]; !ok {
				m[fmt.Sprint(t.Token)] = map[string]any{"logprob": clampLP(t.Logprob), "rank": k + 1, "decoded_token": ru.tokenString(t.Token)}
			}
		}
		out[i] = m
	}
	return out
}

func (ru *run) usage() Usage {
	u := Usage{PromptTokens: len(ru.pr.ids), PromptTokensDetails: &PromptDetails{CachedTokens: ru.h.CachedTokens}}
	for _, c := range ru.choices {
		u.CompletionTokens += len(c.tokens)
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.Speculative = specUsage(ru.h.Spec)
	return u
}

// failed reports whether a choice ended with an engine error (non-finite logits).
func (ru *run) failed() bool {
	for _, c := range ru.choices {
		if c.finish == inference.FinishError {
			return true
		}
	}
	return false
}

func (ru *run) collect() *Response {
	for ev := range ru.h.Events() {
		ru.apply(ev)
	}
	return ru.response()
}

// response is the completion as it stands (after every event, the whole completion).
func (ru *run) response() *Response {
	req := ru.pr.plan.req
	resp := &Response{ID: ru.id, Object: "chat.completion", Created: ru.created, Model: ru.pr.name, Usage: ru.usage(),
		KVTransferParams: req.KVTransferParams, ServiceTier: req.ServiceTier}
	if len(resp.KVTransferParams) == 0 {
		resp.KVTransferParams = nil
	}
	if req.PromptLogprobs != nil {
		resp.PromptLogprobs = ru.promptLP
	}
	if req.ReturnTokenIDs {
		resp.PromptTokenIDs = ru.pr.ids
	}
	role := "assistant"
	for i, c := range ru.choices {
		text := c.text
		if req.Echo {
			text = lastContent(req.Messages, role) + text
		}
		msg := Message{Role: role}
		if ru.think {
			r, content := inference.SplitReasoning(text)
			msg.Reasoning, text = r, content
		}
		msg.Content = &text
		finish := c.finish
		if tc := ru.pr.plan.tools.output(); tc != nil && c.finish != "" {
			if content, calls, ok := toolcall.Parse(tc.Family, text, tc.Options); ok && len(calls) == 0 {
				msg.Content = &content // the output ended inside its first call: dropped
			} else if ok {
				msg.Content = nil
				if strings.TrimSpace(content) != "" {
					msg.Content = &content
				}
				msg.ToolCalls = []ToolCall{}
				for k, call := range calls {
					// The ids a stream sent, so that the whole response names the calls alike.
					id := toolcall.NewID()
					if k < len(c.callIDs) {
						id = c.callIDs[k]
					}
					msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: call.Name, Arguments: call.Arguments}})
				}
				finish = ru.pr.plan.tools.finishReason(finish)
			}
		}
		ch := Choice{Index: i, Message: msg, FinishReason: finish, StopReason: c.stopReason}
		if req.Logprobs {
			ch.Logprobs = &Logprobs{Content: c.logprobs}
			if ch.Logprobs.Content == nil {
				ch.Logprobs.Content = []TokenLogprob{}
			}
		}
		if req.ReturnTokenIDs {
			ch.TokenIDs = c.tokens
		}
		resp.Choices = append(resp.Choices, ch)
	}
	return resp
}

// lastContent is the text of the last message when it has the given role (echo).
func lastContent(messages json.RawMessage, role string) string {
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(messages, &msgs) != nil || len(msgs) == 0 || msgs[len(msgs)-1].Role != role {
		return ""
	}
	var s string
	if json.Unmarshal(msgs[len(msgs)-1].Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(msgs[len(msgs)-1].Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// looksLikeCheckpoint reports whether name has the shape of a trained-checkpoint name.
func looksLikeCheckpoint(name string) bool {
	return strings.HasPrefix(name, "wandb-artifact:///") || strings.Count(name, "/") == 2
}

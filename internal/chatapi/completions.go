package chatapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/serving"
)

// POST /v1/completions: OpenAI's (legacy) text completions as vLLM serves them: a prompt (a
// string, a list of strings, a list of token ids or a list of such lists) continued as it is,
// with no chat template. Each prompt is one engine request of n choices; choice i of prompt
// p is choice p·n+i. echo puts the prompt before each choice's text (and, with logprobs, its
// tokens' logprobs before the choice's: the first token's null), which is how evaluation
// harnesses (lm-evaluation-harness's local-completions) score a text's log-likelihood.

// CompletionRequest is the body of POST /v1/completions (unknown fields are ignored, as
// vLLM does): the fields it shares with a chat request (Common), and its own.
type CompletionRequest struct {
	Common
	Prompt           json.RawMessage `json:"prompt"`
	Suffix           *string         `json:"suffix"`
	BestOf           *int            `json:"best_of"`
	Logprobs         *int            `json:"logprobs"`
	AddSpecialTokens *bool           `json:"add_special_tokens"`
}

// CompletionResponse is the answer of POST /v1/completions.
type CompletionResponse struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	Choices           []CompletionChoice `json:"choices"`
	Usage             *Usage             `json:"usage"`
	SystemFingerprint *string            `json:"system_fingerprint"`
	KVTransferParams  json.RawMessage    `json:"kv_transfer_params"`
}

// CompletionChoice is one choice of a text completion.
type CompletionChoice struct {
	Index          int                 `json:"index"`
	Text           string              `json:"text"`
	Logprobs       *CompletionLogprobs `json:"logprobs"`
	FinishReason   *string             `json:"finish_reason"`
	StopReason     any                 `json:"stop_reason"`
	TokenIDs       []int               `json:"token_ids,omitempty"`
	PromptLogprobs []map[string]any    `json:"prompt_logprobs,omitempty"`
	PromptTokenIDs []int               `json:"prompt_token_ids,omitempty"`
}

// CompletionLogprobs is a text completion's logprobs: per token its text, its logprob (null
// for a prompt's first token), the most likely tokens' logprobs and where it starts in the
// choice's text.
type CompletionLogprobs struct {
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	Tokens        []string             `json:"tokens"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
}

// completionPrompt is one prompt of a request, tokenised.
type completionPrompt struct {
	text string // the prompt as text (decoded when given as token ids), for echo
	ids  []int
}

// parsePrompts reads prompt: a string, a list of strings, a list of token ids, or a list of
// lists of token ids.
func parsePrompts(raw json.RawMessage) (texts []string, ids [][]int, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, bad("prompt", "Field required: `prompt`")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many, nil, nil
	}
	var toks []int
	if json.Unmarshal(raw, &toks) == nil && len(toks) > 0 {
		return nil, [][]int{toks}, nil
	}
	var lists [][]int
	if json.Unmarshal(raw, &lists) == nil && len(lists) > 0 {
		return nil, lists, nil
	}
	return nil, nil, bad("prompt", "`prompt` must be a string, a non-empty list of strings, a non-empty list of token ids, or a non-empty list of lists of token ids.")
}

// chatRequest is the request as a chat request without messages, for the checks and
// sampling parameters the two routes share.
func (cr *CompletionRequest) chatRequest() *Request {
	req := &Request{Common: cr.Common}
	if cr.Logprobs != nil {
		req.Logprobs = true
		k := json.Number(fmt.Sprint(*cr.Logprobs))
		req.TopLogprobs = &k
	}
	return req
}

// preparedCompletion is a completions request checked and tokenised.
type preparedCompletion struct {
	cr      *CompletionRequest
	plan    *plan
	served  *serving.Served
	name    string
	adapter *model.LoRA
	prompts []completionPrompt
	// promptLP is the prompt logprobs asked of the engine: for prompt_logprobs, and for echo
	// with logprobs (-1: none).
	promptLP int
	// who asked: its key is the fairness key of the engine requests.
	who auth.Principal
}

// prepareCompletion checks and tokenises a text completion request for who.
func (a *API) prepareCompletion(ctx context.Context, who auth.Principal, cr *CompletionRequest) (*preparedCompletion, error) {
	served, name, adapter, err := a.resolveModel(ctx, who.Entity, cr.Model)
	if err != nil {
		return nil, err
	}
	texts, idLists, err := parsePrompts(cr.Prompt)
	if err != nil {
		return nil, err
	}
	if cr.Suffix != nil && *cr.Suffix != "" {
		return nil, bad("suffix", "suffix is not currently supported")
	}
	if cr.Logprobs != nil && (*cr.Logprobs < 0 || *cr.Logprobs > a.MaxLogprobs) {
		return nil, bad("logprobs", "Requested sample logprobs of %d, which is greater than max allowed: %d", *cr.Logprobs, a.MaxLogprobs)
	}
	vocab := served.Model.Config.VocabSize
	p, err := cr.chatRequest().validate(vocab, a.MaxLogprobs, a.PriorityEnabled)
	if err != nil {
		return nil, err
	}
	if cr.BestOf != nil && (*cr.BestOf < 1 || *cr.BestOf > MaxN) {
		return nil, bad("best_of", "best_of must be between 1 and %d, got %d.", MaxN, *cr.BestOf)
	}
	if cr.BestOf != nil && *cr.BestOf != p.n {
		return nil, bad("best_of", "best_of is not supported (it must equal n, %d, or be left out)", p.n)
	}
	if cr.MaxTokens == nil {
		p.maxTokens = 16 // OpenAI's and vLLM's default for completions
	}
	pc := &preparedCompletion{cr: cr, plan: p, served: served, name: name, adapter: adapter, promptLP: p.promptLP, who: who}
	if cr.Echo && cr.Logprobs != nil {
		pc.promptLP = max(pc.promptLP, *cr.Logprobs)
	}
	addSpecial := cr.AddSpecialTokens == nil || *cr.AddSpecialTokens
	maxLen := served.MaxModelLen()
	if p.maxTokens > maxLen {
		return nil, apierror.BadRequest("max_tokens", "max_tokens=%d cannot be greater than max_model_len=max_total_tokens=%d. Please request fewer output tokens.", p.maxTokens, maxLen)
	}
	for i, t := range texts {
		if per := served.Tok.MaxInputBytesPerToken(); per > 0 && p.truncate == 0 {
			if least := (len(t) + per - 1) / per; least > maxLen {
				return nil, apierror.BadRequest("prompt", "This model's maximum context length is %d tokens. However, prompt %d has %d bytes, so at least %d input tokens (a token stands for at most %d bytes). Please reduce the length of the prompt.", maxLen, i, len(t), least, per)
			}
		}
		pc.prompts = append(pc.prompts, completionPrompt{text: t, ids: served.Tok.Encode(t, addSpecial)})
	}
	for i, ids := range idLists {
		for _, id := range ids {
			if id < 0 || id >= vocab {
				return nil, bad("prompt", "Token id %d in prompt %d is out of vocabulary (the model has %d tokens).", id, i, vocab)
			}
		}
		pc.prompts = append(pc.prompts, completionPrompt{text: served.Tok.Decode(ids, false), ids: ids})
	}
	for i := range pc.prompts {
		ids, err := p.truncateIDs(pc.prompts[i].ids, maxLen)
		if err != nil {
			return nil, err
		}
		if len(ids) != len(pc.prompts[i].ids) {
			pc.prompts[i] = completionPrompt{text: served.Tok.Decode(ids, false), ids: ids}
		}
		if len(ids) == 0 {
			return nil, bad("prompt", "Prompt %d is empty (no tokens).", i)
		}
		want := p.maxTokens
		if want == 0 {
			want = 1
		}
		if len(ids)+want > maxLen {
			return nil, apierror.BadRequest("prompt", "This model's maximum context length is %d tokens. However, you requested %d output tokens and your prompt contains %d input tokens, for a total of %d tokens. Please reduce the length of the input prompt or the number of requested output tokens.", maxLen, want, len(ids), len(ids)+want)
		}
	}
	p.tokenParams(served, cr.BadWords)
	return pc, nil
}

// completionChoiceState is one choice of a text completion as the engine's events left it.
type completionChoiceState struct {
	prompt   int // the prompt it continues
	tokens   []int
	lps      []inference.Event // each token's event (logprobs)
	text     string
	finish   string
	stop     any
	promptLP []inference.PromptLogprob
	// sent counts what a stream sent: tokens and whether it ended.
	sent int
	done bool
}

// completionRun is a text completion in progress: one engine request per prompt.
type completionRun struct {
	pc      *preparedCompletion
	id      string
	created int64
	handles []*inference.Handle
	choices []*completionChoiceState
	events  chan promptEvent
}

type promptEvent struct {
	prompt int
	ev     inference.Event
}

func (a *API) completions(w http.ResponseWriter, r *http.Request) {
	var cr CompletionRequest
	if _, err := decodeBody(r, &cr); err != nil {
		apierror.Write(w, r, err)
		return
	}
	pc, err := a.prepareCompletion(r.Context(), principalOf(r), &cr)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	p := pc.plan
	id := "cmpl-" + httpx.RequestID(r.Context())
	if pc.cr.RequestID != "" {
		id = "cmpl-" + pc.cr.RequestID
	}
	var gf inference.GuideFactory
	if p.structured != nil {
		c, err := pc.served.Guides().Compile(p.structured)
		if err != nil {
			apierror.Write(w, r, apierror.BadRequest("structured_outputs", "Invalid structured output constraint: %v", err))
			return
		}
		gf = pc.served.GuideFactory(c)
	}
	ru := &completionRun{pc: pc, id: id, created: time.Now().Unix(), events: make(chan promptEvent, 64)}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// The prompts are queued together: all of them, or (their sequences do not fit the
	// waiting queue or the key's share of it) none.
	reqs := make([]*inference.Request, len(pc.prompts))
	for i, pr := range pc.prompts {
		out := &inference.Output{Tok: pc.served.Tok, SkipSpecial: pc.cr.SkipSpecialTokens == nil || *pc.cr.SkipSpecialTokens,
			Stops: p.stops, IncludeStop: pc.cr.IncludeStopStrInOutput}
		reqs[i] = &inference.Request{Guide: gf, ID: fmt.Sprintf("%s-%d", id, i), Key: pc.who.KeyID, Prompt: pr.ids,
			Params: p.params, N: p.n, MaxTokens: p.maxTokens, IgnoreEOS: pc.cr.IgnoreEOS, Adapter: pc.adapter, Priority: p.priority,
			Logprobs: pc.cr.Logprobs != nil, TopLogprobs: p.topLogprobs, PromptLogprobs: pc.promptLP >= 0, PromptTopLogprobs: pc.promptLP, CacheSalt: p.cacheSalt,
			Repetition: p.repetition, Beam: p.beam, Output: out, Speculative: p.spec, NoSpeculative: p.noSpec}
	}
	hs, err := pc.served.Engine.SubmitAll(ctx, reqs)
	if err != nil {
		longest := 0
		for _, pr := range pc.prompts {
			longest = max(longest, len(pr.ids))
		}
		if errors.Is(err, inference.ErrTooManySequences) && len(pc.prompts) > 1 {
			_, perKey := pc.served.Engine.QueueLimits()
			err = apierror.BadRequest("prompt", "This request asks for %d sequences (%d prompts × n=%d); an API key may have at most %d waiting (--max-queue-per-key). Please send fewer prompts per request.",
				len(pc.prompts)*p.n, len(pc.prompts), p.n, perKey)
		} else {
			err = p.submitError(err, pc.served, longest)
		}
		apierror.Write(w, r, err)
		return
	}
	for i, h := range hs {
		ru.handles = append(ru.handles, h)
		for j := 0; j < p.n; j++ {
			ru.choices = append(ru.choices, &completionChoiceState{prompt: i})
		}
	}
	var wg sync.WaitGroup
	for i, h := range ru.handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range h.Events() {
				ru.events <- promptEvent{i, ev}
			}
		}()
	}
	go func() { wg.Wait(); close(ru.events) }()
	if pc.cr.Stream {
		ru.stream(w, r)
		return
	}
	for pe := range ru.events {
		ru.apply(pe)
	}
	if r.Context().Err() != nil {
		return
	}
	for _, c := range ru.choices {
		if c.finish == inference.FinishError {
			err := nonFinite(pc.name)
			a.Logger.ErrorContext(r.Context(), "completion failed: non-finite logits", "model", pc.name)
			apierror.Write(w, r, err)
			return
		}
	}
	resp := CompletionResponse{ID: id, Object: "text_completion", Created: ru.created, Model: pc.name, Usage: ru.usage(), KVTransferParams: pc.cr.KVTransferParams}
	if len(resp.KVTransferParams) == 0 {
		resp.KVTransferParams = nil
	}
	for i, c := range ru.choices {
		ch := CompletionChoice{Index: i, Text: c.text, StopReason: c.stop}
		f := c.finish
		ch.FinishReason = &f
		if pc.cr.Echo {
			ch.Text = pc.prompts[c.prompt].text + c.text
		}
		if pc.cr.Logprobs != nil {
			ch.Logprobs = ru.logprobs(c, pc.cr.Echo, 0, 0)
		}
		ru.promptExtras(&ch, c)
		resp.Choices = append(resp.Choices, ch)
	}
	httpx.WriteJSON(w, http.StatusOK, resp)
}

// apply takes one engine event into its choice's state; it returns the choice or nil.
func (ru *completionRun) apply(pe promptEvent) *completionChoiceState {
	ev := pe.ev
	n := ru.pc.plan.n
	if ev.PromptLogprobs != nil {
		for j := 0; j < n; j++ {
			ru.choices[pe.prompt*n+j].promptLP = ev.PromptLogprobs
		}
		return nil
	}
	c := ru.choices[pe.prompt*n+ev.Choice]
	if ev.HasToken {
		c.tokens = append(c.tokens, ev.Token)
		c.lps = append(c.lps, ev)
	}
	if ev.Finish != "" {
		c.text, c.finish, c.stop = ev.Text.Full, ev.Finish, ev.StopReason
	}
	return c
}

func (ru *completionRun) usage() *Usage {
	u := Usage{PromptTokensDetails: &PromptDetails{}}
	for _, pr := range ru.pc.prompts {
		u.PromptTokens += len(pr.ids)
	}
	for _, h := range ru.handles {
		u.PromptTokensDetails.CachedTokens += h.CachedTokens
	}
	for _, c := range ru.choices {
		u.CompletionTokens += len(c.tokens)
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return &u
}

func (ru *completionRun) tokenString(id int) string {
	if ru.pc.cr.ReturnTokensAsTokenIDs {
		return fmt.Sprintf("token_id:%d", id)
	}
	return ru.pc.served.Tok.Decode([]int{id}, false)
}

// logprobs is a choice's logprobs in the completions form: with echo the prompt's tokens
// first (the first with null), then the generated tokens from from on. As vLLM counts them,
// the first token's text offset is base (0, or in a stream the characters sent before) and
// each next one adds the previous token's length.
func (ru *completionRun) logprobs(c *completionChoiceState, echo bool, from, base int) *CompletionLogprobs {
	k := *ru.pc.cr.Logprobs
	out := &CompletionLogprobs{TextOffset: []int{}, TokenLogprobs: []*float64{}, Tokens: []string{}, TopLogprobs: []map[string]float64{}}
	offset := base
	add := func(tok int, lp *float64, top map[string]float64) {
		s := ru.tokenString(tok)
		out.TextOffset = append(out.TextOffset, offset)
		out.Tokens = append(out.Tokens, s)
		out.TokenLogprobs = append(out.TokenLogprobs, lp)
		out.TopLogprobs = append(out.TopLogprobs, top)
		offset += len([]rune(s))
	}
	if echo {
		for i, id := range ru.pc.prompts[c.prompt].ids {
			if i == 0 || i >= len(c.promptLP) {
				add(id, nil, nil)
				continue
			}
			lp := c.promptLP[i]
			v := clampLP(lp.Logprob)
			top := map[string]float64{ru.tokenString(id): v}
			for j, t := range lp.Top {
				if j >= k {
					break
				}
				if s := ru.tokenString(t.Token); t.Token != id {
					top[s] = clampLP(t.Logprob)
				}
			}
			add(id, &v, top)
		}
	}
	for _, ev := range c.lps[from:] {
		v := clampLP(ev.Logprob)
		top := map[string]float64{ru.tokenString(ev.Token): v}
		for j, t := range ev.Top {
			if j >= k {
				break
			}
			if t.Token != ev.Token {
				top[ru.tokenString(t.Token)] = clampLP(t.Logprob)
			}
		}
		add(ev.Token, &v, top)
	}
	return out
}

// promptExtras sets a choice's prompt_logprobs, prompt_token_ids and token_ids when asked.
func (ru *completionRun) promptExtras(ch *CompletionChoice, c *completionChoiceState) {
	cr := ru.pc.cr
	if cr.PromptLogprobs != nil {
		k := ru.pc.plan.promptLP
		lps := make([]map[string]any, len(c.promptLP))
		for i, lp := range c.promptLP {
			if i == 0 {
				continue
			}
			m := map[string]any{fmt.Sprint(lp.Token): map[string]any{"logprob": clampLP(lp.Logprob), "rank": lp.Rank, "decoded_token": ru.tokenString(lp.Token)}}
			for j, t := range lp.Top {
				if j >= k {
					break
				}
				if _, ok := m[fmt.Sprint(t.Token)]; !ok {
					m[fmt.Sprint(t.Token)] = map[string]any{"logprob": clampLP(t.Logprob), "rank": j + 1, "decoded_token": ru.tokenString(t.Token)}
				}
			}
			lps[i] = m
		}
		ch.PromptLogprobs = lps
	}
	if cr.ReturnTokenIDs {
		ch.PromptTokenIDs = ru.pc.prompts[c.prompt].ids
		ch.TokenIDs = c.tokens
		if ch.TokenIDs == nil {
			ch.TokenIDs = []int{}
		}
	}
}

// completionChunk is one server-sent event of a streamed text completion.
type completionChunk struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// stream answers with server-sent events as vLLM does: per choice, with echo its prompt
// first, then its text as it comes, the last chunk of a choice with its finish reason;
// with stream_options.include_usage a last chunk of usage alone.
func (ru *completionRun) stream(w http.ResponseWriter, r *http.Request) {
	cr := ru.pc.cr
	sse := startSSE(w)
	includeUsage := cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage != nil && *cr.StreamOptions.IncludeUsage
	continuous := cr.StreamOptions != nil && cr.StreamOptions.ContinuousUsageStats
	send := func(ch CompletionChoice) bool {
		c := completionChunk{ID: ru.id, Object: "text_completion", Created: ru.created, Model: ru.pc.name, Choices: []CompletionChoice{ch}}
		if continuous {
			c.Usage = ru.usage()
		}
		return sse.data(c)
	}
	echoed := make([]bool, len(ru.choices))
	sentChars := make([]int, len(ru.choices))
	for pe := range ru.events {
		c := ru.apply(pe)
		if c == nil || c.done {
			continue
		}
		i := pe.prompt*ru.pc.plan.n + pe.ev.Choice
		echo := cr.Echo && !echoed[i]
		ch := CompletionChoice{Index: i, Text: pe.ev.Text.Content}
		if echo {
			ch.Text = ru.pc.prompts[c.prompt].text + ch.Text
		}
		if cr.Logprobs != nil && (len(c.lps) > c.sent || echo) {
			ch.Logprobs = ru.logprobs(c, echo, c.sent, sentChars[i])
		}
		if cr.ReturnTokenIDs && len(c.tokens) > c.sent {
			ch.TokenIDs = c.tokens[c.sent:]
		}
		c.sent = len(c.tokens)
		if c.finish != "" {
			f := c.finish
			ch.FinishReason, ch.StopReason = &f, c.stop
			c.done = true
		}
		if ch.Text == "" && ch.FinishReason == nil && ch.Logprobs == nil && ch.TokenIDs == nil {
			continue // nothing new to say (held back or a partial character)
		}
		echoed[i] = true
		sentChars[i] += len([]rune(ch.Text))
		if !send(ch) {
			for pe := range ru.events { // the client is gone: the engine aborts; drain
				ru.apply(pe)
			}
			return
		}
	}
	if r.Context().Err() != nil {
		return
	}
	if includeUsage {
		sse.data(completionChunk{ID: ru.id, Object: "text_completion", Created: ru.created, Model: ru.pc.name, Choices: []CompletionChoice{}, Usage: ru.usage()})
	}
	sse.done()
}

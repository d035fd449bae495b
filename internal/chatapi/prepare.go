package chatapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/toolcall"
)

// A chat request's way to the engine: the handler decodes the body and reads who asks
// (principalOf) and the trace project (TraceHeader); prepareChat, which knows no HTTP,
// checks the trace project against the principal, finds the model, validates the request
// (request.go), picks the chat template and the tools' constraint, renders the prompt, and
// tokenises it within the context's limits.

// prepared is a request rendered and tokenised.
type prepared struct {
	plan    *plan
	served  *serving.Served
	name    string // model name reported
	adapter *model.LoRA
	prompt  string
	ids     []int
	// who asked: its key is the request's fairness key and the traced call's user.
	who auth.Principal
	// traceProject is where the completion is traced ("" = not traced); body the request.
	traceProject string
	body         []byte
	started      time.Time
}

// principalOf is who an authenticated request acts as (the zero Principal when none).
func principalOf(r *http.Request) auth.Principal {
	p, _ := auth.FromContext(r.Context())
	return p
}

// prepare decodes a chat request's body and prepares it.
func (a *API) prepare(r *http.Request) (*prepared, error) {
	var req Request
	body, err := decodeBody(r, &req)
	if err != nil {
		return nil, err
	}
	return a.prepareChat(r.Context(), principalOf(r), r.Header.Get(TraceHeader), &req, body)
}

// decodeBody reads a request's JSON body into v (its content type checked) and returns it.
func decodeBody(r *http.Request, v any) ([]byte, error) {
	if err := httpx.CheckJSONContentType(r); err != nil {
		return nil, err
	}
	body, err := httpx.ReadBody(r)
	if err != nil {
		return nil, err
	}
	return body, httpx.Unmarshal(body, v, httpx.DecodeOptions{})
}

// prepareChat checks, renders and tokenises a chat request for who: traceProject is the
// TraceHeader's value ("" = not traced), body the request as received (traced).
func (a *API) prepareChat(ctx context.Context, who auth.Principal, traceProject string, reqp *Request, body []byte) (*prepared, error) {
	req := *reqp
	if err := a.checkTraceProject(who, traceProject); err != nil {
		return nil, err
	}
	served, name, adapter, err := a.resolveModel(ctx, who.Entity, req.Model)
	if err != nil {
		return nil, err
	}
	if len(req.Messages) == 0 || string(req.Messages) == "null" {
		return nil, bad("messages", "Field required: `messages`")
	}
	p, err := req.validate(served.Model.Config.VocabSize, a.MaxLogprobs, a.PriorityEnabled)
	if err != nil {
		return nil, err
	}
	tpl, err := chatTemplate(served, name, req.ChatTemplate)
	if err != nil {
		return nil, err
	}
	if err := p.constrainTools(served, tpl); err != nil {
		return nil, err
	}
	prompt, err := p.render(served, tpl, name)
	if err != nil {
		return nil, err
	}
	ids, err := p.tokenize(served, prompt)
	if err != nil {
		return nil, err
	}
	p.tokenParams(served, req.BadWords)
	return &prepared{plan: p, served: served, name: name, adapter: adapter, prompt: prompt, ids: ids, who: who,
		traceProject: traceProject, body: body, started: time.Now()}, nil
}

// checkTraceProject checks the trace project a request names ("" = none): tracing must be
// on, and the project who's entity's.
func (a *API) checkTraceProject(who auth.Principal, project string) error {
	if project == "" {
		return nil
	}
	if a.Tracer == nil {
		return apierror.BadRequest(TraceHeader, "Tracing of chat completions is not enabled on this server.")
	}
	_, _, err := who.Project(project, TraceHeader)
	return err
}

// resolveModel finds the served model a request names: a base model, or a trained
// checkpoint of entity (the caller's) on one (its adapter); name is the name to report.
func (a *API) resolveModel(ctx context.Context, entity, ref string) (served *serving.Served, name string, adapter *model.LoRA, err error) {
	served, ok := a.Models.Get(ref)
	name = ref
	if ok {
		name = served.Name
	}
	if !ok && a.Adapters != nil && looksLikeCheckpoint(ref) {
		ad, found, err := a.Adapters.ResolveAdapter(ctx, entity, ref)
		if err != nil {
			return nil, "", nil, err
		}
		if found {
			if served, ok = a.Models.Get(ad.Base); ok {
				adapter, name = ad.LoRA, ad.Name
			}
		}
	}
	if !ok {
		return nil, "", nil, apierror.NotFound("model", "The model `%s` does not exist.", ref)
	}
	return served, name, adapter, nil
}

// chatTemplate is the template a request renders with: its own chat_template, else the
// served model's; a model without one is refused (name: the model as reported).
func chatTemplate(served *serving.Served, name string, given *string) (*chattemplate.Template, error) {
	tpl := served.Template
	if given != nil {
		var err error
		if tpl, err = chattemplate.Compile(*given); err != nil {
			return nil, apierror.BadRequest("chat_template", "%s", err.Error())
		}
	}
	if tpl == nil {
		return nil, apierror.BadRequest("chat_template", "The model `%s` has no chat template; pass one in `chat_template`, or start the server with --chat-template %s=FILE.", name, served.Name)
	}
	return tpl, nil
}

// constrainTools picks the tool-call parser for the model and its template and, unless beam
// search runs, the constraint that tool_choice puts on the output (beside a JSON format, the
// choice between a call and the format).
func (p *plan) constrainTools(served *serving.Served, tpl *chattemplate.Template) error {
	if err := p.tools.resolve(served.ToolParser, tpl.Source()); err != nil {
		return err
	}
	if p.beam != nil || p.tools.family == "" {
		return nil
	}
	marker := toolcall.Marker(p.tools.family)
	id, ok := served.Tok.TokenID(marker)
	markerSpecial := ok && served.Tok.IsSpecial(id)
	switch {
	case p.structured == nil:
		spec, err := p.tools.constraint(markerSpecial)
		if err != nil {
			return err
		}
		p.structured = spec
	case p.tools.choice == "auto" && p.structured.JSONSchema() != nil:
		// A JSON format beside tools: the model either calls or answers in the format, as
		// OpenAI lets it (where calls can be told from the answer).
		if spec, err := toolcall.AutoOr(p.tools.family, p.tools.tools, p.tools.parallel, markerSpecial, p.structured.JSONSchema()); err == nil && spec != nil {
			p.structured = spec
		}
	}
	return nil
}

// render renders the request's messages with tpl (name: the model as reported, for vLLM's
// refusal of media parts).
func (p *plan) render(served *serving.Served, tpl *chattemplate.Template, name string) (string, error) {
	req := p.req
	special := served.SpecialTokens()
	in := chattemplate.Input{Messages: req.Messages, Tools: req.Tools, Documents: req.Documents,
		AddGenerationPrompt: p.agp, ContinueFinalMessage: req.ContinueFinalMessage, SpecialTokens: special, Kwargs: req.templateKwargs()}
	if p.tools.generic {
		// The tools, earlier calls and results written in where the template leaves them out.
		var err error
		if in, err = toolcall.Prepare(in, tpl.Caps(special), p.tools.family != ""); err != nil {
			return "", bad("messages", "%s", err.Error())
		}
	}
	prompt, err := tpl.Render(in)
	if err != nil {
		var te *chattemplate.TemplateError
		if errors.As(err, &te) {
			return "", apierror.BadRequest("messages", "%s", te.Msg)
		}
		var mp *chattemplate.MediaPartError
		if errors.As(err, &mp) {
			// vLLM's words for a text-only model given an image, audio or video part.
			return "", apierror.BadRequest(mp.Path, "%s is not a multimodal model", name)
		}
		return "", err
	}
	return prompt, nil
}

// tokenize encodes a rendered prompt and fits the request to the model's context: the
// prompt truncated as asked, max_tokens checked against the context or, when not given,
// set to what is left of it.
func (p *plan) tokenize(served *serving.Served, prompt string) ([]int, error) {
	req := p.req
	maxLen := served.MaxModelLen()
	// A prompt that cannot fit the context whatever its tokens is refused before it is
	// encoded: encoding tens of megabytes takes gigabytes. Each token stands for at most
	// MaxInputBytesPerToken bytes, so the prompt has at least len/per tokens. Truncation
	// (truncate_prompt_tokens) keeps long prompts legal; the body limit bounds those.
	if per := served.Tok.MaxInputBytesPerToken(); per > 0 && p.truncate == 0 {
		if least := (len(prompt) + per - 1) / per; least > maxLen {
			return nil, apierror.BadRequest("input_tokens", "This model's maximum context length is %d tokens. However, your prompt has %d bytes after the chat template, so at least %d input tokens (a token stands for at most %d bytes). Please reduce the length of the input messages.", maxLen, len(prompt), least, per)
		}
	}
	ids := served.Tok.Encode(prompt, req.AddSpecialTokens)
	if p.maxTokens > maxLen {
		param := "max_tokens"
		if req.MaxCompletionTokens != nil {
			param = "max_completion_tokens"
		}
		return nil, apierror.BadRequest(param, "%s=%d cannot be greater than max_model_len=max_total_tokens=%d. Please request fewer output tokens.", param, p.maxTokens, maxLen)
	}
	ids, err := p.truncateIDs(ids, maxLen)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, apierror.BadRequest("messages", "The prompt is empty after rendering the chat template.")
	}
	if p.maxTokens == 0 {
		p.maxTokens = maxLen - len(ids)
		if p.maxTokens < 1 {
			return nil, apierror.BadRequest("input_tokens", "This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", maxLen, len(ids))
		}
	} else if len(ids)+p.maxTokens > maxLen {
		return nil, apierror.BadRequest("input_tokens", "This model's maximum context length is %d tokens. However, you requested %d output tokens and your prompt contains %d input tokens, for a total of %d tokens. Please reduce the length of the input prompt or the number of requested output tokens.", maxLen, p.maxTokens, len(ids), len(ids)+p.maxTokens)
	}
	return ids, nil
}

// truncateIDs keeps the last truncate_prompt_tokens of a prompt's ids (-1: as many as fit
// the context beside max_tokens).
func (p *plan) truncateIDs(ids []int, maxLen int) ([]int, error) {
	switch {
	case p.truncate > 0:
		if p.truncate > maxLen-p.maxTokens {
			return nil, apierror.BadRequest("truncate_prompt_tokens", "truncate_prompt_tokens=%d cannot be greater than max_model_len - max_tokens = %d. Please request a smaller truncation size.", p.truncate, maxLen-p.maxTokens)
		}
		if len(ids) > p.truncate {
			ids = ids[len(ids)-p.truncate:]
		}
	case p.truncate == -1:
		if keep := maxLen - p.maxTokens; len(ids) > keep {
			ids = ids[len(ids)-keep:]
		}
	}
	return ids, nil
}

// tokenParams sets the sampling parameters that need the tokenizer: the ids that end
// generation (serving.Served.StopIDs: the model's end-of-sequence ids, the tokenizer's, and
// its end-of-turn tokens) and bad_words as token sequences
// (each word alone and after a space).
func (p *plan) tokenParams(served *serving.Served, badWords []string) {
	p.params.EOS = served.StopIDs()
	for _, w := range badWords {
		for _, form := range []string{w, " " + strings.TrimLeft(w, " ")} {
			if seq := served.Tok.Encode(form, false); len(seq) > 0 {
				p.params.BadWords = append(p.params.BadWords, seq)
			}
		}
	}
}

package chatapi

import (
	"encoding/json"
	"net/http"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/httpx"
)

// vLLM's tokenizer routes, at the server's root: POST /tokenize (a prompt, or chat messages
// rendered by the model's template), POST /detokenize and GET /tokenizer_info. Evaluation
// harnesses use them instead of a tokenizer of their own (lm-evaluation-harness's remote
// tokenizer for local-completions). Without `model` they answer for the default model (the
// first --model given, else the demo model), as vLLM answers for the one it serves.

// TokenizeRequest is the body of POST /tokenize: prompt, or messages (the chat form).
type TokenizeRequest struct {
	Model                string          `json:"model"`
	Prompt               *string         `json:"prompt"`
	Messages             json.RawMessage `json:"messages"`
	AddSpecialTokens     *bool           `json:"add_special_tokens"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ContinueFinalMessage bool            `json:"continue_final_message"`
	ChatTemplate         *string         `json:"chat_template"`
	ChatTemplateKwargs   json.RawMessage `json:"chat_template_kwargs"`
	Tools                json.RawMessage `json:"tools"`
	ReturnTokenStrs      bool            `json:"return_token_strs"`
}

// TokenizeResponse is the answer of POST /tokenize.
type TokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int    `json:"tokens"`
	TokenStrs   []string `json:"token_strs"`
}

// DetokenizeRequest is the body of POST /detokenize.
type DetokenizeRequest struct {
	Model  string `json:"model"`
	Tokens []int  `json:"tokens"`
}

func (a *API) tokenize(w http.ResponseWriter, r *http.Request) {
	var req TokenizeRequest
	body, err := decodeBody(r, &req)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	served, _, _, err := a.resolveModel(r.Context(), entityOf(r), req.Model)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	var ids []int
	switch {
	case req.Prompt != nil && len(req.Messages) > 0:
		apierror.Write(w, r, bad("prompt", "Give `prompt` or `messages`, not both."))
		return
	case req.Prompt != nil:
		ids = served.Tok.Encode(*req.Prompt, req.AddSpecialTokens == nil || *req.AddSpecialTokens)
	case len(req.Messages) > 0 && string(req.Messages) != "null":
		chat := &Request{Common: Common{Model: req.Model}, Messages: req.Messages, AddGenerationPrompt: req.AddGenerationPrompt,
			ContinueFinalMessage: req.ContinueFinalMessage, AddSpecialTokens: req.AddSpecialTokens != nil && *req.AddSpecialTokens,
			ChatTemplate: req.ChatTemplate, ChatTemplateKwargs: req.ChatTemplateKwargs, Tools: req.Tools}
		pr, err := a.prepareChat(r.Context(), principalOf(r), r.Header.Get(TraceHeader), chat, body)
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		ids = pr.ids
	default:
		apierror.Write(w, r, bad("prompt", "Field required: `prompt` (or `messages`)"))
		return
	}
	resp := TokenizeResponse{Count: len(ids), MaxModelLen: served.MaxModelLen(), Tokens: ids}
	if resp.Tokens == nil {
		resp.Tokens = []int{}
	}
	if req.ReturnTokenStrs {
		resp.TokenStrs = make([]string, len(ids))
		for i, id := range ids {
			resp.TokenStrs[i] = served.Tok.Decode([]int{id}, false)
		}
	}
	httpx.WriteJSON(w, http.StatusOK, resp)
}

func (a *API) detokenize(w http.ResponseWriter, r *http.Request) {
	var req DetokenizeRequest
	if _, err := decodeBody(r, &req); err != nil {
		apierror.Write(w, r, err)
		return
	}
	served, _, _, err := a.resolveModel(r.Context(), entityOf(r), req.Model)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	vocab := served.Model.Config.VocabSize
	for i, id := range req.Tokens {
		if id < 0 || id >= vocab {
			apierror.Write(w, r, bad("tokens", "tokens[%d] = %d is out of vocabulary (the model has %d tokens).", i, id, vocab))
			return
		}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"prompt": served.Tok.Decode(req.Tokens, false)})
}

// tokenizerInfo is GET /tokenizer_info: the tokenizer's special tokens, chat template and
// context, in the keys of its tokenizer_config.json (a missing token is null).
func (a *API) tokenizerInfo(w http.ResponseWriter, r *http.Request) {
	served, name, _, err := a.resolveModel(r.Context(), entityOf(r), r.URL.Query().Get("model"))
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	cfg := served.Tok.Config()
	orNull := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	info := map[string]any{"model": name, "tokenizer_class": "PreTrainedTokenizerFast",
		"bos_token": orNull(cfg.BOSToken), "eos_token": orNull(cfg.EOSToken), "pad_token": orNull(cfg.PadToken), "unk_token": orNull(cfg.UnkToken),
		"add_bos_token": cfg.AddBOSToken, "add_eos_token": cfg.AddEOSToken, "chat_template": orNull(served.Tok.ChatTemplate("")),
		"model_max_length": served.MaxModelLen(), "vocab_size": served.Model.Config.VocabSize}
	httpx.WriteJSON(w, http.StatusOK, info)
}

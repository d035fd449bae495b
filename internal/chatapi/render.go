package chatapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/httpx"
)

// RenderResponse is POST /v1/chat/completions/render: vLLM's GenerateRequest (the token-in
// request its render route answers, ready for a token-in generate endpoint), plus Hone's
// fields: the rendered prompt text, prompt_token_ids (the same ids as token_ids, kept for
// clients of earlier Hone versions) and the resolved max_tokens.
type RenderResponse struct {
	RequestID        string          `json:"request_id"`
	TokenIDs         []int           `json:"token_ids"`
	Features         any             `json:"features"` // multimodal features: always null (text only)
	SamplingParams   SamplingParams  `json:"sampling_params"`
	Model            string          `json:"model"`
	Stream           bool            `json:"stream"`
	StreamOptions    *StreamOptions  `json:"stream_options"`
	CacheSalt        *string         `json:"cache_salt"`
	Priority         int             `json:"priority"`
	KVTransferParams json.RawMessage `json:"kv_transfer_params"`

	Prompt         string `json:"prompt"`
	PromptTokenIDs []int  `json:"prompt_token_ids"`
	MaxTokens      int    `json:"max_tokens"`
}

// SamplingParams is vLLM's SamplingParams as its render route writes them, with every field
// Hone uses written out (vLLM leaves out those at their default: a reader that fills in
// vLLM's defaults reads the same values). Values are the ones the request runs with: the
// resolved max_tokens, a temperature in (0, 0.01) raised to 0.01, and top_p, top_k and min_p
// reset when sampling is greedy, as vLLM's SamplingParams does.
type SamplingParams struct {
	N                          int                `json:"n"`
	PresencePenalty            float64            `json:"presence_penalty"`
	FrequencyPenalty           float64            `json:"frequency_penalty"`
	RepetitionPenalty          float64            `json:"repetition_penalty"`
	Temperature                float64            `json:"temperature"`
	TopP                       float64            `json:"top_p"`
	TopK                       int                `json:"top_k"`
	MinP                       float64            `json:"min_p"`
	Seed                       *int64             `json:"seed"`
	Stop                       []string           `json:"stop"`
	StopTokenIDs               []int              `json:"stop_token_ids"`
	IgnoreEOS                  bool               `json:"ignore_eos"`
	MaxTokens                  int                `json:"max_tokens"`
	MinTokens                  int                `json:"min_tokens"`
	Logprobs                   *int               `json:"logprobs"`
	PromptLogprobs             *int               `json:"prompt_logprobs"`
	Detokenize                 bool               `json:"detokenize"`
	SkipSpecialTokens          bool               `json:"skip_special_tokens"`
	SpacesBetweenSpecialTokens bool               `json:"spaces_between_special_tokens"`
	IncludeStopStrInOutput     bool               `json:"include_stop_str_in_output"`
	OutputKind                 int                `json:"output_kind"` // vLLM's RequestOutputKind: 1 DELTA (stream), 2 FINAL_ONLY
	OutputTextBufferLength     int                `json:"output_text_buffer_length"`
	StructuredOutputs          map[string]any     `json:"structured_outputs"`
	LogitBias                  map[string]float64 `json:"logit_bias"`
	AllowedTokenIDs            []int              `json:"allowed_token_ids"`
	ExtraArgs                  map[string]any     `json:"extra_args"`
	BadWords                   []string           `json:"bad_words"`
	SkipReadingPrefixCache     bool               `json:"skip_reading_prefix_cache"`
	RepetitionDetection        *RepetitionParams  `json:"repetition_detection"`
}

// RepetitionParams is vLLM's RepetitionDetectionParams.
type RepetitionParams struct {
	MaxPatternSize int `json:"max_pattern_size"`
	MinPatternSize int `json:"min_pattern_size"`
	MinCount       int `json:"min_count"`
}

// vLLM's RequestOutputKind values.
const (
	outputKindDelta     = 1
	outputKindFinalOnly = 2
)

// completionID is the id of a completion: chatcmpl-<request_id> when the request gives one,
// else chatcmpl-<the HTTP request id>.
func completionID(r *http.Request, req *Request) string {
	if req.RequestID != "" {
		return "chatcmpl-" + req.RequestID
	}
	return "chatcmpl-" + httpx.RequestID(r.Context())
}

func (a *API) render(w http.ResponseWriter, r *http.Request) {
	pr, err := a.prepare(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	req := pr.plan.req
	if req.UseBeamSearch {
		// As vLLM: a token-in request has no way to say "beam search".
		apierror.Write(w, r, apierror.BadRequest("use_beam_search", "Beam search is not supported by the render endpoint"))
		return
	}
	out := RenderResponse{RequestID: completionID(r, req), TokenIDs: pr.ids, SamplingParams: pr.samplingParams(),
		Model: pr.name, Stream: req.Stream, CacheSalt: req.CacheSalt, Priority: pr.plan.priority,
		KVTransferParams: req.KVTransferParams, Prompt: pr.prompt, PromptTokenIDs: pr.ids, MaxTokens: pr.plan.maxTokens}
	if req.Stream {
		out.StreamOptions = req.StreamOptions
	}
	if len(out.KVTransferParams) == 0 {
		out.KVTransferParams = nil
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// samplingParams is the request's sampling parameters in vLLM's form.
func (pr *prepared) samplingParams() SamplingParams {
	p := pr.plan
	req, sp := p.req, p.params
	out := SamplingParams{N: p.n, PresencePenalty: sp.PresencePenalty, FrequencyPenalty: sp.FrequencyPenalty,
		RepetitionPenalty: sp.RepetitionPenalty, Temperature: sp.Temperature, TopP: sp.TopP, TopK: sp.TopK, MinP: sp.MinP,
		Seed: sp.Seed, Stop: p.stops, StopTokenIDs: dedup(req.StopTokenIDs), IgnoreEOS: req.IgnoreEOS,
		MaxTokens: p.maxTokens, MinTokens: sp.MinTokens, PromptLogprobs: req.PromptLogprobs, Detokenize: true,
		SkipSpecialTokens:          req.SkipSpecialTokens == nil || *req.SkipSpecialTokens,
		SpacesBetweenSpecialTokens: req.SpacesBetweenSpecialTokens == nil || *req.SpacesBetweenSpecialTokens,
		IncludeStopStrInOutput:     req.IncludeStopStrInOutput, OutputKind: outputKindFinalOnly,
		AllowedTokenIDs: sp.AllowedTokenIDs, BadWords: dedupStrings(req.BadWords),
		SkipReadingPrefixCache: req.PromptLogprobs != nil}
	if req.Stream {
		out.OutputKind = outputKindDelta
	}
	if out.Stop == nil {
		out.Stop = []string{}
	}
	if out.StopTokenIDs == nil {
		out.StopTokenIDs = []int{}
	}
	if out.BadWords == nil {
		out.BadWords = []string{}
	}
	if out.Temperature > 0 && out.Temperature < 0.01 {
		out.Temperature = 0.01
	}
	if out.Temperature < 1e-5 {
		out.TopP, out.TopK, out.MinP = 1, 0, 0
	}
	if req.Logprobs {
		n := p.topLogprobs
		if req.TopLogprobs != nil {
			if v, err := req.TopLogprobs.Int64(); err == nil && v == -1 {
				n = -1
			}
		}
		out.Logprobs = &n
	}
	if len(p.stops) > 0 && !req.IncludeStopStrInOutput {
		for _, s := range p.stops {
			out.OutputTextBufferLength = max(out.OutputTextBufferLength, utf8.RuneCountInString(s)-1)
		}
	}
	if len(sp.LogitBias) > 0 {
		out.LogitBias = map[string]float64{}
		for id, v := range sp.LogitBias {
			out.LogitBias[strconv.Itoa(id)] = min(100, max(-100, v))
		}
	}
	if len(req.KVTransferParams) > 0 && string(req.KVTransferParams) != "null" {
		out.ExtraArgs = map[string]any{"kv_transfer_params": req.KVTransferParams}
	}
	if r := p.repetition; r != nil {
		out.RepetitionDetection = &RepetitionParams{MaxPatternSize: r.MaxPattern, MinPatternSize: r.MinPattern, MinCount: r.MinCount}
	}
	out.StructuredOutputs = structuredOutputs(req)
	return out
}

// structuredOutputs is vLLM's StructuredOutputsParams of the request: structured_outputs as
// given, with response_format's constraint over it (json_schema → json, json_object,
// structural_tag), as vLLM merges them.
func structuredOutputs(req *Request) map[string]any {
	var out map[string]any
	if len(req.StructuredOutputs) > 0 && string(req.StructuredOutputs) != "null" {
		json.Unmarshal(req.StructuredOutputs, &out)
	}
	if len(req.ResponseFormat) > 0 && string(req.ResponseFormat) != "null" {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		json.Unmarshal(req.ResponseFormat, &rf)
		set := func(k string, v any) {
			if out == nil {
				out = map[string]any{}
			}
			out[k] = v
		}
		switch rf.Type {
		case "json_object":
			set("json_object", true)
		case "json_schema":
			schema := json.RawMessage(`{}`)
			if rf.JSONSchema != nil && len(rf.JSONSchema.Schema) > 0 && string(rf.JSONSchema.Schema) != "null" {
				schema = rf.JSONSchema.Schema
			}
			set("json", schema)
		case "structural_tag":
			set("structural_tag", string(req.ResponseFormat))
		}
	}
	return out
}

func dedup(ids []int) []int {
	var out []int
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func dedupStrings(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

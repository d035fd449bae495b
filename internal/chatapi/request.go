package chatapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/sample"
	"github.com/honeai/hone/internal/structured"
)

// Request is the chat completions request body (the seed's table; unknown fields are
// ignored, as vLLM does): the fields it shares with a text completion request (Common), and
// the chat's own.
type Request struct {
	Common
	Messages             json.RawMessage `json:"messages"`
	MaxCompletionTokens  *int            `json:"max_completion_tokens"`
	Logprobs             bool            `json:"logprobs"`
	TopLogprobs          *json.Number    `json:"top_logprobs"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ContinueFinalMessage bool            `json:"continue_final_message"`
	AddSpecialTokens     bool            `json:"add_special_tokens"`
	ChatTemplate         *string         `json:"chat_template"`
	ChatTemplateKwargs   json.RawMessage `json:"chat_template_kwargs"`
	Documents            json.RawMessage `json:"documents"`
	Tools                json.RawMessage `json:"tools"`
	ToolChoice           json.RawMessage `json:"tool_choice"`
	ParallelToolCalls    *bool           `json:"parallel_tool_calls"`
	IncludeReasoning     *bool           `json:"include_reasoning"`
	ReasoningEffort      *string         `json:"reasoning_effort"`
	ServiceTier          *string         `json:"service_tier"`
}

// Common holds the fields a chat and a text completion request (CompletionRequest) share:
// the model, sampling, stops, output options and scheduling.
type Common struct {
	Model                      string             `json:"model"`
	Stream                     bool               `json:"stream"`
	StreamOptions              *StreamOptions     `json:"stream_options"`
	N                          *int               `json:"n"`
	MaxTokens                  *int               `json:"max_tokens"`
	MinTokens                  int                `json:"min_tokens"`
	Temperature                *float64           `json:"temperature"`
	TopP                       *float64           `json:"top_p"`
	TopK                       *int               `json:"top_k"`
	MinP                       *float64           `json:"min_p"`
	RepetitionPenalty          *float64           `json:"repetition_penalty"`
	FrequencyPenalty           float64            `json:"frequency_penalty"`
	PresencePenalty            float64            `json:"presence_penalty"`
	LogitBias                  map[string]float64 `json:"logit_bias"`
	AllowedTokenIDs            []int              `json:"allowed_token_ids"`
	BadWords                   []string           `json:"bad_words"`
	Seed                       *json.Number       `json:"seed"`
	Stop                       json.RawMessage    `json:"stop"`
	StopTokenIDs               []int              `json:"stop_token_ids"`
	IncludeStopStrInOutput     bool               `json:"include_stop_str_in_output"`
	IgnoreEOS                  bool               `json:"ignore_eos"`
	PromptLogprobs             *int               `json:"prompt_logprobs"`
	ReturnTokensAsTokenIDs     bool               `json:"return_tokens_as_token_ids"`
	ReturnTokenIDs             bool               `json:"return_token_ids"`
	Echo                       bool               `json:"echo"`
	SkipSpecialTokens          *bool              `json:"skip_special_tokens"`
	SpacesBetweenSpecialTokens *bool              `json:"spaces_between_special_tokens"`
	TruncatePromptTokens       *json.Number       `json:"truncate_prompt_tokens"`
	Priority                   json.Number        `json:"priority"`
	RequestID                  string             `json:"request_id"`
	CacheSalt                  *string            `json:"cache_salt"`
	UseBeamSearch              bool               `json:"use_beam_search"`
	LengthPenalty              *float64           `json:"length_penalty"`
	StructuredOutputs          json.RawMessage    `json:"structured_outputs"`
	ResponseFormat             json.RawMessage    `json:"response_format"`
	KVTransferParams           json.RawMessage    `json:"kv_transfer_params"`
	RepetitionDetection        json.RawMessage    `json:"repetition_detection"`
	Speculative                json.RawMessage    `json:"speculative"`
	User                       *string            `json:"user"`
}

// StreamOptions is stream_options.
type StreamOptions struct {
	IncludeUsage         *bool `json:"include_usage"`
	ContinuousUsageStats bool  `json:"continuous_usage_stats"`
}

// MaxN is the most choices (n, best_of, beam width) one request may ask for: vLLM's
// VLLM_MAX_N_SEQUENCES default. It is checked before n enters any product, so no admission
// arithmetic can wrap; whether the choices fit the KV cache is the engine's to say.
const MaxN = 16384

// plan is a validated request, ready to render and run.
type plan struct {
	req         *Request
	params      sample.Params
	n           int
	maxTokens   int // 0 = up to the context
	stops       []string
	cacheSalt   string
	topLogprobs int
	promptLP    int // -1 = none
	priority    int
	truncate    int // 0 = none, -1 = to the context
	agp         bool
	repetition  *inference.Repetition
	beam        *inference.Beam
	structured  *structured.Spec
	tools       *toolPlan
	spec        *inference.Speculative // speculative (Hone extension)
	noSpec      bool
}

// parseRepetition reads repetition_detection {max_pattern_size, min_pattern_size, min_count}
// with the checks of vLLM's RepetitionDetectionParams.
func parseRepetition(raw json.RawMessage) (*inference.Repetition, error) {
	var f struct {
		MaxPatternSize *int `json:"max_pattern_size"`
		MinPatternSize *int `json:"min_pattern_size"`
		MinCount       *int `json:"min_count"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, bad("repetition_detection", "repetition_detection must be an object with integer fields max_pattern_size, min_pattern_size and min_count: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	r := &inference.Repetition{}
	if f.MaxPatternSize != nil {
		r.MaxPattern = *f.MaxPatternSize
	}
	if f.MinPatternSize != nil {
		r.MinPattern = *f.MinPatternSize
	}
	if f.MinCount != nil {
		r.MinCount = *f.MinCount
	}
	switch {
	case r.MaxPattern < 0:
		return nil, bad("repetition_detection", "max_pattern_size must be non-negative, got %d.", r.MaxPattern)
	case r.MinPattern < 0:
		return nil, bad("repetition_detection", "min_pattern_size must be non-negative, got %d.", r.MinPattern)
	case r.MaxPattern > 0 && r.MinPattern > r.MaxPattern:
		return nil, bad("repetition_detection", "min_pattern_size must be less than or equal to max_pattern_size, got %d > %d.", r.MinPattern, r.MaxPattern)
	case r.MaxPattern > 0 && r.MinCount < 2:
		return nil, bad("repetition_detection", "min_count must be at least 2 when repetition detection is enabled, got %d.", r.MinCount)
	}
	if r.MaxPattern == 0 {
		return nil, nil
	}
	return r, nil
}

func bad(param, format string, args ...any) error {
	return apierror.BadRequest(param, format, args...)
}

// validate checks the request with vLLM's rules and messages (vllm-chat.md §1.3), all but
// its messages (the caller's: completions have none), one concern after another in vLLM's
// order: the first refusal is the answer.
func (req *Request) validate(vocab int, maxLogprobs int, priorityEnabled bool) (*plan, error) {
	p := &plan{req: req, n: 1, promptLP: -1, agp: true}
	for _, check := range []func() error{
		p.checkTemplateFlags,
		p.checkStreamOptions,
		func() error { return p.checkLogprobs(vocab, maxLogprobs) },
		p.checkToolsAndFormat,
		p.checkTemplateKwargs,
		func() error { return p.checkSampling(vocab) },
		p.checkChoices,
		p.checkLengths,
		p.checkStops,
		func() error { return p.checkPriority(priorityEnabled) },
		p.checkTruncation,
		p.checkRepetition,
		p.checkSpeculative,
		p.checkCacheSalt,
	} {
		if err := check(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// checkTemplateFlags reads add_generation_prompt beside continue_final_message.
func (p *plan) checkTemplateFlags() error {
	req := p.req
	if req.AddGenerationPrompt != nil {
		p.agp = *req.AddGenerationPrompt
	}
	if req.ContinueFinalMessage && p.agp {
		return bad("continue_final_message", "Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
	}
	return nil
}

// checkStreamOptions refuses stream_options on a request that does not stream.
func (p *plan) checkStreamOptions() error {
	req := p.req
	if req.StreamOptions != nil && !req.Stream && (req.StreamOptions.IncludeUsage != nil || req.StreamOptions.ContinuousUsageStats) {
		return bad("stream_options", "Stream options can only be defined when `stream=True`.")
	}
	return nil
}

// checkLogprobs reads top_logprobs and prompt_logprobs (-1: the whole vocabulary), each at
// most maxLogprobs.
func (p *plan) checkLogprobs(vocab, maxLogprobs int) error {
	req := p.req
	if req.TopLogprobs != nil {
		v, err := req.TopLogprobs.Int64()
		if err != nil {
			return bad("top_logprobs", "`top_logprobs` must be an integer.")
		}
		if v < 0 && v != -1 {
			return bad("top_logprobs", "`top_logprobs` must be a positive value or -1.")
		}
		if (v > 0 || v == -1) && !req.Logprobs {
			return bad("top_logprobs", "when using `top_logprobs`, `logprobs` must be set to true.")
		}
		if v > int64(maxLogprobs) || v == -1 && vocab > maxLogprobs {
			n := v
			if v == -1 {
				n = int64(vocab)
			}
			return bad("top_logprobs", "Requested sample logprobs of %d, which is greater than max allowed: %d", n, maxLogprobs)
		}
		p.topLogprobs = int(v)
		if v == -1 {
			p.topLogprobs = vocab
		}
	}
	if req.PromptLogprobs != nil {
		v := *req.PromptLogprobs
		if req.Stream && (v > 0 || v == -1) {
			return bad("prompt_logprobs", "`prompt_logprobs` are not available when `stream=True`.")
		}
		if v < 0 && v != -1 {
			return bad("prompt_logprobs", "`prompt_logprobs` must be a positive value or -1.")
		}
		if v > maxLogprobs || v == -1 && vocab > maxLogprobs {
			return bad("prompt_logprobs", "Requested prompt logprobs of %d, which is greater than max allowed: %d", v, maxLogprobs)
		}
		p.promptLP = v
		if v == -1 {
			p.promptLP = vocab
		}
	}
	return nil
}

// checkToolsAndFormat reads tools and tool_choice (parseTools) and the structured output
// constraint (structured_outputs, response_format), and what neither combines with: each
// other when a call is forced, and beam search.
func (p *plan) checkToolsAndFormat() error {
	req := p.req
	tp, err := req.parseTools()
	if err != nil {
		return err
	}
	p.tools = tp
	spec, err := structured.FromRequest(req.StructuredOutputs, req.ResponseFormat)
	if err != nil {
		return err
	}
	if spec != nil && (tp.choice == "required" || tp.choice == "named") {
		if len(req.StructuredOutputs) > 0 && string(req.StructuredOutputs) != "null" {
			return bad("tool_choice", "You can only either use constraints for structured outputs or tools, not both.")
		}
		// A response_format beside a forced call: the answer is the call, with no text for
		// the format to shape (OpenAI answers the call; the format applies to a later answer).
		spec = nil
	}
	if tp.choice != "none" && req.UseBeamSearch && len(tp.tools) > 0 && tp.explicit && tp.choice != "auto" {
		return bad("use_beam_search", "Beam search cannot be combined with tool_choice %q (a constrained tool call).", tp.choice)
	}
	p.structured = spec
	if spec != nil && req.UseBeamSearch {
		return bad("use_beam_search", "Beam search cannot be combined with structured outputs.")
	}
	return nil
}

// checkTemplateKwargs checks that chat_template_kwargs is an object without the keys vLLM
// refuses there.
func (p *plan) checkTemplateKwargs() error {
	req := p.req
	if len(req.ChatTemplateKwargs) == 0 || string(req.ChatTemplateKwargs) == "null" {
		return nil
	}
	var kw map[string]json.RawMessage
	if err := json.Unmarshal(req.ChatTemplateKwargs, &kw); err != nil {
		return bad("chat_template_kwargs", "`chat_template_kwargs` must be a JSON object.")
	}
	var unexpected []string
	for _, k := range []string{"chat_template", "tokenize"} {
		if _, ok := kw[k]; ok {
			unexpected = append(unexpected, "'"+k+"'")
		}
	}
	if len(unexpected) > 0 {
		return bad("chat_template_kwargs", "Found unexpected chat template kwargs from request: {%s}", strings.Join(unexpected, ", "))
	}
	return nil
}

// checkSampling reads the sampling parameters (temperature, top_p, top_k, min_p, penalties,
// min_tokens, allowed and stop token ids, logit_bias, seed) over sample.Defaults and checks
// them (sample.Params.Validate).
func (p *plan) checkSampling(vocab int) error {
	req := p.req
	sp := sample.Defaults()
	if req.Temperature != nil {
		sp.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		sp.TopP = *req.TopP
	}
	if req.TopK != nil {
		sp.TopK = *req.TopK
	}
	if req.MinP != nil {
		sp.MinP = *req.MinP
	}
	if req.RepetitionPenalty != nil {
		sp.RepetitionPenalty = *req.RepetitionPenalty
	}
	sp.FrequencyPenalty, sp.PresencePenalty = req.FrequencyPenalty, req.PresencePenalty
	sp.MinTokens = req.MinTokens
	sp.AllowedTokenIDs = req.AllowedTokenIDs
	sp.StopTokenIDs = req.StopTokenIDs
	if len(req.LogitBias) > 0 {
		sp.LogitBias = map[int]float64{}
		var badKeys []string
		for k, v := range req.LogitBias {
			id, err := strconv.Atoi(k)
			if err != nil {
				badKeys = append(badKeys, "'"+k+"'")
				continue
			}
			sp.LogitBias[id] = v
		}
		if len(badKeys) > 0 {
			return bad("logit_bias", "logit_bias contains key(s) that cannot be converted to integer token IDs: [%s]", strings.Join(badKeys, ", "))
		}
	}
	if req.Seed != nil {
		s, err := req.Seed.Int64()
		if err != nil {
			return bad("seed", "Input should be greater than or equal to %d and less than or equal to %d", int64(math.MinInt64), int64(math.MaxInt64))
		}
		if s != -1 {
			sp.Seed = &s
		}
	}
	if field, err := sp.Validate(vocab); err != nil {
		return bad(field, "%s", err.Error())
	}
	p.params = sp
	return nil
}

// checkChoices reads n (1 to MaxN; 1 under greedy sampling) and beam search (its width n,
// its length_penalty). It needs the sampling parameters (checkSampling).
func (p *plan) checkChoices() error {
	req := p.req
	if req.N != nil {
		if *req.N < 1 {
			return bad("n", "n must be at least 1, got %d.", *req.N)
		}
		if *req.N > MaxN {
			return bad("n", "n must be at most %d, got %d.", MaxN, *req.N)
		}
		p.n = *req.N
	}
	if req.UseBeamSearch {
		lp := 1.0
		if req.LengthPenalty != nil {
			lp = *req.LengthPenalty
			if math.IsNaN(lp) || math.IsInf(lp, 0) {
				return bad("length_penalty", "length_penalty must be a finite number, got %v.", lp)
			}
		}
		p.beam = &inference.Beam{Width: p.n, LengthPenalty: lp}
	} else if p.n > 1 && p.params.Greedy() {
		return bad("n", "n must be 1 when using greedy sampling, got %d.", p.n)
	}
	return nil
}

// checkLengths reads max_completion_tokens (before max_tokens) and checks min_tokens
// against it.
func (p *plan) checkLengths() error {
	req := p.req
	switch {
	case req.MaxCompletionTokens != nil:
		p.maxTokens = *req.MaxCompletionTokens
		if p.maxTokens < 1 {
			return bad("max_completion_tokens", "max_tokens must be at least 1, got %d.", p.maxTokens)
		}
	case req.MaxTokens != nil:
		p.maxTokens = *req.MaxTokens
		if p.maxTokens < 1 {
			return bad("max_tokens", "max_tokens must be at least 1, got %d.", p.maxTokens)
		}
	}
	if p.maxTokens > 0 && p.params.MinTokens > p.maxTokens {
		return bad("min_tokens", "min_tokens must be less than or equal to max_tokens=%d, got %d.", p.maxTokens, p.params.MinTokens)
	}
	return nil
}

// checkStops reads stop (a string or a list of strings) and checks bad_words, neither with
// an empty string.
func (p *plan) checkStops() error {
	req := p.req
	if len(req.Stop) > 0 && string(req.Stop) != "null" {
		var one string
		if err := json.Unmarshal(req.Stop, &one); err == nil {
			p.stops = []string{one}
		} else if err := json.Unmarshal(req.Stop, &p.stops); err != nil {
			return bad("stop", "`stop` must be a string or a list of strings.")
		}
		for _, s := range p.stops {
			if s == "" {
				return bad("stop", "stop cannot contain an empty string.")
			}
		}
	}
	for _, w := range req.BadWords {
		if strings.TrimSpace(w) == "" {
			return bad("bad_words", "bad_words cannot contain an empty string.")
		}
	}
	return nil
}

// checkPriority reads priority: a 32-bit integer, other than 0 only when the server
// schedules by priority.
func (p *plan) checkPriority(priorityEnabled bool) error {
	req := p.req
	if req.Priority == "" {
		return nil
	}
	v, err := req.Priority.Int64()
	if err != nil {
		return bad("priority", "`priority` must be an integer that fits in 64 bits.")
	}
	if v != 0 && !priorityEnabled {
		return bad("priority", "Got priority %d but Priority scheduling is not enabled.", v)
	}
	if v > math.MaxInt32 || v < math.MinInt32 {
		return bad("priority", "`priority` must be between %d and %d.", math.MinInt32, math.MaxInt32)
	}
	p.priority = int(v)
	return nil
}

// checkTruncation reads truncate_prompt_tokens (-1: to the context).
func (p *plan) checkTruncation() error {
	req := p.req
	if req.TruncatePromptTokens == nil {
		return nil
	}
	v, err := req.TruncatePromptTokens.Int64()
	if err != nil || v < -1 {
		return bad("truncate_prompt_tokens", "Input should be greater than or equal to -1")
	}
	p.truncate = int(v)
	return nil
}

// checkRepetition reads repetition_detection (parseRepetition).
func (p *plan) checkRepetition() error {
	req := p.req
	if len(req.RepetitionDetection) == 0 || string(req.RepetitionDetection) == "null" {
		return nil
	}
	r, err := parseRepetition(req.RepetitionDetection)
	if err != nil {
		return err
	}
	p.repetition = r
	return nil
}

// checkSpeculative reads speculative (parseSpeculative), which beam search does not take.
func (p *plan) checkSpeculative() error {
	var err error
	if p.spec, p.noSpec, err = parseSpeculative(p.req.Speculative); err != nil {
		return err
	}
	if p.spec != nil && p.req.UseBeamSearch {
		return bad("speculative", "Beam search cannot be combined with speculative decoding.")
	}
	return nil
}

// checkCacheSalt reads cache_salt: non-empty, at most 128 characters, none of @ / \ NUL.
func (p *plan) checkCacheSalt() error {
	if p.req.CacheSalt == nil {
		return nil
	}
	s := *p.req.CacheSalt
	if s == "" {
		return bad("cache_salt", "Parameter 'cache_salt' must be a non-empty string if provided.")
	}
	if len(s) > 128 || strings.ContainsAny(s, "@/\\\x00") {
		return bad("cache_salt", "Parameter 'cache_salt' must be at most 128 characters and must not contain '@', '/', '\\\\', or NUL.")
	}
	p.cacheSalt = s
	return nil
}

// templateKwargs merges chat_template_kwargs with reasoning_effort (as vLLM does: it also
// sets enable_thinking when the user did not).
func (req *Request) templateKwargs() []byte {
	kw := map[string]json.RawMessage{}
	if len(req.ChatTemplateKwargs) > 0 && string(req.ChatTemplateKwargs) != "null" {
		json.Unmarshal(req.ChatTemplateKwargs, &kw)
	}
	if req.ReasoningEffort != nil {
		b, _ := json.Marshal(*req.ReasoningEffort)
		kw["reasoning_effort"] = b
		if _, ok := kw["enable_thinking"]; !ok {
			if *req.ReasoningEffort == "none" {
				kw["enable_thinking"] = json.RawMessage("false")
			} else {
				kw["enable_thinking"] = json.RawMessage("true")
			}
		}
	}
	if len(kw) == 0 {
		return nil
	}
	b, _ := json.Marshal(kw)
	return b
}

func (p *plan) String() string { return fmt.Sprintf("n=%d max=%d", p.n, p.maxTokens) }

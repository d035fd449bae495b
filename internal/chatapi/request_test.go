package chatapi

import (
	"encoding/json"
	"testing"

	"github.com/honeai/hone/internal/apierror"
)

// refusal is a request body validate refuses: the 400's param and message.
type refusal struct {
	body, param, msg string
}

// checkRefusals runs each body through validate (a vocabulary of 1000 tokens, at most 20
// logprobs, priority scheduling off) and checks its 400.
func checkRefusals(t *testing.T, cases []refusal) {
	t.Helper()
	for _, c := range cases {
		var req Request
		if err := json.Unmarshal([]byte(c.body), &req); err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		_, err := req.validate(1000, 20, false)
		if err == nil {
			t.Errorf("%s: accepted, want %s: %q", c.body, c.param, c.msg)
			continue
		}
		ae, ok := apierror.As(err)
		if !ok || ae.Status != 400 || ae.Param != c.param || ae.Message != c.msg {
			t.Errorf("%s:\n got %d %s: %q\nwant 400 %s: %q", c.body, ae.Status, ae.Param, ae.Message, c.param, c.msg)
		}
	}
}

func TestValidateTemplateFlagsAndStreamOptions(t *testing.T) {
	checkRefusals(t, []refusal{
		{`{"continue_final_message":true}`, "continue_final_message", "Cannot set both `continue_final_message` and `add_generation_prompt` to True."},
		{`{"stream_options":{"include_usage":true}}`, "stream_options", "Stream options can only be defined when `stream=True`."},
		{`{"stream_options":{"continuous_usage_stats":true}}`, "stream_options", "Stream options can only be defined when `stream=True`."},
	})
}

func TestValidateLogprobs(t *testing.T) {
	checkRefusals(t, []refusal{
		{`{"top_logprobs":1.5}`, "top_logprobs", "`top_logprobs` must be an integer."},
		{`{"top_logprobs":-2}`, "top_logprobs", "`top_logprobs` must be a positive value or -1."},
		{`{"top_logprobs":2}`, "top_logprobs", "when using `top_logprobs`, `logprobs` must be set to true."},
		{`{"logprobs":true,"top_logprobs":21}`, "top_logprobs", "Requested sample logprobs of 21, which is greater than max allowed: 20"},
		{`{"logprobs":true,"top_logprobs":-1}`, "top_logprobs", "Requested sample logprobs of 1000, which is greater than max allowed: 20"},
		{`{"prompt_logprobs":1,"stream":true}`, "prompt_logprobs", "`prompt_logprobs` are not available when `stream=True`."},
		{`{"prompt_logprobs":-3}`, "prompt_logprobs", "`prompt_logprobs` must be a positive value or -1."},
		{`{"prompt_logprobs":21}`, "prompt_logprobs", "Requested prompt logprobs of 21, which is greater than max allowed: 20"},
		{`{"prompt_logprobs":-1}`, "prompt_logprobs", "Requested prompt logprobs of -1, which is greater than max allowed: 20"},
	})
}

func TestValidateToolsAndFormat(t *testing.T) {
	const tool = `{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}`
	checkRefusals(t, []refusal{
		{`{"tools":{}}`, "tools", "`tools` must be an array of tools: cannot unmarshal object into Go value of type []json.RawMessage"},
		{`{"tools":[]}`, "tools", "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely."},
		{`{"tools":[{"type":"retrieval"}]}`, "tools[0].type", `Input should be 'function': tools[0].type is "retrieval"`},
		{`{"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name", "Field required: tools[0].function.name"},
		{`{"tools":[{"type":"function","function":{"name":"f","parameters":3}}]}`, "tools[0].function.parameters", "tools[0].function.parameters must be a JSON schema object"},
		{`{"tool_choice":"sometimes"}`, "tool_choice", "Invalid value for `tool_choice`: sometimes! Only named tools, \"none\", \"auto\" or \"required\" are supported."},
		{`{"tool_choice":"required"}`, "tool_choice", "When using `tool_choice`, `tools` must be set."},
		{`{"tools":[` + tool + `],"tool_choice":{"type":"function","function":{"name":"g"}}}`, "tool_choice", "The tool specified in `tool_choice` does not match any of the specified `tools`"},
		{`{"tools":[` + tool + `],"tool_choice":"required","structured_outputs":{"regex":"a"}}`, "tool_choice", "You can only either use constraints for structured outputs or tools, not both."},
		{`{"tools":[` + tool + `],"tool_choice":"required","use_beam_search":true}`, "use_beam_search", `Beam search cannot be combined with tool_choice "required" (a constrained tool call).`},
		{`{"structured_outputs":{"regex":"a"},"use_beam_search":true}`, "use_beam_search", "Beam search cannot be combined with structured outputs."},
	})
	// A response_format beside a forced call is dropped: the answer is the call.
	var req Request
	json.Unmarshal([]byte(`{"tools":[`+tool+`],"tool_choice":"required","response_format":{"type":"json_object"}}`), &req)
	p, err := req.validate(1000, 20, false)
	if err != nil || p.structured != nil || p.tools.choice != "required" {
		t.Fatalf("response_format beside a required call: %+v %v", p, err)
	}
}

func TestValidateTemplateKwargs(t *testing.T) {
	checkRefusals(t, []refusal{
		{`{"chat_template_kwargs":[1]}`, "chat_template_kwargs", "`chat_template_kwargs` must be a JSON object."},
		{`{"chat_template_kwargs":{"tokenize":true,"chat_template":"x"}}`, "chat_template_kwargs", "Found unexpected chat template kwargs from request: {'chat_template', 'tokenize'}"},
	})
}

func TestValidateSampling(t *testing.T) {
	checkRefusals(t, []refusal{
		{`{"temperature":-1}`, "temperature", "temperature must be non-negative, got -1."},
		{`{"top_p":0}`, "top_p", "top_p must be in (0, 1], got 0."},
		{`{"top_k":-2}`, "top_k", "top_k must be 0 (disable), or at least 1, got -2."},
		{`{"min_p":2}`, "min_p", "min_p must be in [0, 1], got 2."},
		{`{"repetition_penalty":0}`, "repetition_penalty", "repetition_penalty must be greater than zero, got 0."},
		{`{"frequency_penalty":3}`, "frequency_penalty", "frequency_penalty must be in [-2, 2], got 3."},
		{`{"presence_penalty":-3}`, "presence_penalty", "presence_penalty must be in [-2, 2], got -3."},
		{`{"min_tokens":-1}`, "min_tokens", "min_tokens must be greater than or equal to 0, got -1."},
		{`{"allowed_token_ids":[]}`, "allowed_token_ids", "allowed_token_ids is not None and empty!"},
		{`{"logit_bias":{"x":1}}`, "logit_bias", "logit_bias contains key(s) that cannot be converted to integer token IDs: ['x']"},
		{`{"logit_bias":{"5000":1}}`, "logit_bias", "token_id(s) [5000] in logit_bias contain out-of-vocab token ids. Vocabulary size: 1000"},
		{`{"stop_token_ids":[1000]}`, "stop_token_ids", "token_id(s) [1000] in stop_token_ids contain out-of-vocab token ids. Vocabulary size: 1000"},
		{`{"seed":1e30}`, "seed", "Input should be greater than or equal to -9223372036854775808 and less than or equal to 9223372036854775807"},
	})
	var req Request
	json.Unmarshal([]byte(`{"temperature":0.5,"top_k":5,"seed":-1,"logit_bias":{"7":2}}`), &req)
	p, err := req.validate(1000, 20, false)
	if err != nil || p.params.Temperature != 0.5 || p.params.TopK != 5 || p.params.Seed != nil || p.params.LogitBias[7] != 2 {
		t.Fatalf("sampling parameters: %+v %v", p, err)
	}
}

func TestValidateChoicesAndLengths(t *testing.T) {
	checkRefusals(t, []refusal{
		{`{"n":0}`, "n", "n must be at least 1, got 0."},
		{`{"n":16385}`, "n", "n must be at most 16384, got 16385."},
		{`{"n":2,"temperature":0}`, "n", "n must be 1 when using greedy sampling, got 2."},
		{`{"max_completion_tokens":0}`, "max_completion_tokens", "max_tokens must be at least 1, got 0."},
		{`{"max_tokens":-5}`, "max_tokens", "max_tokens must be at least 1, got -5."},
		{`{"max_tokens":4,"min_tokens":5}`, "min_tokens", "min_tokens must be less than or equal to max_tokens=4, got 5."},
	})
	// max_completion_tokens wins over max_tokens; beam search takes n as its width.
	var req Request
	json.Unmarshal([]byte(`{"max_completion_tokens":7,"max_tokens":100,"n":3,"temperature":0,"use_beam_search":true,"length_penalty":0.5}`), &req)
	p, err := req.validate(1000, 20, false)
	if err != nil || p.maxTokens != 7 || p.beam == nil || p.beam.Width != 3 || p.beam.LengthPenalty != 0.5 {
		t.Fatalf("lengths and beam: %+v %v", p, err)
	}
}

func TestValidateStopsPriorityAndRest(t *testing.T) {
	checkRefusals(t, []refusal{
		{`{"stop":3}`, "stop", "`stop` must be a string or a list of strings."},
		{`{"stop":["a",""]}`, "stop", "stop cannot contain an empty string."},
		{`{"bad_words":[" "]}`, "bad_words", "bad_words cannot contain an empty string."},
		{`{"priority":1.5}`, "priority", "`priority` must be an integer that fits in 64 bits."},
		{`{"priority":3}`, "priority", "Got priority 3 but Priority scheduling is not enabled."},
		{`{"truncate_prompt_tokens":-2}`, "truncate_prompt_tokens", "Input should be greater than or equal to -1"},
		{`{"repetition_detection":{"max_pattern_size":2,"min_pattern_size":3}}`, "repetition_detection", "min_pattern_size must be less than or equal to max_pattern_size, got 3 > 2."},
		{`{"repetition_detection":{"max_pattern_size":2}}`, "repetition_detection", "min_count must be at least 2 when repetition detection is enabled, got 0."},
		{`{"speculative":3}`, "speculative", `speculative must be an object such as {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}, or false to turn the server's speculation off for this request`},
		{`{"cache_salt":""}`, "cache_salt", "Parameter 'cache_salt' must be a non-empty string if provided."},
		{`{"cache_salt":"a/b"}`, "cache_salt", "Parameter 'cache_salt' must be at most 128 characters and must not contain '@', '/', '\\\\', or NUL."},
	})
	// Priority beyond 32 bits, when priority scheduling is on.
	var req Request
	json.Unmarshal([]byte(`{"priority":3000000000}`), &req)
	if _, err := req.validate(1000, 20, true); err == nil {
		t.Fatal("a 33-bit priority accepted")
	} else if ae, _ := apierror.As(err); ae.Param != "priority" || ae.Message != "`priority` must be between -2147483648 and 2147483647." {
		t.Fatalf("priority: %s %q", ae.Param, ae.Message)
	}
	json.Unmarshal([]byte(`{"stop":"end","truncate_prompt_tokens":-1,"cache_salt":"s","priority":-2}`), &req)
	p, err := req.validate(1000, 20, true)
	if err != nil || len(p.stops) != 1 || p.stops[0] != "end" || p.truncate != -1 || p.cacheSalt != "s" || p.priority != -2 {
		t.Fatalf("stops, truncation, salt, priority: %+v %v", p, err)
	}
}

// TestValidateOrder: a request wrong in several ways is refused for the first concern in
// validate's order (vLLM's).
func TestValidateOrder(t *testing.T) {
	checkRefusals(t, []refusal{
		{`{"continue_final_message":true,"temperature":-1}`, "continue_final_message", "Cannot set both `continue_final_message` and `add_generation_prompt` to True."},
		{`{"top_logprobs":2,"tools":[]}`, "top_logprobs", "when using `top_logprobs`, `logprobs` must be set to true."},
		{`{"tools":[],"temperature":-1}`, "tools", "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely."},
		{`{"temperature":-1,"n":0}`, "temperature", "temperature must be non-negative, got -1."},
		{`{"n":0,"max_tokens":0}`, "n", "n must be at least 1, got 0."},
		{`{"max_tokens":0,"stop":[""]}`, "max_tokens", "max_tokens must be at least 1, got 0."},
		{`{"stop":[""],"cache_salt":""}`, "stop", "stop cannot contain an empty string."},
	})
}

package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestRenderIsVLLMGenerateRequest: POST /v1/chat/completions/render answers vLLM's shape
// (its GenerateRequest: request_id, token_ids, features, sampling_params, model, stream,
// stream_options, cache_salt, priority, kv_transfer_params), the checks of vLLM's
// test_render.py included, with Hone's prompt, prompt_token_ids and max_tokens beside them.
func TestRenderIsVLLMGenerateRequest(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	url := s.url + "/v1/chat/completions"
	msgs := `"messages":[{"role":"user","content":"Test sampling params"}]`

	code, _, body := do(t, "POST", url+"/render", bearer, `{`+msgs+`,"temperature":0.123,"top_p":0.456,"frequency_penalty":1.1,"seed":7,"stop":["END","ab"],"logprobs":true,"top_logprobs":2,"logit_bias":{"5":300},"request_id":"r1","cache_salt":"salt","kv_transfer_params":{"x":1}}`)
	if code != 200 {
		t.Fatalf("render: %d %s", code, body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"request_id", "token_ids", "features", "sampling_params", "model", "stream", "stream_options", "cache_salt", "priority", "kv_transfer_params", "prompt", "prompt_token_ids", "max_tokens"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("no %q in %s", k, body)
		}
	}
	var r struct {
		RequestID      string          `json:"request_id"`
		TokenIDs       []int           `json:"token_ids"`
		Features       json.RawMessage `json:"features"`
		SamplingParams map[string]any  `json:"sampling_params"`
		Model          string          `json:"model"`
		Stream         bool            `json:"stream"`
		StreamOptions  json.RawMessage `json:"stream_options"`
		CacheSalt      *string         `json:"cache_salt"`
		Priority       int             `json:"priority"`
		KVTransfer     json.RawMessage `json:"kv_transfer_params"`
		Prompt         string          `json:"prompt"`
		PromptTokenIDs []int           `json:"prompt_token_ids"`
		MaxTokens      int             `json:"max_tokens"`
	}
	json.Unmarshal(body, &r)
	if r.RequestID != "chatcmpl-r1" || len(r.TokenIDs) == 0 || !slices.Equal(r.TokenIDs, r.PromptTokenIDs) || string(r.Features) != "null" ||
		r.Model != "demo" || r.Stream || string(r.StreamOptions) != "null" || r.CacheSalt == nil || *r.CacheSalt != "salt" ||
		r.Priority != 0 || string(r.KVTransfer) != `{"x":1}` || !strings.HasSuffix(r.Prompt, "<|im_start|>assistant\n") {
		t.Fatalf("render: %s", body)
	}
	sp := r.SamplingParams
	want := map[string]any{"temperature": 0.123, "top_p": 0.456, "frequency_penalty": 1.1, "presence_penalty": 0.0,
		"repetition_penalty": 1.0, "n": 1.0, "seed": 7.0, "max_tokens": float64(r.MaxTokens), "min_tokens": 0.0,
		"logprobs": 2.0, "prompt_logprobs": nil, "output_kind": 2.0, "output_text_buffer_length": 2.0,
		"skip_special_tokens": true, "ignore_eos": false, "top_k": 0.0, "min_p": 0.0}
	for k, v := range want {
		if got, ok := sp[k]; !ok || got != v {
			t.Errorf("sampling_params.%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if st, _ := json.Marshal(sp["stop"]); string(st) != `["END","ab"]` {
		t.Errorf("stop %s", st)
	}
	if lb, _ := json.Marshal(sp["logit_bias"]); string(lb) != `{"5":100}` {
		t.Errorf("logit_bias %s (clamped to 100 as vLLM does)", lb)
	}
	if ea, _ := json.Marshal(sp["extra_args"]); string(ea) != `{"kv_transfer_params":{"x":1}}` {
		t.Errorf("extra_args %s", ea)
	}
	for k := range sp {
		if strings.HasPrefix(k, "_") {
			t.Errorf("private field %s in sampling_params", k)
		}
	}
	// max_tokens is the rest of the context, as the completion would use; the token ids are
	// the ones a completion of the same request runs on.
	var models struct {
		Data []struct {
			MaxModelLen int `json:"max_model_len"`
		} `json:"data"`
	}
	_, _, mb := do(t, "GET", s.url+"/v1/models", bearer, "")
	json.Unmarshal(mb, &models)
	if r.MaxTokens != models.Data[0].MaxModelLen-len(r.TokenIDs) {
		t.Errorf("max_tokens %d, context %d, prompt %d", r.MaxTokens, models.Data[0].MaxModelLen, len(r.TokenIDs))
	}
	_, _, cb := do(t, "POST", url, bearer, `{`+msgs+`,"max_tokens":1,"return_token_ids":true}`)
	var comp struct {
		PromptTokenIDs []int `json:"prompt_token_ids"`
	}
	json.Unmarshal(cb, &comp)
	if !slices.Equal(comp.PromptTokenIDs, r.TokenIDs) {
		t.Errorf("completion ran on %v, render said %v", comp.PromptTokenIDs, r.TokenIDs)
	}

	// stream and stream_options are kept on the token-in request (vLLM's
	// test_chat_completion_render_with_stream_true); greedy resets top_p/top_k/min_p.
	code, hdr, body := do(t, "POST", url+"/render", bearer, `{`+msgs+`,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true},"temperature":0,"top_k":5,"max_tokens":3}`)
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("render stream: %d %s", code, body)
	}
	var st struct {
		Stream        bool `json:"stream"`
		StreamOptions struct {
			IncludeUsage         *bool `json:"include_usage"`
			ContinuousUsageStats bool  `json:"continuous_usage_stats"`
		} `json:"stream_options"`
		RequestID      string         `json:"request_id"`
		SamplingParams map[string]any `json:"sampling_params"`
	}
	json.Unmarshal(body, &st)
	if !st.Stream || st.StreamOptions.IncludeUsage == nil || !*st.StreamOptions.IncludeUsage || !st.StreamOptions.ContinuousUsageStats ||
		!strings.HasPrefix(st.RequestID, "chatcmpl-") || st.SamplingParams["output_kind"] != 1.0 || st.SamplingParams["top_k"] != 0.0 ||
		st.SamplingParams["temperature"] != 0.0 || st.SamplingParams["max_tokens"] != 3.0 {
		t.Fatalf("render stream: %s", body)
	}

	// As vLLM: beam search cannot be rendered; an unknown model is a 404 with an error.
	code, _, body = do(t, "POST", url+"/render", bearer, `{`+msgs+`,"use_beam_search":true,"n":2}`)
	if e := envelope(t, body); code != 400 || e.Message != "Beam search is not supported by the render endpoint" {
		t.Fatalf("beam: %d %s", code, body)
	}
	code, _, body = do(t, "POST", url+"/render", bearer, `{"model":"invalid-model-name",`+msgs+`}`)
	if code != 404 || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("unknown model: %d %s", code, body)
	}
}

package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// TestChatSpeculative: --speculative-config turns prompt-lookup speculation on for the demo
// model; a request's "speculative" overrides it or turns it off; at temperature 0 the
// completion (plain and streamed) is the one plain decoding gives, usage reports the
// speculation, and bad configurations are 400s naming the field.
func TestChatSpeculative(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--speculative-config", `{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":3,"prompt_lookup_min":1}`)
	bearer := "Bearer " + initialKey(t, dir)
	url := s.url + "/v1/chat/completions"
	const msgs = `"messages":[{"role":"user","content":"one two three one two three one two three one two"}],"temperature":0,"max_tokens":48,"ignore_eos":true,"logprobs":true`
	type spec struct {
		NumDrafts         int `json:"num_drafts"`
		NumDraftTokens    int `json:"num_draft_tokens"`
		NumAcceptedTokens int `json:"num_accepted_tokens"`
	}
	type resp struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			Logprobs struct {
				Content []struct {
					Logprob float64 `json:"logprob"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int   `json:"completion_tokens"`
			Speculative      *spec `json:"speculative"`
		} `json:"usage"`
	}
	post := func(extra string) resp {
		t.Helper()
		code, _, body := do(t, "POST", url, bearer, `{`+msgs+extra+`}`)
		if code != 200 {
			t.Fatalf("%s: %d %s", extra, code, body)
		}
		var r resp
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	plain := post(`,"speculative":false`)
	if plain.Usage.Speculative != nil {
		t.Fatalf("speculation off, usage %+v", plain.Usage.Speculative)
	}
	for _, extra := range []string{``, `,"speculative":{"method":"ngram","num_speculative_tokens":2,"prompt_lookup_max":2}`} {
		r := post(extra)
		if r.Choices[0].Message.Content != plain.Choices[0].Message.Content {
			t.Fatalf("%s: %q, plain %q", extra, r.Choices[0].Message.Content, plain.Choices[0].Message.Content)
		}
		for i, lp := range r.Choices[0].Logprobs.Content {
			if d := lp.Logprob - plain.Choices[0].Logprobs.Content[i].Logprob; d > 1e-5 || d < -1e-5 {
				t.Fatalf("%s: logprob %d: %v, plain %v", extra, i, lp.Logprob, plain.Choices[0].Logprobs.Content[i].Logprob)
			}
		}
		u := r.Usage.Speculative
		if u == nil || u.NumDrafts == 0 || u.NumAcceptedTokens > u.NumDraftTokens {
			t.Fatalf("%s: usage %+v", extra, u)
		}
		t.Logf("%s: %+v", extra, *u)
	}
	// Streamed: the same text, and the final usage chunk reports the speculation.
	code, _, body := do(t, "POST", url, bearer, `{`+msgs+`,"stream":true,"stream_options":{"include_usage":true}}`)
	if code != 200 {
		t.Fatalf("stream: %d %s", code, body)
	}
	var text strings.Builder
	var final *spec
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				Speculative *spec `json:"speculative"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
		}
		if ch.Usage != nil {
			final = ch.Usage.Speculative
		}
	}
	if text.String() != plain.Choices[0].Message.Content || final == nil {
		t.Fatalf("stream: %q (usage %+v), plain %q", text.String(), final, plain.Choices[0].Message.Content)
	}
	for extra, param := range map[string]string{
		`,"speculative":{"method":"eagle","num_speculative_tokens":2}`:                                             "speculative.method",
		`,"speculative":{"method":"ngram"}`:                                                                        "speculative.num_speculative_tokens",
		`,"speculative":{"method":"ngram","num_speculative_tokens":0}`:                                             "speculative.num_speculative_tokens",
		`,"speculative":{"method":"ngram","num_speculative_tokens":2,"prompt_lookup_max":500}`:                     "speculative.prompt_lookup_max",
		`,"speculative":{"method":"ngram","num_speculative_tokens":2,"prompt_lookup_max":2,"prompt_lookup_min":3}`: "speculative.prompt_lookup_min",
		`,"speculative":{"method":"ngram","num_speculative_tokens":2,"draft_model":"x"}`:                           "speculative.draft_model",
		`,"speculative":3`: "speculative",
		`,"speculative":{"method":"ngram","num_speculative_tokens":2},"use_beam_search":true,"n":2`: "speculative",
	} {
		code, _, body := do(t, "POST", url, bearer, `{`+msgs+extra+`}`)
		if got := envelope(t, body).Param; code != 400 || got == nil || *got != param {
			t.Errorf("%s: %d %s, want 400 naming %s", extra, code, body, param)
		}
	}
}

// TestServeSpeculativeConfigFlag: a bad --speculative-config is a usage error.
func TestServeSpeculativeConfigFlag(t *testing.T) {
	for _, v := range []string{`{"method":"eagle","num_speculative_tokens":3}`, `{"method":"ngram"}`, `not json`,
		`{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":9,"prompt_lookup_max":2}`} {
		var stderr strings.Builder
		code := runServe(context.Background(), []string{"--addr", "127.0.0.1:0", "--data", t.TempDir(), "--no-demo-model", "--speculative-config", v}, io.Discard, &stderr, nil)
		if code == 0 || !strings.Contains(stderr.String(), "speculative-config") {
			t.Errorf("%s: exit %d, %s", v, code, stderr.String())
		}
	}
}

// TestChatSpeculativeComposes: structured outputs (proposals verified through the guide) and
// tool calls (tool_choice required: a guide, then the tool-call parser) give, with seeded
// sampling, the same choices with speculation as without (logprobs, which differ in the last
// float bits, are compared within 1e-5 in TestChatSpeculative).
func TestChatSpeculativeComposes(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--speculative-config", `{"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":3,"prompt_lookup_min":1}`)
	bearer := "Bearer " + initialKey(t, dir)
	url := s.url + "/v1/chat/completions"
	for _, body := range []string{
		`"messages":[{"role":"user","content":"List list list the the the cities cities"}],"max_tokens":80,"seed":5,"temperature":0.8,"n":2,` +
			`"structured_outputs":{"json":{"type":"object","properties":{"cities":{"type":"array","items":{"enum":["Paris","Rome","Oslo"]}}},"required":["cities"],"additionalProperties":false}}`,
		`"messages":[{"role":"user","content":"Weather in Paris for 3 days?"}],"max_tokens":120,"seed":3,"temperature":1,"tools":` + weatherTools + `,"tool_choice":"required"`,
		`"messages":[{"role":"user","content":"Weather in Paris for 3 days?"}],"max_tokens":60,"seed":4,"temperature":0.7,"stream":true,"stream_options":{"include_usage":true},"tools":` + weatherTools + `,"tool_choice":"required"`,
	} {
		code, _, off := do(t, "POST", url, bearer, `{`+body+`,"speculative":false}`)
		if code != 200 {
			t.Fatalf("%d %s", code, off)
		}
		code, _, on := do(t, "POST", url, bearer, `{`+body+`}`)
		if code != 200 {
			t.Fatalf("%d %s", code, on)
		}
		if a, b := choicesOf(t, off), choicesOf(t, on); a != b {
			t.Fatalf("speculation changed the choices:\nplain       %s\nspeculative %s", a, b)
		}
		if !strings.Contains(string(on), `"num_drafts"`) {
			t.Fatalf("no speculation reported: %s", on)
		}
	}
}

// choicesOf is the choices of a response, or of a stream's chunks (their deltas in order),
// with ids and timestamps left out.
func choicesOf(t *testing.T, body []byte) string {
	t.Helper()
	var out []string
	lines := []string{string(body)}
	if strings.HasPrefix(string(body), "data: ") {
		lines = strings.Split(string(body), "\n")
	}
	for _, line := range lines {
		line = strings.TrimPrefix(line, "data: ")
		if line == "" || line == "[DONE]" {
			continue
		}
		var r struct {
			Choices json.RawMessage `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		out = append(out, stripIDs(string(r.Choices)))
	}
	return strings.Join(out, "\n")
}

// stripIDs blanks tool-call ids (random per response).
func stripIDs(s string) string {
	for {
		i := strings.Index(s, `"id":"`)
		if i < 0 {
			return s
		}
		j := strings.IndexByte(s[i+6:], '"')
		s = s[:i] + `"ID":""` + s[i+6+j+1:]
	}
}

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
)

// completionResp is the part of a /v1/completions answer the tests read.
type completionResp struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Index    int    `json:"index"`
		Text     string `json:"text"`
		Logprobs *struct {
			TextOffset    []int                `json:"text_offset"`
			TokenLogprobs []*float64           `json:"token_logprobs"`
			Tokens        []string             `json:"tokens"`
			TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		} `json:"logprobs"`
		FinishReason   *string `json:"finish_reason"`
		TokenIDs       []int   `json:"token_ids"`
		PromptTokenIDs []int   `json:"prompt_token_ids"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func completion(t *testing.T, url, bearer, body string) completionResp {
	t.Helper()
	code, _, b := do(t, "POST", url, bearer, body)
	if code != 200 {
		t.Fatalf("%s: %d %s", body, code, b)
	}
	var r completionResp
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCompletionsEndToEnd: POST /v1/completions over HTTP on the demo model: a string
// prompt's text; several prompts with n=2 numbered prompt·n+choice; echo with logprobs
// scores the tokens of a text as the tokens were scored when generated (lm-eval's
// log-likelihood: the greedy continuation's logprobs equal the echoed ones); a stream adds up
// to the same text with its usage last; return_token_ids; a trained checkpoint as the model;
// bad requests are 400s naming the field.
func TestCompletionsEndToEnd(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	url := s.url + "/v1/completions"

	r := completion(t, url, bearer, `{"model":"demo","prompt":"Once upon a time","max_tokens":6,"temperature":0,"logprobs":2,"return_token_ids":true}`)
	c := r.Choices[0]
	if r.Object != "text_completion" || !strings.HasPrefix(r.ID, "cmpl-") || len(r.Choices) != 1 || c.FinishReason == nil ||
		len(c.TokenIDs) == 0 || len(c.Logprobs.Tokens) != len(c.TokenIDs) || r.Usage.PromptTokens != len(c.PromptTokenIDs) ||
		r.Usage.CompletionTokens != len(c.TokenIDs) || r.Usage.TotalTokens != r.Usage.PromptTokens+r.Usage.CompletionTokens {
		t.Fatalf("completion %+v", r)
	}
	if strings.Join(c.Logprobs.Tokens, "") != c.Text {
		t.Fatalf("tokens %q do not make the text %q", c.Logprobs.Tokens, c.Text)
	}
	for i, top := range c.Logprobs.TopLogprobs {
		if len(top) < 1 || len(top) > 3 || c.Logprobs.TextOffset[i] != len([]rune(strings.Join(c.Logprobs.Tokens[:i], ""))) {
			t.Fatalf("token %d: top %v, offset %d", i, top, c.Logprobs.TextOffset[i])
		}
	}

	// Log-likelihood as an evaluation harness asks it: the prompt and its greedy continuation
	// echoed, scored token by token.
	ids := append(append([]int(nil), c.PromptTokenIDs...), c.TokenIDs...)
	idsJSON, _ := json.Marshal(ids)
	e := completion(t, url, bearer, fmt.Sprintf(`{"model":"demo","prompt":%s,"max_tokens":1,"temperature":0,"echo":true,"logprobs":1}`, idsJSON))
	ec := e.Choices[0]
	if len(ec.Logprobs.Tokens) != len(ids)+1 || ec.Logprobs.TokenLogprobs[0] != nil || ec.Logprobs.TopLogprobs[0] != nil {
		t.Fatalf("echo: %d tokens for %d prompt ids: %+v", len(ec.Logprobs.Tokens), len(ids), ec.Logprobs)
	}
	for k := range c.TokenIDs {
		got, want := *ec.Logprobs.TokenLogprobs[len(c.PromptTokenIDs)+k], *c.Logprobs.TokenLogprobs[k]
		if math.Abs(got-want) > 1e-3 {
			t.Fatalf("token %d: echoed logprob %.5f, when generated %.5f", k, got, want)
		}
	}

	// Two prompts, two choices each.
	m := completion(t, url, bearer, `{"model":"demo","prompt":["Red, green,","One, two,"],"max_tokens":3,"n":2,"seed":5,"temperature":1}`)
	if len(m.Choices) != 4 {
		t.Fatalf("%d choices", len(m.Choices))
	}
	for i, ch := range m.Choices {
		if ch.Index != i || ch.FinishReason == nil {
			t.Fatalf("choice %d: %+v", i, ch)
		}
	}

	// A stream: the same text, each choice's finish reason, the usage last, then [DONE].
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"model":"demo","prompt":"Once upon a time","max_tokens":6,"temperature":0,"stream":true,"echo":true,"stream_options":{"include_usage":true}}`))
	req.Header.Set("Authorization", bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text strings.Builder
	var chunks []completionResp
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		if line == "" {
			continue
		}
		if line == "[DONE]" {
			done = true
			break
		}
		var ch completionResp
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		for _, x := range ch.Choices {
			text.WriteString(x.Text)
		}
		chunks = append(chunks, ch)
	}
	last := chunks[len(chunks)-1]
	if !done || text.String() != "Once upon a time"+c.Text || len(last.Choices) != 0 || last.Usage == nil || last.Usage.CompletionTokens != len(c.TokenIDs) ||
		chunks[len(chunks)-2].Choices[0].FinishReason == nil {
		t.Fatalf("stream: %q (want %q), done %v, last %+v", text.String(), "Once upon a time"+c.Text, done, last)
	}

	// Bad requests.
	for _, tc := range []struct{ body, param string }{
		{`{"model":"demo"}`, "prompt"},
		{`{"model":"demo","prompt":[]}`, "prompt"},
		{`{"model":"demo","prompt":{"a":1}}`, "prompt"},
		{`{"model":"demo","prompt":[[1,2,99999999]]}`, "prompt"},
		{`{"model":"demo","prompt":"x","suffix":"y"}`, "suffix"},
		{`{"model":"demo","prompt":"x","logprobs":21}`, "logprobs"},
		{`{"model":"demo","prompt":"x","best_of":2}`, "best_of"},
		{`{"model":"demo","prompt":"x","max_tokens":0}`, "max_tokens"},
		{`{"model":"demo","prompt":"x","max_tokens":100000}`, "max_tokens"},
		{`{"model":"demo","prompt":"x","n":2,"temperature":0}`, "n"},
		// Overflow in admission (issue 33 item 4).
		{`{"model":"demo","prompt":"hi","n":9223372036854775807,"max_tokens":1}`, "n"},
		{`{"model":"demo","prompt":"hi","n":16384,"max_tokens":100,"temperature":1}`, "n"},
		{`{"model":"demo","prompt":"hi","best_of":9223372036854775807}`, "best_of"},
		{`{"model":"demo","prompt":"hi","max_tokens":9223372036854775807}`, "max_tokens"},
		{`{"model":"demo","prompt":"hi","logprobs":9223372036854775807}`, "logprobs"},
		{`{"model":"demo","prompt":"x","stop":[""]}`, "stop"},
		{`{"model":"nope","prompt":"x"}`, "model"},
	} {
		code, _, body := do(t, "POST", url, bearer, tc.body)
		if e := envelope(t, body); code/100 != 4 || e.Param == nil || *e.Param != tc.param {
			t.Errorf("%s: %d %s", tc.body, code, body)
		}
	}
	if code, _, _ := do(t, "POST", url, "", `{"model":"demo","prompt":"x"}`); code != 401 {
		t.Errorf("no key: %d", code)
	}

	// A trained checkpoint answers as a model.
	u := s.url + "/v1/preview"
	code, _, body := do(t, "POST", u+"/models", bearer, `{"project":"p","name":"cmpl","base_model":"demo"}`)
	id := jsonOf(t, code, body, 200)["id"].(string)
	code, _, body = do(t, "POST", u+"/files", bearer, sftData)
	data := jsonOf(t, code, body, 200)["url"].(string)
	code, _, body = do(t, "POST", u+"/sft-training-jobs", bearer, fmt.Sprintf(`{"model_id":%q,"training_data_url":%q}`, id, data))
	if j := waitJob(t, s, bearer, jsonOf(t, code, body, 200)["id"].(string)); j["status"] != "SUCCEEDED" {
		t.Fatalf("job %v", j)
	}
	ck := completion(t, url, bearer, `{"model":"local/p/cmpl:step1","prompt":"Capital of France?","max_tokens":2}`)
	var raw map[string]any
	_, _, b := do(t, "POST", url, bearer, `{"model":"local/p/cmpl","prompt":"Hi","max_tokens":1}`)
	json.Unmarshal(b, &raw)
	if len(ck.Choices) != 1 || !bytes.Contains(b, []byte(`"model":"local/p/cmpl:step1"`)) {
		t.Fatalf("checkpoint: %+v %s", ck, b)
	}
}

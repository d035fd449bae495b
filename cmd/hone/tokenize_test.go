package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTokenizeRoutes: vLLM's /tokenize (a prompt; chat messages rendered as
// /v1/chat/completions renders them), /detokenize (its inverse) and /tokenizer_info, on the
// default model and by name, as lm-evaluation-harness's remote tokenizer calls them; bad
// requests are 400s naming the field.
func TestTokenizeRoutes(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	var tok struct {
		Count       int      `json:"count"`
		MaxModelLen int      `json:"max_model_len"`
		Tokens      []int    `json:"tokens"`
		TokenStrs   []string `json:"token_strs"`
	}
	code, _, b := do(t, "POST", s.url+"/tokenize", bearer, `{"prompt":"Once upon a time","add_special_tokens":false,"return_token_strs":true}`)
	if code != 200 || json.Unmarshal(b, &tok) != nil || tok.Count != len(tok.Tokens) || tok.Count == 0 || strings.Join(tok.TokenStrs, "") != "Once upon a time" || tok.MaxModelLen != 2048 {
		t.Fatalf("tokenize: %d %s", code, b)
	}
	ids, _ := json.Marshal(tok.Tokens)
	code, _, b = do(t, "POST", s.url+"/detokenize", bearer, `{"model":"demo","tokens":`+string(ids)+`}`)
	if got := jsonOf(t, code, b, 200); got["prompt"] != "Once upon a time" {
		t.Fatalf("detokenize: %v", got)
	}
	// The chat form gives the ids the chat route's render gives.
	msgs := `"messages":[{"role":"user","content":"Hello!"}]`
	code, _, b = do(t, "POST", s.url+"/tokenize", bearer, `{"model":"demo",`+msgs+`}`)
	var chat struct {
		Tokens []int `json:"tokens"`
	}
	json.Unmarshal(b, &chat)
	code2, _, b2 := do(t, "POST", s.url+"/v1/chat/completions/render", bearer, `{"model":"demo",`+msgs+`}`)
	var render struct {
		TokenIDs []int `json:"token_ids"`
	}
	json.Unmarshal(b2, &render)
	if code != 200 || code2 != 200 || len(chat.Tokens) == 0 || fmtInts(chat.Tokens) != fmtInts(render.TokenIDs) {
		t.Fatalf("chat form %d %s; render %d %s", code, b, code2, b2)
	}
	code, _, b = do(t, "GET", s.url+"/tokenizer_info", bearer, "")
	info := jsonOf(t, code, b, 200)
	if _, ok := info["eos_token"]; !ok || info["model"] != "demo" || !strings.Contains(info["chat_template"].(string), "messages") {
		t.Fatalf("tokenizer_info: %v", info)
	}
	for _, tc := range []struct{ path, body, param string }{
		{"/tokenize", `{}`, "prompt"},
		{"/tokenize", `{"prompt":"x",` + msgs + `}`, "prompt"},
		{"/tokenize", `{"model":"nope","prompt":"x"}`, "model"},
		{"/detokenize", `{"tokens":[99999999]}`, "tokens"},
	} {
		code, _, b := do(t, "POST", s.url+tc.path, bearer, tc.body)
		if e := envelope(t, b); code/100 != 4 || e.Param == nil || *e.Param != tc.param {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, code, b)
		}
	}
	if code, _, _ := do(t, "POST", s.url+"/tokenize", "", `{"prompt":"x"}`); code != 401 {
		t.Errorf("no key: %d", code)
	}
}

func fmtInts(xs []int) string {
	b, _ := json.Marshal(xs)
	return string(b)
}

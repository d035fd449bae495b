package main

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestLogprobBytesAreRawTokenBytes: the `bytes` of a logprob entry are the token's own bytes,
// as OpenAI returns them, so that the bytes of consecutive entries join into the reply even
// where a character is split over tokens (whose `token` strings show U+FFFD).
func TestLogprobBytesAreRawTokenBytes(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	code, _, body := do(t, "POST", s.url+"/v1/chat/completions", bearer,
		`{"model":"demo","messages":[{"role":"user","content":"Say a word."}],"max_tokens":24,"n":8,"seed":5,"temperature":1,"logprobs":true,"top_logprobs":2}`)
	special := map[string]bool{"<|im_start|>": true, "<|im_end|>": true, "<|endoftext|>": true}
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var raw map[string]any
	json.Unmarshal(body, &raw)
	split := 0
	for k, c := range raw["choices"].([]any) {
		ch := c.(map[string]any)
		var joined []byte
		for _, e := range ch["logprobs"].(map[string]any)["content"].([]any) {
			ent := e.(map[string]any)
			var bs []byte
			for _, b := range ent["bytes"].([]any) {
				bs = append(bs, byte(b.(float64)))
			}
			if !utf8.Valid(bs) {
				split++
				if !strings.Contains(ent["token"].(string), "\uFFFD") {
					t.Fatalf("a token inside a character is %q", ent["token"])
				}
			}
			top := ent["top_logprobs"].([]any)[0].(map[string]any)
			if len(top["bytes"].([]any)) != len(bs) {
				t.Fatalf("the sampled token's top entry has other bytes: %v vs %v", top["bytes"], bs)
			}
			if !special[ent["token"].(string)] { // skip_special_tokens leaves them out of the content
				joined = append(joined, bs...)
			}
		}
		content := ch["message"].(map[string]any)["content"].(string)
		if oneFFFD(strings.ToValidUTF8(string(joined), "\uFFFD")) != oneFFFD(content) {
			t.Fatalf("choice %d: bytes join to %q, content %q", k, joined, content)
		}
	}
	if split == 0 {
		t.Fatal("no token inside a character was sampled: the test shows nothing")
	}
}

// oneFFFD writes each run of U+FFFD as one (bytes that form no character are replaced by
// one U+FFFD per run or per byte depending on the decoder).
func oneFFFD(s string) string {
	for strings.Contains(s, "\uFFFD\uFFFD") {
		s = strings.ReplaceAll(s, "\uFFFD\uFFFD", "\uFFFD")
	}
	return s
}

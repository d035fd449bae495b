package trainingdata

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
)

// plainChoice builds a choice as an OpenAI-compatible server (vLLM, Hone) returns it to a
// client that asked for logprobs but not for token ids: each entry's token is the token
// decoded alone (U+FFFD where it is part of a character) and its bytes those of that string;
// the content is the whole reply decoded.
func plainChoice(c *ChatTokenizer, ids []int) *choice {
	ch := &choice{Logprobs: &struct {
		Content []lpEntry `json:"content"`
	}{}}
	for i, id := range ids {
		tok := c.Tok.Decode([]int{id}, false)
		var bs []int
		for _, b := range []byte(tok) {
			bs = append(bs, int(b))
		}
		ch.Logprobs.Content = append(ch.Logprobs.Content, lpEntry{Token: tok, Logprob: -float64(i) - 1, Bytes: bs})
	}
	return ch
}

// TestLogprobIDsFromSampledReplies samples replies at temperature 1 from a random-weight model
// (so that they are full of tokens that are parts of characters, and their text tokenises
// differently), and recovers their ids from the logprobs entries alone: every entry gets an
// id, every id said to be known is the sampled one, every entry that names its token is
// known, and the ids of characters split over tokens are found from the text.
func TestLogprobIDsFromSampledReplies(t *testing.T) {
	dir := tinyDir(t, "llama", 0.02)
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := LoadChat(dir)
	if err != nil {
		t.Fatal(err)
	}
	c.Vocab = m.Config.VocabSize
	eng := inference.New(m, inference.Options{})
	defer eng.Close()
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": "Say a word."}})
	text, err := c.Template.Render(chattemplate.Input{Messages: msgs, AddGenerationPrompt: true, SpecialTokens: c.Special})
	if err != nil {
		t.Fatal(err)
	}
	retokenised, lossy, unknown, total := 0, 0, 0, 0
	for seed := int64(0); seed < 4; seed++ {
		params := sample.Defaults()
		params.Seed = &seed
		h, err := eng.Submit(context.Background(), &inference.Request{Prompt: c.Tok.Encode(text, false), Params: params, N: 16, MaxTokens: 24, Logprobs: true})
		if err != nil {
			t.Fatal(err)
		}
		toks := map[int][]int{}
		for ev := range h.Events() {
			if ev.HasToken {
				toks[ev.Choice] = append(toks[ev.Choice], ev.Token)
			}
		}
		for k := 0; k < 16; k++ {
			truth := toks[k]
			content := c.Tok.Decode(truth, false)
			if len(c.Tok.Encode(content, false)) != len(truth) {
				retokenised++
			}
			ch := plainChoice(c, truth)
			ids, lps, known, err := c.sampledTokens(ch, []string{content}, false)
			if err != nil {
				t.Fatalf("seed %d choice %d: %v", seed, k, err)
			}
			if len(ids) != len(truth) || len(lps) != len(truth) || len(known) != len(truth) {
				t.Fatalf("%d ids, %d logprobs, %d flags for %d tokens", len(ids), len(lps), len(known), len(truth))
			}
			for i, id := range truth {
				total++
				isLossy := ch.Logprobs.Content[i].Token == "" || strings.Contains(ch.Logprobs.Content[i].Token, replacement)
				if isLossy {
					lossy++
				}
				switch {
				case known[i] && ids[i] != id:
					t.Fatalf("seed %d choice %d token %d: recovered %d, sampled %d (%q)", seed, k, i, ids[i], id, content)
				case !known[i] && !isLossy:
					t.Fatalf("seed %d choice %d token %d (%q) not recovered", seed, k, i, ch.Logprobs.Content[i].Token)
				case !known[i]:
					unknown++
				}
				if c.Tok.Decode([]int{ids[i]}, false) != ch.Logprobs.Content[i].Token {
					t.Fatalf("token %d: id %d does not decode to %q", i, ids[i], ch.Logprobs.Content[i].Token)
				}
			}
		}
	}
	t.Logf("%d tokens, %d written as U+FFFD, %d of them unknown; %d of 64 replies tokenise differently", total, lossy, unknown, retokenised)
	if retokenised == 0 || lossy == 0 {
		t.Fatal("the samples do not exercise recovery")
	}
	if unknown == lossy {
		t.Fatal("no token written as U+FFFD was recovered from the text")
	}
}

// TestLogprobIDsForms: the ways an entry names its token, a character split over byte tokens,
// bytes that do not form a character, and entries that name no token of the model.
func TestLogprobIDsForms(t *testing.T) {
	c, err := LoadChat(tinyDir(t, "llama", 0.02))
	if err != nil {
		t.Fatal(err)
	}
	byteTok := func(b byte) int {
		for id := 0; id < c.Tok.VocabSize(); id++ {
			if tb := c.Tok.TokenBytes(id); len(tb) == 1 && tb[0] == b {
				return id
			}
		}
		t.Fatalf("no token for byte %#x", b)
		return 0
	}
	hello := c.Tok.Encode("hello there", false)
	surface := make([]lpEntry, len(hello))
	for i, id := range hello {
		surface[i] = lpEntry{Token: c.Tok.TokenString(id), Logprob: -1}
	}
	ids, _, known, err := c.sampledTokens(&choice{Logprobs: &struct {
		Content []lpEntry `json:"content"`
	}{surface}}, []string{"hello there"}, false)
	if err != nil || fmt.Sprint(ids) != fmt.Sprint(hello) || strings.Contains(fmt.Sprint(known), "false") {
		t.Fatalf("surface forms %v: %v %v (want %v)", surface, ids, err, hello)
	}
	// "é" sampled as its two bytes: both entries are U+FFFD, the text shows "é".
	e1, e2 := byteTok(0xC3), byteTok(0xA9)
	split := []int{e1, e2}
	ids, _, known, err = c.sampledTokens(plainChoice(c, split), []string{"é"}, false)
	if err != nil || fmt.Sprint(ids) != fmt.Sprint(split) || fmt.Sprint(known) != "[true true]" {
		t.Fatalf("split character: %v %v %v", ids, known, err)
	}
	// A lone continuation byte between words: the text shows U+FFFD; unknown, kept as context.
	a, b := c.Tok.Encode("a", false)[0], c.Tok.Encode("b", false)[0]
	lone := []int{a, byteTok(0x9C), b}
	ids, _, known, err = c.sampledTokens(plainChoice(c, lone), []string{"a\uFFFDb"}, false)
	if err != nil || ids[0] != a || ids[2] != b || fmt.Sprint(known) != "[true false true]" {
		t.Fatalf("lone byte: %v %v %v", ids, known, err)
	}
	// OpenAI writes a byte token's raw bytes: exact.
	raw := &choice{Logprobs: &struct {
		Content []lpEntry `json:"content"`
	}{[]lpEntry{{Token: "a", Bytes: []int{'a'}}, {Token: "bytes:\\x9c", Bytes: []int{0x9C}}, {Token: "b", Bytes: []int{'b'}}}}}
	ids, _, known, err = c.sampledTokens(raw, []string{"a\uFFFDb"}, false)
	if err != nil || fmt.Sprint(ids) != fmt.Sprint(lone) || fmt.Sprint(known) != "[true true true]" {
		t.Fatalf("raw bytes: %v %v %v", ids, known, err)
	}
	// token_id:<n>.
	ids, _, _, err = c.sampledTokens(&choice{Logprobs: &struct {
		Content []lpEntry `json:"content"`
	}{[]lpEntry{{Token: fmt.Sprintf("token_id:%d", a)}}}}, []string{""}, false)
	if err != nil || fmt.Sprint(ids) != fmt.Sprint([]int{a}) {
		t.Fatalf("token_id: %v %v", ids, err)
	}
	// Tool calls or reasoning taken out of the text: the named tokens stand, U+FFFD ones are
	// unknown.
	ids, _, known, err = c.sampledTokens(plainChoice(c, []int{a, e1, b}), []string{""}, false)
	if err != nil || ids[0] != a || ids[2] != b || fmt.Sprint(known) != "[true false true]" {
		t.Fatalf("no text: %v %v %v", ids, known, err)
	}
	for _, bad := range []lpEntry{{Token: "token_id:-3"}, {Token: "token_id:99999999"}, {Token: "\x00not a token\x01"}, {Token: "x", Bytes: []int{300}}} {
		_, _, _, err := c.sampledTokens(&choice{Logprobs: &struct {
			Content []lpEntry `json:"content"`
		}{[]lpEntry{bad}}}, []string{""}, false)
		if err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	// Without logprobs the text is tokenised only when allowed.
	if _, _, _, err := c.sampledTokens(&choice{}, []string{"hello"}, false); err == nil || !strings.Contains(err.Error(), "allow_training_without_logprobs") {
		t.Fatalf("no logprobs: %v", err)
	}
	if ids, _, _, err := c.sampledTokens(&choice{}, []string{"hello"}, true); err != nil || fmt.Sprint(ids) != fmt.Sprint(c.Tok.Encode("hello", false)) {
		t.Fatalf("allowed without logprobs: %v %v", ids, err)
	}
}

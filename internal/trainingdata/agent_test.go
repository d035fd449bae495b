package trainingdata

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/tokenizer"
)

// realChat is a real model's tokenizer (internal/tokenizer/testdata) with a real chat
// template (internal/chattemplate/testdata, or the tokenizer's own).
func realChat(t *testing.T, tok, tmpl string) *ChatTokenizer {
	t.Helper()
	dir := "../tokenizer/testdata/" + tok + "/"
	f, err := os.Open(dir + "tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tj, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(dir + "tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	tk, err := tokenizer.FromJSON(tj, cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := tk.ChatTemplate("")
	special := tk.Config().SpecialTokens
	if tmpl != "" {
		b, err := os.ReadFile("../chattemplate/testdata/templates/" + tmpl + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var fx struct {
			ChatTemplate string `json:"chat_template"`
			BOS          string `json:"bos_token"`
			EOS          string `json:"eos_token"`
		}
		if err := json.Unmarshal(b, &fx); err != nil {
			t.Fatal(err)
		}
		src = fx.ChatTemplate
		special = map[string]string{"bos_token": fx.BOS, "eos_token": fx.EOS}
	}
	tpl, err := chattemplate.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	return &ChatTokenizer{Template: tpl, Tok: tk, Special: special}
}

const lookupTools = `[{"type":"function","function":{"name":"lookup","description":"Look a key up.","parameters":{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}}}]`

// agentMessages is a trajectory with two tool calls (one per assistant turn, as Llama 3.x
// allows), their results and a final answer, as an OpenAI client sends it back: arguments
// as JSON strings, content null beside tool calls.
func agentMessages() []json.RawMessage {
	call := func(id, key string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":"lookup","arguments":"{\"key\": \"%s\"}"}}]}`, id, key))
	}
	return []json.RawMessage{
		json.RawMessage(`{"role":"system","content":"Use the tool."}`),
		json.RawMessage(`{"role":"user","content":"Capitals of France and Peru?"}`),
		call("call_1", "France"),
		json.RawMessage(`{"role":"tool","tool_call_id":"call_1","content":"Paris"}`),
		call("call_2", "Peru"),
		json.RawMessage(`{"role":"tool","tool_call_id":"call_2","content":"Lima"}`),
		json.RawMessage(`{"role":"assistant","content":"Paris and Lima."}`),
	}
}

// runs decodes the runs of consecutive marked tokens.
func runs(c *ChatTokenizer, ids []int, mark []bool) []string {
	var out []string
	var cur []int
	for i := range ids {
		if mark[i] {
			cur = append(cur, ids[i])
			continue
		}
		if cur != nil {
			out = append(out, c.Tok.Decode(cur, false))
			cur = nil
		}
	}
	if cur != nil {
		out = append(out, c.Tok.Decode(cur, false))
	}
	return out
}

// agentTemplates are the real templates and what they train of agentMessages: the
// assistant turns' bodies (the tool calls as the template writes them, the answer) and
// their end-of-turn text.
var agentTemplates = []struct {
	name, tok, tmpl string
	generic         bool     // the model is served with the generic tool-call format
	calls           []string // the two tool-call turns' bodies
	trained         []string // SFT: the trained runs ("" : an error is expected)
}{
	{"Qwen2.5", "qwen3", "qwen2_5", false,
		[]string{"<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"France\"}}\n</tool_call>", "<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"Peru\"}}\n</tool_call>"},
		[]string{"<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"France\"}}\n</tool_call><|im_end|>\n", "<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"Peru\"}}\n</tool_call><|im_end|>\n", "Paris and Lima.<|im_end|>\n"}},
	{"Qwen3", "qwen3", "", false,
		[]string{"<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"France\"}}\n</tool_call>", "<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"Peru\"}}\n</tool_call>"},
		[]string{"<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"France\"}}\n</tool_call><|im_end|>\n", "<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"Peru\"}}\n</tool_call><|im_end|>\n", "<think>\n\n</think>\n\nParis and Lima.<|im_end|>\n"}},
	{"Llama 3.2", "llama3", "llama3_2", false,
		[]string{"{\"name\": \"lookup\", \"parameters\": {\"key\": \"France\"}}", "{\"name\": \"lookup\", \"parameters\": {\"key\": \"Peru\"}}"},
		[]string{"{\"name\": \"lookup\", \"parameters\": {\"key\": \"France\"}}<|eot_id|>", "{\"name\": \"lookup\", \"parameters\": {\"key\": \"Peru\"}}<|eot_id|>", "Paris and Lima.<|eot_id|>"}},
	// SmolLM2's template renders no tool calls: in the generic format (how Hone serves it)
	// they are written into the turn as chat writes them; with tool calls off
	// (--tool-call-parser none), a trajectory with calls is an error.
	{"SmolLM2 generic", "smollm2", "smollm2", true,
		[]string{"<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"France\"}}\n</tool_call>", "<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"Peru\"}}\n</tool_call>"},
		[]string{"<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"France\"}}\n</tool_call><|im_end|>\n", "<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"Peru\"}}\n</tool_call><|im_end|>\n", "Paris and Lima.<|im_end|>\n"}},
	{"SmolLM2", "smollm2", "smollm2", false, nil, nil},
}

// TestAgentTrajectorySFTPerTemplate: which tokens SFT trains in a two-tool-call trajectory
// with each real template: the tool calls as the template writes them and the answer, each
// with its end-of-turn text; never the system, user or tool turns. SmolLM2's template does
// not render tool calls: an error naming the message.
func TestAgentTrajectorySFTPerTemplate(t *testing.T) {
	msgs, _ := json.Marshal(agentMessages())
	for _, tc := range agentTemplates {
		t.Run(tc.name, func(t *testing.T) {
			c := realChat(t, tc.tok, tc.tmpl)
			c.GenericTools = tc.generic
			x, err := c.Tokenize(msgs, json.RawMessage(lookupTools), "all")
			if tc.trained == nil {
				if err == nil || !strings.Contains(err.Error(), "messages[2]: the model's chat template does not render tool calls") {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := runs(c, x.Tokens, x.Train)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.trained) {
				t.Fatalf("trained %q\nwant    %q\nin %q", got, tc.trained, c.Tok.Decode(x.Tokens, false))
			}
			for _, ctx := range []string{"Use the tool.", "Paris<", "Lima<", "Capitals of France"} {
				if !strings.Contains(c.Tok.Decode(x.Tokens, false), strings.TrimSuffix(ctx, "<")) {
					t.Fatalf("context %q missing", ctx)
				}
			}
		})
	}
}

// plainEntries are the logprobs entries a plain OpenAI client gets for ids (token strings
// and bytes, no ids).
func plainEntries(c *ChatTokenizer, ids []int) []map[string]any {
	var out []map[string]any
	for i, id := range ids {
		tok := c.Tok.Decode([]int{id}, false)
		bs := []int{}
		for _, b := range []byte(tok) {
			bs = append(bs, int(b))
		}
		out = append(out, map[string]any{"token": tok, "logprob": -0.5 - float64(i%3), "bytes": bs, "top_logprobs": []any{}})
	}
	return out
}

// plainToolChoice is a tool-call choice as a plain OpenAI client gets it: the message with
// tool_calls (arguments a JSON string, content null) and logprobs over the generated text.
func plainToolChoice(c *ChatTokenizer, id, key, generated string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"index": 0, "finish_reason": "tool_calls",
		"message":  map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "lookup", "arguments": fmt.Sprintf(`{"key": %q}`, key)}}}},
		"logprobs": map[string]any{"content": plainEntries(c, c.Tok.Encode(generated, false))}})
	return b
}

func plainTextChoice(c *ChatTokenizer, content string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"index": 0, "finish_reason": "stop",
		"message":  map[string]any{"role": "assistant", "content": content},
		"logprobs": map[string]any{"content": plainEntries(c, c.Tok.Encode(content, false))}})
	return b
}

// agentChoices is agentMessages with the assistant turns as sampled choices whose ids a plain
// client's logprobs give; calls are the generated texts of the two calls.
func agentChoices(c *ChatTokenizer, calls []string) []json.RawMessage {
	items := agentMessages()
	items[2] = plainToolChoice(c, "call_1", "France", calls[0])
	items[4] = plainToolChoice(c, "call_2", "Peru", calls[1])
	items[6] = plainTextChoice(c, "Paris and Lima.")
	return items
}

// TestAgentTrajectoryRLPerTemplate: RL on the same trajectory sampled by a plain OpenAI
// client (tool-call choices with logprobs over the generated call text, no token ids):
// with each real template the trained tokens are exactly the sampled ones — both calls and
// the answer, ids recovered from the entries, one logprob each — and the rest of the
// sequence is the template's rendering as context.
func TestAgentTrajectoryRLPerTemplate(t *testing.T) {
	for _, tc := range agentTemplates {
		if tc.calls == nil {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			c := realChat(t, tc.tok, tc.tmpl)
			c.GenericTools = tc.generic
			s, err := c.TokenizeTrajectory(agentChoices(c, tc.calls), json.RawMessage(lookupTools), false)
			if err != nil {
				t.Fatal(err)
			}
			got := runs(c, s.Tokens, s.Sampled)
			// Each choice ended on its turn's end, which the entries leave out: it is trained
			// too (its sampling logprob unknown).
			end := c.Tok.Decode(c.Tok.Encode(c.Template.TurnEnd(c.Special), false)[:1], false)
			want := []string{tc.calls[0] + end, tc.calls[1] + end, "Paris and Lima." + end}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
				t.Fatalf("sampled %q\nwant    %q", got, want)
			}
			// One logprob per sampled token, the entries' own.
			var lps, wantLps []float64
			for i, sm := range s.Sampled {
				if sm {
					lps = append(lps, s.OldLogp[i])
				}
			}
			for _, g := range []string{tc.calls[0], tc.calls[1], "Paris and Lima."} {
				for i := range c.Tok.Encode(g, false) {
					wantLps = append(wantLps, -0.5-float64(i%3))
				}
				wantLps = append(wantLps, math.NaN())
			}
			if fmt.Sprint(lps) != fmt.Sprint(wantLps) || s.Unknown != 0 {
				t.Fatalf("logprobs %v, want %v (%d unknown)", lps, wantLps, s.Unknown)
			}
			// The sequence is the conversation as the template renders it.
			all, _ := templateMessages(agentMessages())
			in, err := c.input(all, json.RawMessage(lookupTools))
			if err != nil {
				t.Fatal(err)
			}
			text, _, err := c.Template.AssistantSpans(in)
			if err != nil {
				t.Fatal(err)
			}
			if dec := c.Tok.Decode(s.Tokens, false); dec != text {
				t.Fatalf("sequence %q\nrendered %q", dec, text)
			}
		})
	}
}

// TestAgentChoiceSampledOffTemplate: a tool call sampled with other spacing than the template
// writes (compact JSON) and with its stop token, or holding characters split over byte tokens
// (each a U+FFFD entry for a plain client), trains exactly the sampled tokens: they replace
// the turn's body, the end-of-turn text follows less the sampled stop token, and every id is
// recovered.
func TestAgentChoiceSampledOffTemplate(t *testing.T) {
	c := realChat(t, "qwen3", "qwen2_5")
	compact := "<tool_call>\n{\"name\":\"lookup\",\"arguments\":{\"key\":\"France\"}}\n</tool_call><|im_end|>"
	items := agentChoices(c, []string{compact, "<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"Peru\"}}\n</tool_call>"})
	s, err := c.TokenizeTrajectory(items, json.RawMessage(lookupTools), false)
	if err != nil {
		t.Fatal(err)
	}
	got := runs(c, s.Tokens, s.Sampled)
	if len(got) != 3 || got[0] != compact {
		t.Fatalf("sampled %q", got)
	}
	dec := c.Tok.Decode(s.Tokens, false)
	if !strings.Contains(dec, "<|im_start|>assistant\n"+compact+"\n<|im_start|>user\n<tool_response>\nParis") || strings.Contains(dec, "\"arguments\": {\"key\": \"France\"}") {
		t.Fatalf("sequence %q", dec)
	}
	// A key whose characters the tokenizer splits into byte tokens: a plain client sees
	// U+FFFD entries, and the ids are read from the call as the template renders it.
	gen := "<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"key\": \"𓂀𓃰\"}}\n</tool_call>"
	ids := c.Tok.Encode(gen, false)
	lossy := 0
	for _, e := range plainEntries(c, ids) {
		if strings.Contains(e["token"].(string), "\uFFFD") {
			lossy++
		}
	}
	if lossy == 0 {
		t.Fatalf("no token of %q is part of a character", gen)
	}
	items = agentMessages()
	items[2] = plainToolChoice(c, "call_1", "𓂀𓃰", gen)
	s, err = c.TokenizeTrajectory(items, json.RawMessage(lookupTools), false)
	if err != nil {
		t.Fatal(err)
	}
	var sampled []int
	for i, sm := range s.Sampled {
		if sm {
			sampled = append(sampled, s.Tokens[i])
		}
	}
	ids = append(ids, c.Tok.Encode("<|im_end|>", false)...) // the turn's end it stopped on
	if fmt.Sprint(sampled) != fmt.Sprint(ids) || s.Unknown != 0 {
		t.Fatalf("sampled %v, want %v (%d lossy entries, %d unknown)", sampled, ids, lossy, s.Unknown)
	}
}

// Package trainingdata prepares what training trains on from chat data, as a model is served:
// conversations rendered with the model's chat template and tokenised, with the tokens to
// learn marked — SFT's assistant turns (ChatTokenizer.Tokenize, ReadSFT) and RL's sampled
// choices (ChatTokenizer.TokenizeTrajectory, whose ids are recovered from a choice's logprobs
// entries when it does not carry them: logprobs.go) — ART's trajectory groups, the exchanges
// its capture API records turned into conversations (exchanges.go), and the tokens that mark
// an assistant's turn (ChatTokenizer.TurnTokens). It sits in the engine layer beside
// internal/train, which trains on what it makes, and knows nothing of weights, HTTP or storage.
//
// An SFT run, as the training service does it:
//
//	chat, err := trainingdata.LoadChat(dir) // the model directory's tokenizer and chat template
//	xs, err := trainingdata.ReadSFT(data, chat, "all")
//	plan, err := train.PlanSFT(xs, train.SFTConfig{})
//	_, err = train.RunSFT(ctx, trainer, plan, nil, nil)
package trainingdata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/tokenizer"
	"github.com/honeai/hone/internal/toolcall"
)

// ChatTokenizer renders conversations with a model's chat template and tokeniser.
type ChatTokenizer struct {
	Template *chattemplate.Template
	Tok      *tokenizer.Tokenizer
	Special  map[string]string // bos_token, eos_token, ...
	// Vocab is the model's vocabulary size when larger than the tokenizer's (padding rows).
	Vocab int
	// GenericTools: the model's tool calls are in Hone's generic format (its template shows
	// no tool syntax), so conversations are prepared as chat prepares them (toolcall.Prepare:
	// tools described, calls and results written in where the template leaves them out), and
	// training sees what serving renders.
	GenericTools bool

	once sync.Once
	idx  *tokenIndexes
}

// input is a conversation's template input: prepared for the generic tool format when the
// model uses it (GenericTools), with the tools described when there are any.
func (c *ChatTokenizer) input(all, tools json.RawMessage) (chattemplate.Input, error) {
	in := chattemplate.Input{Messages: all, Tools: tools, SpecialTokens: c.Special}
	if !c.GenericTools {
		return in, nil
	}
	return toolcall.Prepare(in, c.Template.Caps(c.Special), len(tools) > 0 && string(tools) != "null")
}

// LoadChat reads the tokenizer and chat template of a model directory.
func LoadChat(dir string) (*ChatTokenizer, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	src := tok.ChatTemplate("")
	if src == "" {
		return nil, fmt.Errorf("the model in %s has no chat template", dir)
	}
	tpl, err := chattemplate.Compile(src)
	if err != nil {
		return nil, err
	}
	return &ChatTokenizer{Template: tpl, Tok: tok, Special: tok.Config().SpecialTokens}, nil
}

// assistantMsg is what Tokenize and TokenizeTrajectory read of an assistant message.
type assistantMsg struct {
	content string
	calls   []string // the tool calls' function names
}

func readAssistant(raw json.RawMessage) assistantMsg {
	var m struct {
		Content   any `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	json.Unmarshal(raw, &m)
	var out assistantMsg
	out.content, _ = m.Content.(string)
	for _, tc := range m.ToolCalls {
		if tc.Function.Name != "" {
			out.calls = append(out.calls, tc.Function.Name)
		}
	}
	return out
}

// rendersCalls says whether a rendered assistant turn shows every tool call (by name).
func rendersCalls(turn string, names []string) bool {
	for _, n := range names {
		if !strings.Contains(turn, n) {
			return false
		}
	}
	return true
}

// templateMessages is the messages as the template gets them: an assistant message whose
// content is null (an OpenAI tool-call message) gets the empty string, as vLLM gives
// templates such a message, so that templates which add to or search the content
// (SmolLM2's, Qwen3's) render it.
func templateMessages(msgs []json.RawMessage) ([]byte, error) {
	out := make([]json.RawMessage, len(msgs))
	for i, raw := range msgs {
		out[i] = raw
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || string(m["role"]) != `"assistant"` {
			continue
		}
		if c, ok := m["content"]; ok && string(c) != "null" {
			continue
		}
		// Keep the key order: insert "content" after the existing fields.
		b := bytes.TrimRight(raw, " \t\r\n")
		if len(b) < 2 || b[len(b)-1] != '}' {
			continue
		}
		if _, ok := m["content"]; ok {
			b = replaceNullContent(b)
		} else {
			sep := ","
			if len(m) == 0 {
				sep = ""
			}
			b = append(slices.Clone(b[:len(b)-1]), sep+`"content":""}`...)
		}
		out[i] = b
	}
	return json.Marshal(out)
}

// replaceNullContent rewrites an object's "content": null as "content": "", keeping the
// order of its keys.
func replaceNullContent(obj []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.Token() // {
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return obj
		}
		var v json.RawMessage
		before := dec.InputOffset()
		if err := dec.Decode(&v); err != nil {
			return obj
		}
		if k, _ := kt.(string); k == "content" && string(v) == "null" {
			after := dec.InputOffset()
			seg := obj[before:after]
			i := bytes.LastIndex(seg, []byte("null"))
			if i < 0 {
				return obj
			}
			out := slices.Clone(obj[:int(before)+i])
			out = append(out, `""`...)
			return append(out, obj[int(before)+i+4:]...)
		}
	}
	return obj
}

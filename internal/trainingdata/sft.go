package trainingdata

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Example is one tokenised conversation: Train[i] says whether token i is learned (predicted
// from the tokens before it).
type Example struct {
	Tokens []int
	Train  []bool
}

// Trainable counts the learned tokens.
func (x *Example) Trainable() int {
	n := 0
	for i, t := range x.Train {
		if t && i > 0 {
			n++
		}
	}
	return n
}

// Tokenize renders messages (and tools) and marks the tokens of assistant turns — all of
// them, or only the last with turns == "last" — found through the template
// (chattemplate.AssistantSpans): a token is learned when its bytes overlap an assistant span.
//
// Tool calls are trained as the template writes them in the assistant's turn (arguments given
// as a JSON string are rendered as the object they hold); tool results, system and user turns
// are context. A model in the generic tool format gets its calls written as chat writes them
// (GenericTools); otherwise a template that does not render an assistant message's tool calls
// is an error naming the message, since the turn would teach an empty reply.
func (c *ChatTokenizer) Tokenize(messages, tools json.RawMessage, turns string) (Example, error) {
	var msgs []json.RawMessage
	if err := json.Unmarshal(messages, &msgs); err != nil {
		return Example{}, errors.New(`"messages" must be an array of chat messages`)
	}
	all, err := templateMessages(msgs)
	if err != nil {
		return Example{}, err
	}
	in, err := c.input(all, tools)
	if err != nil {
		return Example{}, err
	}
	text, spans, err := c.Template.AssistantSpans(in)
	if err != nil {
		return Example{}, err
	}
	if len(spans) == 0 {
		return Example{}, errors.New("the conversation has no assistant message to learn")
	}
	k := 0
	for i, raw := range msgs {
		var m struct {
			Role string `json:"role"`
		}
		if json.Unmarshal(raw, &m) != nil || m.Role != "assistant" || k >= len(spans) {
			continue
		}
		sp := spans[k]
		k++
		if a := readAssistant(raw); len(a.calls) > 0 && !rendersCalls(text[sp.Start:sp.End-sp.Tail], a.calls) {
			return Example{}, fmt.Errorf("messages[%d]: the model's chat template does not render tool calls (%s is not in the assistant turn it renders)", i, a.calls[0])
		}
	}
	if turns == "last" {
		spans = spans[len(spans)-1:]
	}
	ids := c.Tok.Encode(text, false)
	x := Example{Tokens: ids, Train: make([]bool, len(ids))}
	off := 0
	for i, id := range ids {
		n := len(c.Tok.TokenBytes(id))
		for _, s := range spans {
			if off < s.End && off+n > s.Start {
				x.Train[i] = true
			}
		}
		off += n
	}
	if off != len(text) {
		return Example{}, fmt.Errorf("tokens do not cover the rendered text (%d of %d bytes); the tokenizer normalises text", off, len(text))
	}
	return x, nil
}

// SFTLine is one line of SFT chat data, before tokenisation.
type SFTLine struct {
	Messages json.RawMessage `json:"messages"`
	Tools    json.RawMessage `json:"tools"`
}

// ParseSFTLine checks the shape of one non-empty JSONL line of SFT data: a JSON object whose
// "messages" is a non-empty array of objects, each with a string "role". Clients use it to
// check a file before they upload it; ReadSFT checks every line again with the template.
func ParseSFTLine(b []byte) (SFTLine, error) {
	var row SFTLine
	if err := json.Unmarshal(b, &row); err != nil {
		return row, fmt.Errorf("not a JSON object: %v", err)
	}
	var msgs []struct {
		Role *string `json:"role"`
	}
	if len(row.Messages) == 0 || row.Messages[0] != '[' || json.Unmarshal(row.Messages, &msgs) != nil {
		return row, errors.New(`"messages" must be an array of chat messages`)
	}
	if len(msgs) == 0 {
		return row, errors.New(`"messages" is empty`)
	}
	for i, m := range msgs {
		if m.Role == nil {
			return row, fmt.Errorf(`messages[%d] has no string "role"`, i)
		}
	}
	return row, nil
}

// ReadSFT reads chat data in JSONL, one {"messages": [...], "tools"?: [...]} per line,
// tokenised with c. A bad line is an error naming it.
func ReadSFT(r io.Reader, c *ChatTokenizer, turns string) ([]Example, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var out []Example
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		row, err := ParseSFTLine(b)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		x, err := c.Tokenize(row.Messages, row.Tools, turns)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		out = append(out, x)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %v", line+1, err)
	}
	if len(out) == 0 {
		return nil, errors.New("the training data has no examples")
	}
	return out, nil
}

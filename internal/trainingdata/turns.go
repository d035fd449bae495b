package trainingdata

import (
	"slices"
	"strings"

	"github.com/honeai/hone/internal/chattemplate"
)

// TurnTokens are the tokens that mark the assistant's turn in c's chat template, whose rows
// trainable token rows are for: the special tokens of the text the template writes to close
// an assistant's turn (chattemplate.Template.TurnEnd: <end_of_turn>, <|im_end|>, <|eot_id|>)
// and of the generation prompt that opens one (<start_of_turn>, <|im_start|>,
// <|start_header_id|>, <|end_header_id|>), and the stop tokens (stops: serving's stop set)
// the template writes in a conversation (Phi-3's <|endoftext|> after the last turn). The
// tokenizer's beginning-of-sequence token is not one unless it is a stop. end is the token
// that closes the turn (the first special token of TurnEnd's text), -1 when the template's
// turn end begins with no special token.
func (c *ChatTokenizer) TurnTokens(stops []int) (end int, ids []int) {
	end = -1
	bos, hasBOS := c.Tok.BOS()
	add := func(id int) {
		if c.Vocab > 0 && id >= c.Vocab || slices.Contains(ids, id) || hasBOS && id == bos && !slices.Contains(stops, id) {
			return
		}
		ids = append(ids, id)
	}
	specials := func(text string) []int {
		var out []int
		for _, id := range c.Tok.Encode(text, false) {
			if c.Tok.IsSpecial(id) || slices.Contains(stops, id) {
				out = append(out, id)
			}
		}
		return out
	}
	tail := c.Template.TurnEnd(c.Special)
	if ids := c.Tok.Encode(tail, false); len(ids) > 0 && c.Tok.IsSpecial(ids[0]) {
		end = ids[0]
	}
	for _, id := range specials(tail) {
		add(id)
	}
	user := []byte(`[{"role":"user","content":"Hi"}]`)
	in := chattemplate.Input{Messages: user, SpecialTokens: c.Special}
	without, err1 := c.Template.Render(in)
	in.AddGenerationPrompt = true
	with, err2 := c.Template.Render(in)
	if err1 == nil && err2 == nil && strings.HasPrefix(with, without) {
		for _, id := range specials(with[len(without):]) {
			add(id)
		}
	}
	conv := []byte(`[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."},{"role":"user","content":"Bye"},{"role":"assistant","content":"Bye."}]`)
	if text, err := c.Template.Render(chattemplate.Input{Messages: conv, SpecialTokens: c.Special}); err == nil {
		for _, id := range c.Tok.Encode(text, false) {
			if slices.Contains(stops, id) {
				add(id)
			}
		}
	}
	return end, ids
}

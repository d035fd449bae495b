package training

import (
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/toolcall"
	"github.com/honeai/hone/internal/trainingdata"
)

// chatTokenizer renders and tokenises training conversations as the base model is served:
// its chat template, tokenizer and special tokens, and the generic tool-call format where
// chat uses it for this model (toolcall.Choose).
func chatTokenizer(base *serving.Served) *trainingdata.ChatTokenizer {
	c := &trainingdata.ChatTokenizer{Template: base.Template, Tok: base.Tok, Special: base.SpecialTokens(),
		GenericTools: base.Template != nil && toolcall.Choose(base.ToolParser, base.Template.Source()) == toolcall.Generic}
	if base.Model != nil {
		c.Vocab = base.Model.Config.VocabSize
	}
	return c
}

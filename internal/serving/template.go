package serving

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/tokenizer"
)

// ErrNoChatTemplate is a model that has no chat template: its files carry none, none was
// given (LoadOptions.ChatTemplate), and no built-in template fits its architecture and
// vocabulary.
var ErrNoChatTemplate = errors.New("no chat template")

// resolveTemplate gives s its chat template: the one given at load (--chat-template), else
// the model's own (tokenizer_config.json, chat_template.jinja or the GGUF's
// tokenizer.chat_template), else the built-in template of its family.
func (s *Served) resolveTemplate(opts LoadOptions) error {
	src, from := opts.ChatTemplate, opts.ChatTemplateFrom
	if src != "" && from == "" {
		from = "the chat template given at load"
	}
	if src == "" {
		if src = s.Tok.ChatTemplate(""); src != "" {
			from = templateFile(s.Dir)
		}
	}
	if src == "" {
		name := chattemplate.BuiltinFor(s.Model.Config.Family().ChatTemplate, func(text string) bool {
			id, ok := s.Tok.TokenID(text)
			return ok && s.Tok.IsSpecial(id)
		})
		if name == "" {
			return fmt.Errorf("model %s: %w: its files have none, and no built-in template fits its architecture %q and vocabulary", s.Name, ErrNoChatTemplate, s.Model.Config.Arch)
		}
		src, _ = chattemplate.Builtin(name)
		from = "built-in " + name + " (the model's files have no chat template)"
	}
	tpl, err := chattemplate.Compile(src)
	if err != nil {
		return fmt.Errorf("model %s: %s: %w", s.Name, from, err)
	}
	s.Template, s.TemplateFrom = tpl, from
	return nil
}

// templateFile names the file a model's own chat template was read from.
func templateFile(dir string) string {
	if tokenizer.IsGGUF(dir) {
		return "the GGUF file's tokenizer.chat_template"
	}
	if _, err := os.Stat(filepath.Join(dir, "chat_template.jinja")); err == nil {
		return "chat_template.jinja"
	}
	return "tokenizer_config.json"
}

// endOfTurnTexts are the tokens that end an assistant's turn in the families Hone serves and
// their relatives, recognised by their text when the model's files do not name them (a GGUF
// without tokenizer.ggml.eot_token_id, a directory without generation_config.json), as
// llama.cpp does: Gemma's, Llama 3's end of turn and of message, ChatML's, Phi-3's, Command-R's,
// and SmolVLM's.
var endOfTurnTexts = []string{"<end_of_turn>", "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>",
	"<|END_OF_TURN_TOKEN|>", "<end_of_utterance>"}

// endOfText is the end-of-text token of GPT-2-style vocabularies (Qwen, Phi, SmolLM): a stop
// when the chat template writes it (Phi-3's after the last turn), not merely because the
// vocabulary has it.
const endOfText = "<|endoftext|>"

// stopIDs are the ids that end generation: the model's end-of-sequence ids (GGUF eos, eot and
// eom keys; generation_config.json's eos_token_id list, then config.json's), the tokenizer's
// eos_token, the special tokens of endOfTurnTexts the vocabulary has, <|endoftext|> where the
// template writes it, and the special token that begins the template's own end-of-turn text
// (TurnEnd, rendered with the template variables special).
func stopIDs(cfg *model.Config, tok *tokenizer.Tokenizer, tpl *chattemplate.Template, special map[string]string) []int {
	out := slices.Clone(cfg.EOSIDs())
	add := func(id int) {
		if id >= 0 && id < cfg.VocabSize && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	isSpecial := func(text string) (int, bool) {
		id, ok := tok.TokenID(text)
		return id, ok && tok.IsSpecial(id)
	}
	if id, ok := tok.EOS(); ok {
		add(id)
	}
	for _, text := range endOfTurnTexts {
		if id, ok := isSpecial(text); ok {
			add(id)
		}
	}
	if tpl == nil {
		return out
	}
	if id, ok := isSpecial(endOfText); ok && strings.Contains(tpl.Source(), endOfText) {
		add(id)
	}
	if end := tpl.TurnEnd(special); end != "" {
		if ids := tok.Encode(end, false); len(ids) > 0 && tok.IsSpecial(ids[0]) {
			add(ids[0])
		}
	}
	return out
}

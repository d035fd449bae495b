package synth

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/tokenizer"
)

// Family is a chat family's special tokens as its tokenizers name them, for models whose
// files come without a chat template (a base model): the tests of built-in templates and of
// end-of-turn stops write them with WriteFamily.
type Family struct {
	// Special are the family's special tokens, in id order after the BPE vocabulary.
	Special []string
	// BOS and EOS are the tokenizer's bos_token and eos_token (config.json's ids too).
	BOS, EOS string
	// EndOfTurn is the token that closes an assistant turn in the family's chat format.
	EndOfTurn string
}

// Families are the chat families of the architectures Hone serves, keyed by the built-in
// template (chattemplate.Builtin*) that renders them.
var Families = map[string]Family{
	"gemma":   {Special: []string{"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"}, BOS: "<bos>", EOS: "<eos>", EndOfTurn: "<end_of_turn>"},
	"phi3":    {Special: []string{"<unk>", "<s>", "</s>", "<|endoftext|>", "<|assistant|>", "<|system|>", "<|end|>", "<|user|>"}, BOS: "<s>", EOS: "<|endoftext|>", EndOfTurn: "<|end|>"},
	"mistral": {Special: []string{"<unk>", "<s>", "</s>"}, BOS: "<s>", EOS: "</s>", EndOfTurn: "</s>"},
	"llama3":  {Special: []string{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>"}, BOS: "<|begin_of_text|>", EOS: "<|end_of_text|>", EndOfTurn: "<|eot_id|>"},
	"chatml":  {Special: []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, BOS: "<|endoftext|>", EOS: "<|endoftext|>", EndOfTurn: "<|im_end|>"},
}

// WriteFamily writes a model of o (as Write does) whose tokenizer has fam's special tokens
// after the synthetic BPE vocabulary (with Qwen2's pre-tokenizer and NFC normalizer, so that
// it has a GGUF form), fam's bos and eos (in tokenizer_config.json and
// config.json), no chat template and no generation_config.json: the files of a base model
// that names only its end of sequence. It returns the end-of-turn token's id.
func WriteFamily(dir string, o Options, fam Family) (int, error) {
	if err := o.fill(); err != nil {
		return 0, err
	}
	spec, err := TokenizerSpec(o.Vocab - max(0, len(fam.Special)-len(specialTokens)))
	if err != nil {
		return 0, err
	}
	spec.Added = nil
	for _, s := range fam.Special {
		spec.Added = append(spec.Added, tokenizer.AddedToken{Content: s, Special: true})
	}
	spec.BOSToken, spec.EOSToken, spec.PadToken, spec.ChatTemplate = fam.BOS, fam.EOS, "", ""
	spec.ModelMaxLength = o.MaxPos
	spec.NFC = true // Qwen2's normalizer with its split pattern: a pre-tokenizer llama.cpp names (qwen2)
	id := func(s string) int {
		for i, a := range spec.Added {
			if a.Content == s {
				return len(spec.Tokens) + i
			}
		}
		return -1
	}
	bos, eos, eot := id(fam.BOS), id(fam.EOS), id(fam.EndOfTurn)
	if bos < 0 || eos < 0 || eot < 0 {
		return 0, fmt.Errorf("synth: family's bos, eos and end of turn must be among its special tokens")
	}
	if n := len(spec.Tokens) + len(spec.Added); o.Vocab < n {
		o.Vocab = n
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("synth: %w", err)
	}
	tj, err := spec.TokenizerJSON()
	if err != nil {
		return 0, err
	}
	cj, err := spec.ConfigJSON()
	if err != nil {
		return 0, err
	}
	cfg, err := json.MarshalIndent(configJSON(&o, bos, eos), "", "  ")
	if err != nil {
		return 0, err
	}
	for name, data := range map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": cj, "config.json": cfg} {
		if err := safetensors.WriteFileAtomic(filepath.Join(dir, name), data, 0o644); err != nil {
			return 0, fmt.Errorf("synth: %w", err)
		}
	}
	return eot, safetensors.Write(filepath.Join(dir, "model.safetensors"), weights(&o), map[string]string{"format": "pt"})
}

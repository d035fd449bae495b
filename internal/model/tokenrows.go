package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/honeai/hone/internal/kernels"
)

// TokenRows are trainable token rows, PEFT's trainable tokens (LoraConfig's
// trainable_token_indices, peft.TrainableTokensModel): for each token of IDs a row that takes
// the place of the base model's row of that token, in the input embedding or in the LM head,
// for the adapter's requests only. As PEFT's trainable_tokens_delta, Rows hold the rows'
// values (initialised from the base's rows, then trained), not a difference from them: PEFT
// puts them in place of the base's rows (index_copy), so they mean the same on any copy of
// the base, an unquantized one included.
type TokenRows struct {
	IDs  []int
	Rows []float32 // len(IDs) × hidden, row-major, f32
}

// Row is token id's row, or nil when id is not one of IDs (or t is nil). IDs are few (the
// tokens that mark a chat turn), so they are scanned.
func (t *TokenRows) Row(id int) []float32 {
	if t == nil {
		return nil
	}
	for i, v := range t.IDs {
		if v == id {
			h := len(t.Rows) / len(t.IDs)
			return t.Rows[i*h : (i+1)*h : (i+1)*h]
		}
	}
	return nil
}

// SetLogits writes into logits (one vocabulary's worth) the logit of each token of IDs for h
// (the final norm's output of one position): h·row, where the base head's product wrote
// h·W[id]. Every path that computes logits (serving, the trainer's heads) writes these
// entries with this function, so they agree bit for bit for the same h.
func (t *TokenRows) SetLogits(h, logits []float32) {
	n := len(h)
	for i, id := range t.IDs {
		logits[id] = kernels.Dot(h, t.Rows[i*n:(i+1)*n])
	}
}

// Clone is a deep copy.
func (t *TokenRows) Clone() *TokenRows {
	if t == nil {
		return nil
	}
	return &TokenRows{IDs: slices.Clone(t.IDs), Rows: slices.Clone(t.Rows)}
}

// check verifies the rows fit a model of cfg: ids in the vocabulary, each once, and rows of
// the hidden size.
func (t *TokenRows) check(cfg *Config, what string) error {
	if t == nil {
		return nil
	}
	if len(t.IDs) == 0 || len(t.Rows) != len(t.IDs)*cfg.HiddenSize {
		return fmt.Errorf("model: the %s token rows hold %d values for %d tokens of %d", what, len(t.Rows), len(t.IDs), cfg.HiddenSize)
	}
	for i, id := range t.IDs {
		if id < 0 || id >= cfg.VocabSize {
			return fmt.Errorf("model: %s token row for id %d, outside the vocabulary [0, %d)", what, id, cfg.VocabSize)
		}
		if slices.Contains(t.IDs[:i], id) {
			return fmt.Errorf("model: %s token id %d is listed twice", what, id)
		}
	}
	return nil
}

// EmbedRowFor is EmbedRow with adapter a's embedding rows in place of the base's (a nil a,
// or a token a has no row for: the base's row).
func (m *Model) EmbedRowFor(dst []float32, id int, a *LoRA) {
	if a != nil {
		if row := a.EmbedTokens.Row(id); row != nil {
			copy(dst[:len(row)], row)
			m.scaleEmbed(dst)
			return
		}
	}
	m.EmbedRow(dst, id)
}

// headTokens is the adapter's LM head rows (nil for a nil adapter).
func (l *LoRA) headTokens() *TokenRows {
	if l == nil {
		return nil
	}
	return l.HeadTokens
}

// HasTokenRows reports whether the adapter has trainable token rows.
func (l *LoRA) HasTokenRows() bool { return l != nil && (l.EmbedTokens != nil || l.HeadTokens != nil) }

// TiedTokens reports whether the adapter's embedding and head rows are one (a model with
// tied embeddings).
func (l *LoRA) TiedTokens() bool { return l.EmbedTokens != nil && l.EmbedTokens == l.HeadTokens }

// PEFT's names of the trainable token rows (TrainableTokensWrapper's token_adapter) and the
// module names of adapter_config.json's trainable_token_indices.
const (
	PeftEmbedTokens = "base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta"
	PeftHeadTokens  = "base_model.model.lm_head.token_adapter.trainable_tokens_delta"
)

// TokenIndices is adapter_config.json's trainable_token_indices: the token ids of each module
// (embed_tokens, lm_head) whose rows the adapter holds. PEFT reads either a list (the input
// embedding's ids) or a map by module name; Hone writes the map, null when there are none.
type TokenIndices map[string][]int

// UnmarshalJSON reads null, a list of ids or a map of module names to ids.
func (t *TokenIndices) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*t = nil
		return nil
	case len(b) > 0 && b[0] == '[':
		var ids []int
		if err := json.Unmarshal(b, &ids); err != nil {
			return fmt.Errorf("trainable_token_indices: %w", err)
		}
		*t = TokenIndices{"embed_tokens": ids}
		return nil
	}
	var m map[string][]int
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("trainable_token_indices must be a list of token ids or an object of them by module: %w", err)
	}
	*t = m
	return nil
}

// tokenModule is which rows a trainable_token_indices key names (PEFT matches a module name
// by its end: "embed_tokens", "model.embed_tokens", "lm_head").
func tokenModule(key string) (string, bool) {
	last := key[strings.LastIndex(key, ".")+1:]
	switch last {
	case "embed_tokens", "lm_head":
		return last, true
	}
	return "", false
}

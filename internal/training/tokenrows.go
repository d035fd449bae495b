package training

import (
	"fmt"
	"slices"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/train"
	"github.com/honeai/hone/internal/trainingdata"
)

// unlearnedTurnEnd: a model whose probability of its end-of-turn token where an answer ends
// is below this fraction of a uniform guess (1/vocabulary) was never trained to end its turns
// (TurnEndProb: the published Gemma 3 270M base gives about 1e-12, 1/260,000 of uniform; an
// instruct model gives 0.1 to 0.7; a random-weight model about uniform).
var unlearnedTurnEnd = 0.01

// prepareTokenRows gives a job's adapter the trainable token rows its trainable_tokens mode
// asks (docs/training.md, "Trainable token rows"): on: rows for the tokens that mark the
// assistant's turn in the base's template (trainingdata.ChatTokenizer.TurnTokens, with serving's
// stop set); auto (""): those when the adapter has token rows already, or when the model
// (with the adapter) does not end its turns: its end-of-turn token's probability where an
// answer ends is below unlearnedTurnEnd of a uniform guess; off: no new rows (rows the adapter
// has stay, frozen: the trainer is told by the mode). It returns the tokens whose rows the
// job trains, as text.
func prepareTokenRows(base *serving.Served, chat *trainingdata.ChatTokenizer, a *model.LoRA, mode string) ([]string, error) {
	if mode == TokensOff {
		return nil, nil
	}
	end, ids := chat.TurnTokens(base.StopIDs())
	if len(ids) == 0 {
		return nil, nil
	}
	add := mode == TokensOn || a.HasTokenRows()
	if !add && end >= 0 {
		e, err := train.NewTrainer(base.Model, a)
		if err != nil {
			return nil, err
		}
		p, err := train.TurnEndProb(e, chat, a, end)
		if err != nil {
			return nil, err
		}
		add = p < unlearnedTurnEnd/float64(base.Model.Config.VocabSize)
	}
	if !add {
		return nil, nil
	}
	if _, err := train.AddTokenRows(base.Model, a, ids); err != nil {
		return nil, fmt.Errorf("trainable token rows: %w", err)
	}
	var names []string
	for _, t := range []*model.TokenRows{a.EmbedTokens, a.HeadTokens} {
		if t == nil {
			continue
		}
		for _, id := range t.IDs {
			if s := base.Tok.TokenString(id); !slices.Contains(names, s) {
				names = append(names, s)
			}
		}
	}
	return names, nil
}

package train

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/honeai/hone/internal/kernels"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/trainingdata"
)

// AddTokenRows gives adapter a trainable token rows (model.TokenRows, PEFT's trainable
// tokens) for the tokens of ids it has none for yet, in the embedding and the LM head,
// initialised from m's rows as PEFT does: the embedding's rows (before any scaling) and the
// head's; one set for both when m ties them. It reports whether it added any. Rows a already
// has keep their values.
func AddTokenRows(m *model.Model, a *model.LoRA, ids []int) (bool, error) {
	c := &m.Config
	H := c.HiddenSize
	for _, id := range ids {
		if id < 0 || id >= c.VocabSize {
			return false, fmt.Errorf("train: token id %d is outside the vocabulary [0, %d)", id, c.VocabSize)
		}
	}
	added := false
	grow := func(t *model.TokenRows, w *model.Weight) *model.TokenRows {
		for _, id := range ids {
			if t.Row(id) != nil {
				continue
			}
			if t == nil {
				t = &model.TokenRows{}
			}
			row := make([]float32, H)
			w.Row(row, id)
			t.IDs = append(t.IDs, id)
			t.Rows = append(t.Rows, row...)
			added = true
		}
		return t
	}
	if m.TiedHead() {
		if a.EmbedTokens != a.HeadTokens {
			return false, fmt.Errorf("train: the adapter's embedding and LM head rows differ, but the model ties them")
		}
		a.EmbedTokens = grow(a.EmbedTokens, &m.Embed)
		a.HeadTokens = a.EmbedTokens
	} else {
		if a.TiedTokens() {
			return false, fmt.Errorf("train: the adapter ties its embedding and LM head rows, but the model does not")
		}
		a.EmbedTokens = grow(a.EmbedTokens, &m.Embed)
		a.HeadTokens = grow(a.HeadTokens, &m.LMHead.W)
	}
	if added {
		a.Changed()
	}
	return added, nil
}

// tokenParams lists an adapter's token rows (embedding, then head when not tied), each
// once: Grads.tokens' order.
func tokenParams(a *model.LoRA) [][]float32 {
	var out [][]float32
	if a.EmbedTokens != nil {
		out = append(out, a.EmbedTokens.Rows)
	}
	if a.HeadTokens != nil && !a.TiedTokens() {
		out = append(out, a.HeadTokens.Rows)
	}
	return out
}

// headTokens is what the LM head of a pass does with an adapter's head rows: t (nil: none)
// replaces the base's rows of its tokens in the logits; with grad (a training pass of the
// trained adapter) the rows' gradient accumulates there, and base, the base's rows of those
// tokens as the head's product reads them, corrects dL/dx of the product with the base's
// weight: dx += dlogit·(row − base).
type headTokens struct {
	t          *model.TokenRows
	grad, base []float32
}

// headTokensFor is the head rows of adapter a in a pass (backward: of the trained adapter,
// with their gradient).
func (e *Trainer) headTokensFor(a *model.LoRA, backward bool) headTokens {
	if a == nil || a.HeadTokens == nil {
		return headTokens{}
	}
	ht := headTokens{t: a.HeadTokens}
	if backward && a == e.A {
		ht.base = e.headBase()
		if !e.FrozenTokens {
			ht.grad = e.G.Head
		}
	}
	return ht
}

// tokenLR is the learning rate of the token rows for the adapter's rate lr: the same, 0 when
// they are frozen.
func (e *Trainer) tokenLR(lr float64) float64 {
	if e.FrozenTokens {
		return 0
	}
	return lr
}

// headBase is the base model's LM head rows of the trained adapter's head tokens, read once.
func (e *Trainer) headBase() []float32 {
	t := e.A.HeadTokens
	H := e.M.Config.HiddenSize
	if len(e.tokBase) == len(t.Rows) && slices.Equal(e.tokBaseIDs, t.IDs) {
		return e.tokBase
	}
	e.tokBase, e.tokBaseIDs = make([]float32, len(t.Rows)), slices.Clone(t.IDs)
	for i, id := range t.IDs {
		e.M.LMHead.W.Row(e.tokBase[i*H:(i+1)*H], id)
	}
	return e.tokBase
}

// backward accumulates, for the n positions of a chunk (hidden rows xc; dlogits in dl, v
// values a row, from logit v0 on), the gradient of the head rows, and, when base is not nil
// (the base's product read the base's rows), the correction dlogit·(row − base) of dxc, the
// chunk's dL/dx.
func (ht headTokens) backward(xc, dl []float32, n, H, v0, v int, dxc []float32) {
	if ht.t == nil {
		return
	}
	for j, id := range ht.t.IDs {
		if id < v0 || id >= v0+v {
			continue
		}
		row := ht.t.Rows[j*H : (j+1)*H]
		var diff []float32
		if ht.base != nil {
			diff = make([]float32, H)
			for k := range diff {
				diff[k] = row[k] - ht.base[j*H+k]
			}
		}
		for i := range n {
			d := dl[i*v+id-v0]
			if d == 0 {
				continue
			}
			if ht.grad != nil {
				kernels.Axpy(d, xc[i*H:(i+1)*H], ht.grad[j*H:(j+1)*H])
			}
			if diff != nil {
				kernels.Axpy(d, diff, dxc[i*H:(i+1)*H])
			}
		}
	}
}

// setLogits writes the head rows' logits into a chunk's logits (n rows of v values from
// logit v0 on) for the hidden rows xc, as model.TokenRows.SetLogits does for a whole row.
func (ht headTokens) setLogits(xc, logits []float32, n, H, v0, v int) {
	if ht.t == nil {
		return
	}
	for j, id := range ht.t.IDs {
		if id < v0 || id >= v0+v {
			continue
		}
		row := ht.t.Rows[j*H : (j+1)*H]
		for i := range n {
			logits[i*v+id-v0] = kernels.Dot(xc[i*H:(i+1)*H], row)
		}
	}
}

// embedGrad adds the gradient of the trained adapter's embedding rows from dx0, dL/d(the
// embedding of each position): a row used at position r gets scale·dx0[r] (the embedding
// is scaled by scale before the first layer).
func (e *Trainer) embedGrad(tokens []int, dx0 []float32) {
	t := e.A.EmbedTokens
	H := e.M.Config.HiddenSize
	scale := e.M.EmbedScale()
	for r, id := range tokens {
		for j, tid := range t.IDs {
			if tid == id {
				kernels.Axpy(scale, dx0[r*H:(r+1)*H], e.G.Embed[j*H:(j+1)*H])
			}
		}
	}
}

// usesEmbedRows reports whether a sequence has a token whose embedding row the trained
// adapter holds.
func (e *Trainer) usesEmbedRows(tokens []int) bool {
	t := e.A.EmbedTokens
	if t == nil || e.G.Embed == nil || e.FrozenTokens {
		return false
	}
	for _, id := range tokens {
		if slices.Contains(t.IDs, id) {
			return true
		}
	}
	return false
}

// turnEndProbes are short exchanges whose answers TurnEndProb asks a model to end.
var turnEndProbes = [][2]string{{"What is the capital of France?", "The capital of France is Paris."},
	{"What is 2+2?", "4"}, {"Say hello.", "Hello! How can I help you today?"}}

// TurnEndProb is the probability that the model of e, with adapter a (nil: the base), gives
// the token end where an assistant's answer ends in c's template: the geometric mean over a
// few short exchanges. A model trained on its chat template gives its end of turn a high
// probability there (SmolLM2-135M-Instruct's <|im_end|>: 0.09 to 0.74); a base model never
// trained on its chat markers gives it far less than a uniform guess (the published Gemma 3
// 270M base's <end_of_turn>: about 1e-12).
func TurnEndProb(e *Trainer, c *trainingdata.ChatTokenizer, a *model.LoRA, end int) (float64, error) {
	// The exchanges run in one pass, each a segment of its own.
	var seq Seq
	var ats []int // each exchange's end-of-turn position in seq
	for _, qa := range turnEndProbes {
		msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": qa[0]}, {"role": "assistant", "content": qa[1]}})
		x, err := c.Tokenize(msgs, nil, "all")
		if err != nil {
			return 0, err
		}
		at := -1
		for i := 1; i < len(x.Tokens); i++ {
			if x.Train[i] && x.Tokens[i] == end {
				at = i
				break
			}
		}
		if at < 0 {
			continue
		}
		off := len(seq.Tokens)
		seq.Segments = append(seq.Segments, off)
		seq.Tokens = append(seq.Tokens, x.Tokens[:at+1]...)
		ats = append(ats, off+at)
	}
	if len(ats) == 0 {
		return 0, fmt.Errorf("train: no probe answer ends with token %d", end)
	}
	seq.Need = make([]bool, len(seq.Tokens))
	for _, at := range ats {
		seq.Need[at-1] = true
	}
	st := e.Logprobs(seq, a)
	sum := 0.0
	for _, at := range ats {
		sum += float64(st.Logp[at-1])
	}
	return math.Exp(sum / float64(len(ats))), nil
}

package export

import (
	"fmt"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/quant"
	"github.com/honeai/hone/internal/safetensors"
)

// An adapter's trainable token rows (model.TokenRows) are merged as PEFT merges them
// (TrainableTokensLayer.merge: index_copy): each row takes the place of its token's row in the
// embedding and the LM head, in the tensor's dtype or type; every other row keeps its bytes.

// tokenRowsFor is the adapter's rows for the Hugging Face tensor name (nil: none): the
// embedding's for model.embed_tokens.weight, the head's for lm_head.weight (a tied
// checkpoint's copy of the embedding included).
func tokenRowsFor(a *model.LoRA, name string) *model.TokenRows {
	if a == nil {
		return nil
	}
	switch name {
	case "model.embed_tokens.weight":
		return a.EmbedTokens
	case "lm_head.weight":
		return a.HeadTokens
	}
	return nil
}

// mergeTokenRows is t with rows' rows in place of its tokens' rows, in t's dtype.
func mergeTokenRows(t *safetensors.Tensor, rows *model.TokenRows) (safetensors.Tensor, error) {
	if len(t.Shape) != 2 || len(rows.Rows) != len(rows.IDs)*t.Shape[1] {
		return safetensors.Tensor{}, fmt.Errorf("export: weight %s has shape %v, the adapter's token rows are %d wide", t.Name, t.Shape, len(rows.Rows)/max(1, len(rows.IDs)))
	}
	n, cols := t.Shape[0], t.Shape[1]
	for _, id := range rows.IDs {
		if id < 0 || id >= n {
			return safetensors.Tensor{}, fmt.Errorf("export: token row %d is outside weight %s's %d rows", id, t.Name, n)
		}
	}
	switch t.DType {
	case safetensors.F32:
		v, err := t.F32()
		if err != nil {
			return safetensors.Tensor{}, fmt.Errorf("export: weight %s: %w", t.Name, err)
		}
		w := append([]float32(nil), v...)
		for i, id := range rows.IDs {
			copy(w[id*cols:(id+1)*cols], rows.Rows[i*cols:(i+1)*cols])
		}
		return safetensors.FromF32(t.Name, t.Shape, w), nil
	case safetensors.BF16, safetensors.F16:
		half := gemm.BF16
		if t.DType == safetensors.F16 {
			half = gemm.F16
		}
		v, err := t.U16()
		if err != nil {
			return safetensors.Tensor{}, fmt.Errorf("export: weight %s: %w", t.Name, err)
		}
		h := append([]uint16(nil), v...)
		for i, id := range rows.IDs {
			half.Encode(h[id*cols:(id+1)*cols], rows.Rows[i*cols:(i+1)*cols])
		}
		return safetensors.FromU16(t.Name, t.DType, t.Shape, h), nil
	}
	return safetensors.Tensor{}, fmt.Errorf("export: weight %s has dtype %s (want F32, BF16 or F16)", t.Name, t.DType)
}

// ggufTokenRows is the adapter's rows for a GGUF base's tensor (nil: none): the embedding's
// for token_embd.weight, the head's for an untied output.weight.
func ggufTokenRows(a *model.LoRA, name string) *model.TokenRows {
	if a == nil {
		return nil
	}
	switch name {
	case "token_embd.weight":
		return a.EmbedTokens
	case "output.weight":
		return a.HeadTokens
	}
	return nil
}

// mergeGGUFRows puts rows' rows in place of their tokens' rows of a GGUF tensor of type typ
// (raw: its bytes, rows of cols values): each replaced row quantized to typ alone (ggml's
// types quantize rows independently), the other rows' bytes unchanged.
func mergeGGUFRows(raw []byte, typ gguf.TensorType, cols int, rows *model.TokenRows, name string) ([]byte, error) {
	bs := typ.BlockSize()
	if bs == 0 || cols%bs != 0 || len(rows.Rows) != len(rows.IDs)*cols {
		return nil, fmt.Errorf("export: tensor %s (%s, rows of %d) cannot take the adapter's token rows", name, typ, cols)
	}
	rowBytes := cols / bs * typ.BlockBytes()
	out := append([]byte(nil), raw...)
	for i, id := range rows.IDs {
		if (id+1)*rowBytes > len(out) {
			return nil, fmt.Errorf("export: token row %d is outside tensor %s", id, name)
		}
		q, err := quant.Quantize(typ, rows.Rows[i*cols:(i+1)*cols], cols)
		if err != nil {
			return nil, fmt.Errorf("export: tensor %s: %w", name, err)
		}
		copy(out[id*rowBytes:], q)
	}
	return out, nil
}

// checkRowsMerged refuses an export that left out some of the adapter's token rows: rows of
// the embedding without model.embed_tokens.weight, or rows of an LM head of its own where the
// base has none (its head is its embedding).
func checkRowsMerged(a *model.LoRA, embed bool, out []safetensors.Tensor) error {
	if a.EmbedTokens != nil && !embed {
		return fmt.Errorf("export: the adapter has token rows of the embedding, but the base has no model.embed_tokens.weight")
	}
	if a.HeadTokens != nil && !a.TiedTokens() {
		for _, t := range out {
			if t.Name == "lm_head.weight" {
				return nil
			}
		}
		return fmt.Errorf("export: the adapter has token rows of an LM head of its own, but the base's head is its embedding (tied)")
	}
	return nil
}

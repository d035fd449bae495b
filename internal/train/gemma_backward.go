package train

import (
	"github.com/honeai/hone/internal/kernels"
	"github.com/honeai/hone/internal/model"
)

// The backward pieces of Gemma 2/3's additions to the block (model.BlockExtras): GELU-tanh,
// the post-attention and post-MLP norms, and the final logit soft-capping. The attention's
// soft-capping and sliding window are in layerBackward itself.

// geluForward writes act = gelu_tanh(g)·u.
func geluForward(act, g, u []float32) {
	kernels.ParallelFor(len(g)/1024+1, 1, func(b int) {
		for i := b * 1024; i < min((b+1)*1024, len(g)); i++ {
			act[i] = model.GeluTanh(g[i]) * u[i]
		}
	})
}

// geluBackward writes the gradients of gate and up given that of act = gelu_tanh(g)·u.
func geluBackward(dg, du, dact, g, u []float32, rows, inter int) {
	kernels.ParallelFor(rows, 16, func(r int) {
		for i := r * inter; i < (r+1)*inter; i++ {
			du[i] = dact[i] * model.GeluTanh(g[i])
			dg[i] = dact[i] * u[i] * model.GeluTanhGrad(g[i])
		}
	})
}

// postNormBackward returns the gradient of a sublayer's output y given dout, that of
// RMSNorm(y)·w (w nil: no post norm, dout itself).
func postNormBackward(ar *arena, dout, y, rms, w []float32, rows, cols int) []float32 {
	if w == nil {
		return dout
	}
	dy := ar.raw(rows * cols)
	rmsNormBackward(dy, dout, y, rms, rows, cols, w, false)
	return dy
}

// softcapGrad turns row i's gradient with respect to the capped logits into the gradient with
// respect to the raw ones (capT holds tanh(z/cap); nil: no capping).
func softcapGrad(row, capT []float32, i, V int) {
	if capT == nil {
		return
	}
	t := capT[i*V : (i+1)*V]
	for j := range row {
		row[j] *= 1 - t[j]*t[j]
	}
}

package train

import (
	"math"

	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/kernels"
	"github.com/honeai/hone/internal/model"
)

// tiledQuantHead sends a quantized LM head to headQuant (a variable so tests can compare it
// with the chunked path).
var tiledQuantHead = true

// headTile is how many vocabulary rows of a quantized LM head headQuant dequantizes at a
// time (3.5 MB of f32 for a 896-wide head): fewer tiles mean fewer passes over the
// positions' gradient, which every tile's backward product adds into.
var headTile = 1024

// headQuant is head for a quantized LM head (QLoRA): instead of chunks of positions against
// the whole vocabulary — which would dequantize the whole head once per chunk and direction,
// eight times per SFT step of 512 tokens — it walks the vocabulary a tile of head rows at a
// time against every needed position at once. With statistics wanted (st), a first walk keeps
// each position's running maximum, sum of exponentials and their weighted sum (an online
// log-sum-exp, rescaled when the maximum grows), from which the log-probability, entropy and
// lse come; with coefficients (g), a second walk (the only one when st is nil: lse is known)
// recomputes each tile's logits, turns them into dlogits = g·(onehot − softmax) and adds
// dlogits·W_tile into the positions' gradient while the tile is still dequantized. The head is
// dequantized twice per SFT step, no copy of it outlives a tile, and the logits held are
// positions × headTile (logits and exponentials) instead of ChunkRows × vocabulary.
func (e *Trainer) headQuant(s Seq, xf []float32, rows []int, st *TokenStats, lse, g, dxf []float32, ht headTokens) {
	m := e.M
	H, V := m.Config.HiddenSize, m.Config.VocabSize
	W := m.LMHead.W.Q
	n := len(rows)
	tile := min(headTile, V)
	defer e.ar.releaseFrom(e.ar.mark())
	xc := e.ar.raw(n * H)
	for i, t := range rows {
		copy(xc[i*H:(i+1)*H], xf[t*H:(t+1)*H])
	}
	wt := e.ar.raw(tile * H)  // the dequantized tile of head rows
	lt := e.ar.raw(n * tile)  // the tile's logits (then dlogits), n × tile
	scr := e.ar.raw(n * tile) // exponentials of the first walk
	var capT []float32        // final soft-capping: tanh of each capped logit of the tile
	if m.Config.FinalSoftcap > 0 {
		capT = e.ar.raw(n * tile)
	}
	// logits computes the tile [v0, v0+w)'s logits of every position into lt (n × w). The
	// GEMM packs the positions again for every tile: at tiles of 1024 rows that costs less
	// than packing them once and transposing each tile's logits (2.6 ns an element in a
	// profile of the Qwen2.5-0.5B shape).
	// The adapter's head rows (ht) take the place of the base's in the tile, so that the
	// backward product reads them too.
	logits := func(v0, w int) {
		kernels.ParallelFor(w, 8, func(r int) { W.Row(wt[r*H:(r+1)*H], v0+r) })
		if ht.t != nil {
			for j, id := range ht.t.IDs {
				if id >= v0 && id < v0+w {
					copy(wt[(id-v0)*H:(id-v0+1)*H], ht.t.Rows[j*H:(j+1)*H])
				}
			}
		}
		gemm.Sgemm(false, true, n, w, H, 1, xc, H, wt, H, 0, lt, w)
		ht.setLogits(xc, lt, n, H, v0, w)
		if capT != nil {
			kernels.ParallelFor(n, 8, func(i int) {
				model.Softcap(lt[i*w:(i+1)*w], capT[i*w:(i+1)*w], m.Config.FinalSoftcap)
			})
		}
	}
	if st != nil {
		mx := e.ar.raw(n)           // running maximum
		sum := make([]float64, 2*n) // Σ exp(z − mx), then Σ exp(z − mx)·(z − mx)
		ws := sum[n:]
		for i := range n {
			mx[i] = float32(math.Inf(-1))
		}
		for v0 := 0; v0 < V; v0 += tile {
			w := min(tile, V-v0)
			logits(v0, w)
			kernels.ParallelFor(n, 4, func(i int) {
				t := rows[i]
				row, ex := lt[i*w:(i+1)*w], scr[i*w:(i+1)*w]
				if tok := s.Tokens[t+1]; tok >= v0 && tok < v0+w {
					st.Logp[t] = row[tok-v0]
				}
				old, tm := mx[i], kernels.Max(row)
				nm := max(old, tm)
				if nm > old && sum[i] > 0 {
					// Rescale to the new maximum: Σ e^(z−nm) = c·Σ e^(z−old) and
					// Σ e^(z−nm)(z−nm) = c·(Σ e^(z−old)(z−old) + (old−nm)·Σ e^(z−old)), c = e^(old−nm).
					c := math.Exp(float64(old - nm))
					ws[i] = c * (ws[i] + float64(old-nm)*sum[i])
					sum[i] *= c
				}
				mx[i] = nm
				sum[i] += float64(kernels.ExpAffine(ex, row, 1, -nm))
				acc := 0.0
				for j, v := range row {
					acc += float64(ex[j]) * float64(v-nm)
				}
				ws[i] += acc
			})
		}
		for i, t := range rows {
			logZ := math.Log(sum[i])
			lse[t] = mx[i] + float32(logZ)
			st.Entropy[t] = float32(logZ - ws[i]/sum[i])
			st.Logp[t] -= lse[t]
		}
	}
	if g == nil {
		return
	}
	dxc := e.ar.get(n * H)
	for v0 := 0; v0 < V; v0 += tile {
		w := min(tile, V-v0)
		logits(v0, w)
		kernels.ParallelFor(n, 4, func(i int) {
			t := rows[i]
			row := lt[i*w : (i+1)*w]
			// dlogits = g·(onehot − softmax).
			kernels.ExpAffine(row, row, 1, -lse[t])
			kernels.Scale(row, -g[t])
			if tok := s.Tokens[t+1]; tok >= v0 && tok < v0+w {
				row[tok-v0] += g[t]
			}
			softcapGrad(row, capT, i, w)
		})
		gemm.Sgemm(false, false, n, H, w, 1, lt, w, wt, H, 1, dxc, H)
		headTokens{t: ht.t, grad: ht.grad}.backward(xc, lt, n, H, v0, w, dxc) // the tile held the rows: no correction
	}
	for i, t := range rows {
		kernels.Add(dxf[t*H:(t+1)*H], dxc[i*H:(i+1)*H])
	}
}

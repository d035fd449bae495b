package model

import (
	"github.com/honeai/hone/internal/kernels"
	"github.com/honeai/hone/internal/quant"
)

// moeOneRow computes, for a single row h (a decode step of one sequence) routed by Route into
// mb, the routed experts' output and adds it to x, in two quantized products over the worker
// pool instead of one or two per expert: every routed expert's gate and up as one product
// (quant.MatMulTMany: the K experts share the row, quantized once), then every down
// projection, each on its own expert's activations, as one product (quant.MatMulTEach).
// It reports false, computing nothing, when an expert's weights are not all quantized.
func moeOneRow(ml *MoELayer, mb *MoEBuffers, h, x []float32, E, K, H, I int) bool {
	gu, downs := mb.gateUps[:0], mb.downs[:0]
	for e := range E {
		if mb.Start[e+1] == mb.Start[e] {
			continue
		}
		ex := &ml.Experts[e]
		f := ex.gateUp
		if len(f.qs) != 2 || len(f.parts) != 2 || ex.Down.W.Q == nil {
			return false
		}
		gu, downs = append(gu, f.qs...), append(downs, ex.Down.W.Q)
	}
	mb.gateUps, mb.downs = gu, downs
	out := mb.Tmp[:2*K*I]
	quant.MatMulTMany(h, 1, gu, out, 2*K*I, false)
	for j := range K {
		g, u := mb.Gate[j*I:(j+1)*I], mb.Up[j*I:(j+1)*I]
		copy(g, out[2*j*I:(2*j+1)*I])
		copy(u, out[(2*j+1)*I:(2*j+2)*I])
		var eg []float32
		if mb.ExpGate != nil {
			eg = mb.ExpGate[j*I : (j+1)*I]
		}
		kernels.SwiGLU(mb.Act[j*I:(j+1)*I], eg, g, u)
	}
	quant.MatMulTEach(mb.Act[:K*I], downs, mb.Y[:K*H], H)
	for j, a := range mb.Order[:K] {
		kernels.Axpy(mb.Wt[a], mb.Y[j*H:(j+1)*H], x[:H])
	}
	return true
}

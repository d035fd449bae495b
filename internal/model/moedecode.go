package model

import (
	"github.com/honeai/hone/internal/kernels"
	"github.com/honeai/hone/internal/quant"
)

// moeOneRow computes, for a single row h (a decode step of one sequence) routed by Route into
// mb, each routed expert's output into mb.Y (in Order, as moeExperts), in two quantized
// products over the worker pool instead of one or two per expert: every routed expert's gate
// and up as one product (quant.MatMulTMany: the K experts share the row, quantized once), then
// every down projection, each on its own expert's activations, as one product
// (quant.MatMulTEach). It reports false, computing nothing, when an expert's weights are not
// all quantized.
func moeOneRow(ml *MoELayer, mb *MoEBuffers, h []float32, E, K, H, I int) bool {
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
		copy(mb.Gate[j*I:(j+1)*I], out[2*j*I:(2*j+1)*I])
		copy(mb.Up[j*I:(j+1)*I], out[(2*j+1)*I:(2*j+2)*I])
	}
	var eg []float32
	if mb.ExpGate != nil {
		eg = mb.ExpGate[:K*I]
	}
	kernels.SwiGLU(mb.Act[:K*I], eg, mb.Gate[:K*I], mb.Up[:K*I])
	quant.MatMulTEach(mb.Act[:K*I], downs, mb.Y[:K*H], H)
	return true
}

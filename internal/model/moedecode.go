package model

import "github.com/honeai/hone/internal/quant"

// moeGateUpOneRow computes, for a single row (a decode step of one sequence), the gate and up
// projections of every expert it was routed to as one quantized product: the K experts share
// the row's input, so their 2·K matrices are multiplied in one pass over the worker pool
// (quant.MatMulTMany: the input quantized once, one parallel section) instead of K passes.
// It reports false, computing nothing, when an expert's gate or up weight is not quantized.
func moeGateUpOneRow(ml *MoELayer, mb *MoEBuffers, h []float32, E, I int) bool {
	var ms []*quant.Matrix
	for e := range E {
		if mb.Start[e+1] == mb.Start[e] {
			continue
		}
		f := ml.Experts[e].gateUp
		if len(f.qs) != 2 || len(f.parts) != 2 {
			return false
		}
		ms = append(ms, f.qs...)
	}
	out := mb.Tmp[:len(ms)*I]
	quant.MatMulTMany(h, 1, ms, out, len(ms)*I, false)
	for j := range len(ms) / 2 {
		copy(mb.Gate[j*I:(j+1)*I], out[2*j*I:(2*j+1)*I])
		copy(mb.Up[j*I:(j+1)*I], out[(2*j+1)*I:(2*j+2)*I])
	}
	return true
}

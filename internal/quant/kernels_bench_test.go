//go:build amd64 && !purego

package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkRowKernels times each row kernel, Go and assembly, over benchRows rows of 1536
// elements (and 576, SmolLM2-135M's width, for the 32-element types) against one row of
// activations, reporting ns per row and the weights' GB/s.
//
//	go test ./internal/quant/ -run '^$' -bench RowKernels -benchtime 200x
func BenchmarkRowKernels(b *testing.B) {
	const benchRows = 1024
	r := rand.New(rand.NewPCG(7, 8))
	impls := append([]struct {
		name string
		ok   bool
		k    rowKernels
	}{{"go", true, goRowKernels}}, asmRowKernels()...)
	for _, typ := range rowKernelTypes {
		lens := []int{1536}
		if typ.BlockSize() == 32 {
			lens = []int{576, 1536}
		}
		for _, n := range lens {
			nb := n / typ.BlockSize()
			w := randomBlocks(r, typ, nb*benchRows)
			rowBytes := nb * typ.BlockBytes()
			a := randomTestActs(r, typ, n)
			for _, im := range impls {
				if !im.ok {
					continue
				}
				b.Run(fmt.Sprintf("%v/%d/%s", typ, n, im.name), func(b *testing.B) {
					sink := float32(0)
					for b.Loop() {
						for i := range benchRows {
							sink += im.k.call(typ, w[i*rowBytes:(i+1)*rowBytes], a)
						}
					}
					rowKernelSink = sink
					ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / benchRows
					b.ReportMetric(ns, "ns/row")
					b.ReportMetric(float64(rowBytes)/ns, "GB/s")
					b.ReportMetric(0, "ns/op")
				})
			}
		}
	}
}

var rowKernelSink float32

// BenchmarkMultiRowKernels times the multi-row kernels over benchRows weight rows of 576
// elements (SmolLM2-135M's width) against 4 activation rows, beside 4 calls of the row
// kernel in use, reporting ns per weight row and activation row.
//
//	go test ./internal/quant/ -run '^$' -bench MultiRowKernels -benchtime 200x
func BenchmarkMultiRowKernels(b *testing.B) {
	const benchRows, n = 1024, 576
	r := rand.New(rand.NewPCG(7, 9))
	for _, typ := range multiRowTypes {
		nb := n / 32
		w := randomBlocks(r, typ, nb*benchRows)
		rowBytes := nb * typ.BlockBytes()
		var rows [4]testActs
		var q []int8
		var d, s []float32
		for i := range rows {
			rows[i] = randomTestActs(r, typ, n)
			q, d, s = append(q, rows[i].q...), append(d, rows[i].d...), append(s, rows[i].s...)
		}
		impls := append([]multiRowKernels{{name: "rowkernel", ok: true}}, allMultiRowKernels()...)
		disp := asmRowKernels()[2].k
		for _, im := range impls {
			if !im.ok {
				continue
			}
			b.Run(fmt.Sprintf("%v/%s", typ, im.name), func(b *testing.B) {
				var out [4]float32
				sink := float32(0)
				for b.Loop() {
					for i := range benchRows {
						row := w[i*rowBytes : (i+1)*rowBytes]
						if im.name == "rowkernel" {
							for j := range rows {
								out[j] = disp.call(typ, row, rows[j])
							}
						} else {
							im.get(typ)(row, q, d, s, &out)
						}
						sink += out[0] + out[3]
					}
				}
				rowKernelSink = sink
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows/4, "ns/row·act")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

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

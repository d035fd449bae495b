//go:build !(linux || darwin || freebsd)

package gemm

import "sync/atomic"

// offHeapBytes stays 0: packs live on the Go heap on this system.
var offHeapBytes atomic.Int64

// allocPacked returns zeroed storage for pb of n elements (on the Go heap on this system).
func allocPacked[E float32 | uint16](pb *PackedB, n int) []E { return make([]E, n) }

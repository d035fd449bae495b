//go:build linux || darwin || freebsd

package quant

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// offHeapMin is the size from which a packed copy lives outside the Go heap.
const offHeapMin = 64 << 10

// allocPacked returns n zeroed bytes for p's packed copy. From offHeapMin they are mapped
// anonymously outside the Go heap and unmapped when p is collected (as gemm's packed
// weights): the collector then sizes its heap goal by the activations, instead of letting
// garbage grow to the size of the weights between collections.
func allocPacked(p *packedMem, n int) []byte {
	if n < offHeapMin {
		return make([]byte, n)
	}
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n)
	}
	runtime.AddCleanup(p, func(m []byte) { _ = unix.Munmap(m) }, mem)
	return mem
}

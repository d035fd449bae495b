//go:build linux || darwin || freebsd

package gemm

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// offHeapMin is the size from which a packed operand lives outside the Go heap.
const offHeapMin = 1 << 20

// offHeapBytes is the memory mapped for packs and not yet given back.
var offHeapBytes atomic.Int64

// allocPacked returns zeroed storage for pb of n elements of size esz. Large packs (weights:
// gigabytes for a model) are mapped anonymously outside the Go heap and unmapped when pb is
// collected: the collector then sizes its heap goal by the activations only, instead of
// letting garbage grow to the size of the weights between collections.
func allocPacked[E float32 | uint16](pb *PackedB, n int) []E {
	var zero E
	size := n * int(unsafe.Sizeof(zero))
	if size < offHeapMin {
		return make([]E, n)
	}
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return make([]E, n)
	}
	offHeapBytes.Add(int64(size))
	runtime.AddCleanup(pb, func(m []byte) {
		if unix.Munmap(m) == nil {
			offHeapBytes.Add(-int64(len(m)))
		}
	}, mem)
	return unsafe.Slice((*E)(unsafe.Pointer(&mem[0])), n)
}

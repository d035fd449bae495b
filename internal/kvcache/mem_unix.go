//go:build linux || darwin || freebsd

package kvcache

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// allocKV returns n zeroed floats of KV cache memory, mapped outside the Go heap (so the
// collector's heap goal does not grow with the cache), and the function that unmaps them.
// Where mapping fails it falls back to the Go heap (free is nil).
func allocKV(n int) (mem []float32, free func()) {
	b, err := unix.Mmap(-1, 0, n*4, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return make([]float32, n), nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n), func() { _ = unix.Munmap(b) }
}

//go:build unix

package safetensors

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Release tells the kernel that t's data will not be read again soon (its values were
// copied or quantized elsewhere): the whole pages inside it are dropped from the process's
// mapping (madvise MADV_DONTNEED), so they no longer count in its resident memory. The file
// stays mapped and the page cache keeps the data: reading t again faults the pages back in.
// A no-op for a tensor that is not a view of a mapped file.
func (t *Tensor) Release() {
	if len(t.Data) == 0 || !t.mapped {
		return
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&t.Data[0]))
	end := start + uintptr(len(t.Data))
	lo, hi := (start+page-1)&^(page-1), end&^(page-1)
	if hi <= lo {
		return
	}
	_ = unix.Madvise(t.Data[lo-start:hi-start], unix.MADV_DONTNEED)
}

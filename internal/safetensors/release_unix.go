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
func (t *Tensor) Release() { t.ReleaseRange(0, len(t.Data)) }

// ReleaseRange is Release for the n bytes of t's data from byte off (the part of a tensor
// that one weight views); a no-op for a range outside the data.
func (t *Tensor) ReleaseRange(off, n int) {
	if !t.mapped || off < 0 || n <= 0 || off+n > len(t.Data) {
		return
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&t.Data[off]))
	end := start + uintptr(n)
	lo, hi := (start+page-1)&^(page-1), end&^(page-1)
	if hi <= lo {
		return
	}
	d := t.Data[off : off+n]
	_ = unix.Madvise(d[lo-start:hi-start], unix.MADV_DONTNEED)
}

//go:build unix

package gguf

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapFile maps a file read-only.
func mapFile(f *os.File, size int64) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

func unmapFile(b []byte) error { return unix.Munmap(b) }

// dropPages tells the kernel that the whole pages of b (a part of a read-only file mapping)
// are not needed for now: they leave the process's resident memory and are read back from
// the file if touched again.
func dropPages(b []byte) {
	const page = 4096
	start := (uintptr(unsafe.Pointer(unsafe.SliceData(b))) + page - 1) &^ (page - 1)
	end := (uintptr(unsafe.Pointer(unsafe.SliceData(b))) + uintptr(len(b))) &^ (page - 1)
	if end <= start {
		return
	}
	off := start - uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	_ = unix.Madvise(b[off:off+(end-start)], unix.MADV_DONTNEED) // advice: an error changes nothing
}

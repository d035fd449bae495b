//go:build unix

package gguf

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps a file read-only.
func mapFile(f *os.File, size int64) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

func unmapFile(b []byte) error { return unix.Munmap(b) }

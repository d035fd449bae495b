//go:build !unix

package gguf

import (
	"io"
	"os"
)

// mapFile reads the file into memory where memory mapping is not available.
func mapFile(f *os.File, size int64) ([]byte, error) {
	b := make([]byte, size)
	_, err := io.ReadFull(f, b)
	return b, err
}

func unmapFile([]byte) error { return nil }

func dropPages([]byte) {}

//go:build !amd64 || purego

package gemm

// registerNative registers nothing: this build has only the pure-Go implementation.
func registerNative() {}

func decodeNative(kind elemKind, dst []float32, src []uint16) bool { return false }

func encodeNative(kind elemKind, dst []uint16, src []float32) bool { return false }

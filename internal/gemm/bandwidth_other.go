//go:build !amd64 || purego

package gemm

func readSumNative(p []float32) (int, float32) { return 0, 0 }

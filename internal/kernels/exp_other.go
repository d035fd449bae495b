//go:build !amd64 || purego

package kernels

// hasExpVector: no vectorised exp in this build.
const hasExpVector = false

func expVector(n int, dst, src *float32, a, b float32) float32 {
	panic("kernels: no vectorised exp in this build")
}

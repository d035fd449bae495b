//go:build !amd64 || purego

package kernels

// hasVector: no AVX-512 slice kernels in this build.
const hasVector = false

func expVector(n int, dst, src *float32, a, b float32) float32 {
	panic("kernels: no vectorised exp in this build")
}

func maxVector(n int, x *float32) float32      { panic("kernels: no vector max in this build") }
func scaleVector(n int, x *float32, s float32) { panic("kernels: no vector scale in this build") }

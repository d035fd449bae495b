//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

//go:generate sh -c "cd ../gemm/asmgen && go run . -target kernels -pkg kernels -out ../../kernels/exp_amd64.s -decl ../../kernels/exp_amd64_decl.go"

// hasVector reports whether the AVX-512 slice kernels (exp, max and scale here; the others in
// slices_amd64.go) run.
var hasVector = cpu.X86.HasAVX512F

// expVector is the vectorised exp for n a multiple of 16 (called directly, not through a
// function value, so that callers' buffers stay on their stacks).
func expVector(n int, dst, src *float32, a, b float32) float32 {
	return expAffineAVX512(n, dst, src, a, b)
}

func maxVector(n int, x *float32) float32      { return maxAVX512(n, x) }
func scaleVector(n int, x *float32, s float32) { scaleAVX512(n, x, s) }

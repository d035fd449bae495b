//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

//go:generate sh -c "cd ../gemm/asmgen && go run . -target kernels -pkg kernels -out ../../kernels/exp_amd64.s -decl ../../kernels/exp_amd64_decl.go"

// expVector is the vectorised exp for whole blocks of 16 (nil: none).
var expVector = func() func(n int, dst, src *float32, a, b float32) float32 {
	if cpu.X86.HasAVX512F {
		return expAffineAVX512
	}
	return nil
}()

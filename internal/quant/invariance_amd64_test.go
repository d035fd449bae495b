//go:build amd64 && !purego

package quant

import "testing"

func init() {
	if asmVNNI && asmAVX2 {
		moreKernelSets = append(moreKernelSets, kernelSet{"avx2", avx2Kernels})
	}
}

// avx2Kernels swaps the AVX2 kernels in for the AVX-512 ones (no packing: new Pack calls pack
// nothing) until the test ends.
func avx2Kernels(t *testing.T) {
	goKernels(t) // saves and restores every kernel variable
	pk := packedKernelsInUse
	t.Cleanup(func() { packedKernelsInUse = pk })
	packedKernelsInUse = false
	rowQ8_0, rowQ4_0, rowQ4_1, rowQ5_0, rowQ5_1 = dotQ8_0AVX2, dotQ4_0AVX2, dotQ4_1AVX2, dotQ5_0AVX2, dotQ5_1AVX2
	rowQ4_K, rowQ5_K, rowQ6_K = dotQ4_KAVX2, dotQ5_KAVX2, dotQ6_KAVX2
	setAsmKernels4(dot4Q8_0AVX2, dot4Q4_0AVX2, dot4Q4_1AVX2, dot4Q5_0AVX2, dot4Q5_1AVX2)
	setAsmKernels1(dot1Q8_0AVX2, dot1Q4_0AVX2, dot1Q4_1AVX2, dot1Q5_0AVX2, dot1Q5_1AVX2)
	dot4Q4_K, dot4Q6_K, dot1Q4_K, dot1Q6_K, row1Q4_K, row1Q6_K = nil, nil, nil, nil, nil, nil
}

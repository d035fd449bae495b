//go:build amd64 && !purego

package gemm

// readSumNative sums the longest prefix of p the AVX-512 read kernel takes (a multiple of 64
// elements) and returns its length and sum; (0, 0) without AVX-512.
func readSumNative(p []float32) (int, float32) {
	n := len(p) &^ 63
	if !hasAVX512 || n == 0 {
		return 0, 0
	}
	return n, readSumAVX512(n, &p[0])
}

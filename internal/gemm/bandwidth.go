package gemm

// ReadSum returns the sum of p, reading every element once with the widest vector loads the
// CPU has: the read kernel of the memory bandwidth benchmark (BenchmarkMemoryBandwidth), which
// the decode kernels' weight streaming is compared against (docs/performance.md).
func ReadSum(p []float32) float32 {
	done, s := readSumNative(p)
	var t [8]float32
	rest := p[done:]
	for len(rest) >= 8 {
		for i := range t {
			t[i] += rest[i]
		}
		rest = rest[8:]
	}
	for _, v := range rest {
		s += v
	}
	for _, v := range t {
		s += v
	}
	return s
}

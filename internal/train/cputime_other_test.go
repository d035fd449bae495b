//go:build !unix

package train

// cpuSeconds is not measured here (benchmarks report 0 CPU seconds).
func cpuSeconds() float64 { return 0 }

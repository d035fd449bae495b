//go:build !unix

package traceapi_test

func cpuSeconds() float64 { return 0 }

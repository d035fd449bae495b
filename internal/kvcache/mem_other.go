//go:build !(linux || darwin || freebsd)

package kvcache

// allocKV returns n zeroed floats of KV cache memory (on the Go heap on this system).
func allocKV(n int) (mem []float32, free func()) { return make([]float32, n), nil }

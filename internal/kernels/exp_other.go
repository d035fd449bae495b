//go:build !amd64 || purego

package kernels

// expVector is the vectorised exp for whole blocks of 16: none in this build.
var expVector func(n int, dst, src *float32, a, b float32) float32

//go:build !(linux || darwin || freebsd)

package quant

func allocPacked(_ *packedMem, n int) []byte { return make([]byte, n) }

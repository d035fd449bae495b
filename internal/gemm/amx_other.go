//go:build !amd64 || !linux || purego

package gemm

func amxBlock(kt int, a *uint32, lda int, b *uint16, bstride int, npanels int, c *float32, ldc int, cfg *byte, load int) {
	panic("gemm: AMX is not available in this build")
}

func amxAvailable() bool { return false }

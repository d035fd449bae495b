//go:build amd64 && linux && !purego

package gemm

import (
	"syscall"

	"golang.org/x/sys/cpu"
)

// amxBlock is the AMX-BF16 block kernel (amx_linux_amd64.s): for each of npanels panels j,
// C[0:32, 32j:32j+32] += A·B_j over kt tiles of 16 depth pairs; A is 32 rows of bf16 pairs,
// lda bytes apart; B_j starts bstride bytes after B_{j-1}; cfg is amxConfig. With load 0 C
// is not read (C = A·B_j).
//
//go:noescape
func amxBlock(kt int, a *uint32, lda int, b *uint16, bstride int, npanels int, c *float32, ldc int, cfg *byte, load int)

// amxAvailable asks Linux for the AMX tile state (ARCH_REQ_XCOMP_PERM for XTILEDATA, once
// per process) when the CPU has AMX-BF16.
func amxAvailable() bool {
	if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXBF16 {
		return false
	}
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0)
	return errno == 0
}

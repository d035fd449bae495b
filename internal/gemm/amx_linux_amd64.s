//go:build amd64 && !purego

#include "textflag.h"

// AMX-BF16 block kernel (Intel AMX: TILELOADD, TDPBF16PS, TILESTORED), written by hand
// because neither Go's assembler nor avo knows the AMX instructions: each is emitted as the
// bytes GNU as produces for it (shown in the comments, AT&T syntax).
//
// func amxBlock(kt int, a *uint32, lda int, b *uint16, bstride int, npanels int, c *float32, ldc int, cfg *byte, load int)
//
// For each of npanels panels j: C[0:32, 32j:32j+32] += A·B_j, where A is 32 rows of kt·16
// bf16 pairs (row r at a + r·lda bytes) and B_j is kt·16 pair rows of 32 columns (128 bytes
// each) at b + j·bstride; C is f32 with ldc elements per row (with load 0, C is not read:
// C = A·B_j). cfg is the 64-byte tile
// configuration (tmm0..7: 16 rows of 64 bytes). Registers: BX/CX the B tile and its stride,
// R13/R8 the A tiles (rows 0-15, 16-31), DX their stride, R10/R12 the C tiles, R11 their
// stride; SI the depth counter, R9 the panel counter.
TEXT ·amxBlock(SB), NOSPLIT, $0-80
	MOVQ cfg+64(FP), AX
	// ldtilecfg (%rax)
	BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x00
	MOVQ ldc+56(FP), R11
	SHLQ $2, R11
	MOVQ lda+16(FP), DX
	MOVQ $128, CX
	MOVQ npanels+40(FP), R9
	MOVQ c+48(FP), R10
	MOVQ b+24(FP), DI

panel:
	// C tiles of this panel.
	MOVQ R11, R12
	SHLQ $4, R12
	ADDQ R10, R12
	CMPQ load+72(FP), $0
	JNE  loadc
	// tilezero %tmm0 .. %tmm3
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc0
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc8
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd0
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd8
	JMP  tiles

loadc:
	// tileloadd (%r10,%r11,1), %tmm0
	BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x04; BYTE $0x1a
	// tileloadd 0x40(%r10,%r11,1), %tmm1
	BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x4c; BYTE $0x1a; BYTE $0x40
	// tileloadd (%r12,%r11,1), %tmm2
	BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x14; BYTE $0x1c
	// tileloadd 0x40(%r12,%r11,1), %tmm3
	BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x5c; BYTE $0x1c; BYTE $0x40

tiles:
	MOVQ a+8(FP), R13
	MOVQ DX, R8
	SHLQ $4, R8
	ADDQ R13, R8
	MOVQ DI, BX
	MOVQ kt+0(FP), SI

depth:
	// tileloadd 0x0(%r13,%rdx,1), %tmm4
	BYTE $0xc4; BYTE $0xc2; BYTE $0x7b; BYTE $0x4b; BYTE $0x64; BYTE $0x15; BYTE $0x00
	// tileloadd (%r8,%rdx,1), %tmm5
	BYTE $0xc4; BYTE $0xc2; BYTE $0x7b; BYTE $0x4b; BYTE $0x2c; BYTE $0x10
	// tileloadd (%rbx,%rcx,1), %tmm6
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x34; BYTE $0x0b
	// tileloadd 0x40(%rbx,%rcx,1), %tmm7
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x7c; BYTE $0x0b; BYTE $0x40
	// tdpbf16ps %tmm6, %tmm4, %tmm0
	BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xc4
	// tdpbf16ps %tmm7, %tmm4, %tmm1
	BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xcc
	// tdpbf16ps %tmm6, %tmm5, %tmm2
	BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xd5
	// tdpbf16ps %tmm7, %tmm5, %tmm3
	BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xdd
	ADDQ $64, R13
	ADDQ $64, R8
	ADDQ $2048, BX
	DECQ SI
	JNZ  depth

	// tilestored %tmm0, (%r10,%r11,1)
	BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x04; BYTE $0x1a
	// tilestored %tmm1, 0x40(%r10,%r11,1)
	BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x4c; BYTE $0x1a; BYTE $0x40
	// tilestored %tmm2, (%r12,%r11,1)
	BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x14; BYTE $0x1c
	// tilestored %tmm3, 0x40(%r12,%r11,1)
	BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x5c; BYTE $0x1c; BYTE $0x40
	ADDQ $128, R10
	ADDQ bstride+32(FP), DI
	DECQ R9
	JNZ  panel

	// tilerelease
	BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0
	RET

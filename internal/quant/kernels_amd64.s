// Hand-written (avo v0.5.0, which generates internal/gemm's kernels, has no VPDPBUSD).

//go:build amd64 && !purego

#include "textflag.h"

// Constants. qidx01: VPMOVZXBD indices [0×8, 1×8]; qidx02: [0×8, 2×8]; qidxK: four rows
// [2c×8, 2c+1×8]; qidx6: four rows [4r, 4r, 4r, 4r, 4r+1 ×4, 4r+2 ×4, 4r+3 ×4].
DATA qidx01<>+0(SB)/8, $0x0000000000000000
DATA qidx01<>+8(SB)/8, $0x0101010101010101
GLOBL qidx01<>(SB), RODATA|NOPTR, $16

DATA qidx02<>+0(SB)/8, $0x0000000000000000
DATA qidx02<>+8(SB)/8, $0x0202020202020202
GLOBL qidx02<>(SB), RODATA|NOPTR, $16

DATA qidxK<>+0(SB)/8, $0x0000000000000000
DATA qidxK<>+8(SB)/8, $0x0101010101010101
DATA qidxK<>+16(SB)/8, $0x0202020202020202
DATA qidxK<>+24(SB)/8, $0x0303030303030303
DATA qidxK<>+32(SB)/8, $0x0404040404040404
DATA qidxK<>+40(SB)/8, $0x0505050505050505
DATA qidxK<>+48(SB)/8, $0x0606060606060606
DATA qidxK<>+56(SB)/8, $0x0707070707070707
GLOBL qidxK<>(SB), RODATA|NOPTR, $64

DATA qidx6<>+0(SB)/8, $0x0101010100000000
DATA qidx6<>+8(SB)/8, $0x0303030302020202
DATA qidx6<>+16(SB)/8, $0x0505050504040404
DATA qidx6<>+24(SB)/8, $0x0707070706060606
DATA qidx6<>+32(SB)/8, $0x0909090908080808
DATA qidx6<>+40(SB)/8, $0x0b0b0b0b0a0a0a0a
DATA qidx6<>+48(SB)/8, $0x0d0d0d0d0c0c0c0c
DATA qidx6<>+56(SB)/8, $0x0f0f0f0f0e0e0e0e
GLOBL qidx6<>(SB), RODATA|NOPTR, $64

DATA qc0F<>+0(SB)/4, $0x0f0f0f0f
GLOBL qc0F<>(SB), RODATA|NOPTR, $4
DATA qc08<>+0(SB)/4, $0x08080808
GLOBL qc08<>(SB), RODATA|NOPTR, $4
DATA qc10<>+0(SB)/4, $0x10101010
GLOBL qc10<>(SB), RODATA|NOPTR, $4
DATA qc30<>+0(SB)/4, $0x30303030
GLOBL qc30<>(SB), RODATA|NOPTR, $4
DATA qc01<>+0(SB)/4, $0x01010101
GLOBL qc01<>(SB), RODATA|NOPTR, $4
DATA qc1w<>+0(SB)/4, $0x00010001
GLOBL qc1w<>(SB), RODATA|NOPTR, $4

// ---------------------------------------------------------------------------------------
// AVX-512 (F, BW, VL, VNNI) kernels of the 32-element types: two blocks per iteration in a
// ZMM (bytes 0-31 block b, 32-63 block b+1), VPDPBUSD of the unsigned weights with the
// signed activations giving 8 int32 partial sums per block, converted and scaled by
// d·dx per block into a float accumulator Z0; an odd last block goes through a YMM.
// Registers: AX w, SI q, DX d, BX s, CX blocks left; Z24 0x0f bytes, Z25 the VPERMPS
// index spreading the two blocks' scales, K1 the words of the high nibbles.

// NIBBLES2 expands the 16 qs bytes at off0(AX) and off1(AX) into Z2 = [lo0 hi0 lo1 hi1]
// (Y7 scratch).
#define NIBBLES2(off0, off1) \
	VBROADCASTI128 off0(AX), Y2;   \
	VBROADCASTI128 off1(AX), Y7;   \
	VINSERTI64X4   $1, Y7, Z2, Z2; \
	VPSRLW         $4, Z2, K1, Z2; \
	VPANDD         Z24, Z2, Z2

// NIBBLES1 expands the 16 qs bytes at off(AX) into Y2 = [lo hi].
#define NIBBLES1(off) \
	VMOVDQU     off(AX), X2;    \
	VPSRLW      $4, X2, X3;     \
	VINSERTI128 $1, X3, Y2, Y2; \
	VPANDD      Y24, Y2, Y2

// SCALE2_D: Z4 = [d0·dx0 ×8, d1·dx1 ×8] for blocks at 0(AX) and bs(AX) (Z25 = qidx01).
#define SCALE2_D(bs) \
	MOVWLZX   (AX), R8;   \
	MOVWLZX   bs(AX), R9; \
	SHLL      $16, R9;    \
	ORL       R9, R8;     \
	VMOVD     R8, X4;     \
	VCVTPH2PS X4, X4;     \
	VMOVQ     (DX), X9;   \
	VMULPS    X9, X4, X4; \
	VPERMPS   Z4, Z25, Z4

// SCALE2_DM: the same for blocks with d, m (Z25 = qidx02), adding m·s to X1 lanes 1, 3.
#define SCALE2_DM(bs) \
	MOVL      (AX), R8;          \
	MOVL      bs(AX), R9;        \
	SHLQ      $32, R9;           \
	ORQ       R9, R8;            \
	VMOVQ     R8, X4;            \
	VCVTPH2PS X4, X4;            \
	VMOVQ     (DX), X9;          \
	VMOVQ     (BX), X6;          \
	VUNPCKLPS X6, X9, X9;        \
	VMULPS    X9, X4, X4;        \
	VADDPS    X4, X1, X1;        \
	VPERMPS   Z4, Z25, Z4

// SCALE1_D: Y4 = d·dx ×8 for the block at (AX).
#define SCALE1_D \
	MOVWLZX      (AX), R8;      \
	VMOVD        R8, X4;        \
	VCVTPH2PS    X4, X4;        \
	VMULSS       (DX), X4, X4;  \
	VBROADCASTSS X4, Y4

// SCALE1_DM: the same with m·s added to X1 lane 1.
#define SCALE1_DM \
	MOVL         (AX), R8;      \
	VMOVD        R8, X4;        \
	VCVTPH2PS    X4, X4;        \
	VMOVSS       (DX), X9;      \
	VMOVSS       (BX), X6;      \
	VUNPCKLPS    X6, X9, X9;    \
	VMULPS       X9, X4, X4;    \
	VADDPS       X4, X1, X1;    \
	VBROADCASTSS X4, Y4

#define ZTOY0 \
	VEXTRACTF64X4 $1, Z0, Y6; \
	VADDPS        Y6, Y0, Y0

// HSUMY0: X0 lane 0 = the sum of Y0's lanes.
#define HSUMY0 \
	VEXTRACTF128 $1, Y0, X6; \
	VADDPS       X6, X0, X0; \
	VMOVHLPS     X0, X0, X6; \
	VADDPS       X6, X0, X0; \
	VMOVSHDUP    X0, X6;     \
	VADDSS       X6, X0, X0

// ADDM: X0 lane 0 += X1 lanes 1 and 3.
#define ADDM \
	VMOVSHDUP X1, X6;     \
	VMOVHLPS  X6, X6, X7; \
	VADDSS    X7, X6, X6; \
	VADDSS    X6, X0, X0

// func dotQ8_0AVX512(w []byte, q []int8, d []float32) float32
// Signed weights: VPDPBUSD of |w| (−128 reads as 128 unsigned) with x negated where w < 0;
// x is never −128 (QuantizeActs32 clamps to ±127).
TEXT ·dotQ8_0AVX512(SB), NOSPLIT, $0-76
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	VPMOVZXBD    qidx01<>(SB), Z25
	VPXORD       Z27, Z27, Z27
	VXORPS       X0, X0, X0
	CMPQ         CX, $2
	JB           q80z_tail

q80z_loop:
	VMOVDQU      2(AX), Y2
	VINSERTI64X4 $1, 36(AX), Z2, Z2
	VMOVDQU64    (SI), Z3
	VPMOVB2M     Z2, K2
	VPABSB       Z2, Z2
	VPSUBB       Z3, Z27, K2, Z3
	VPXORD       Z5, Z5, Z5
	VPDPBUSD     Z3, Z2, Z5
	VCVTDQ2PS    Z5, Z5
	SCALE2_D(34)
	VFMADD231PS  Z4, Z5, Z0
	ADDQ         $68, AX
	ADDQ         $64, SI
	ADDQ         $8, DX
	SUBQ         $2, CX
	CMPQ         CX, $2
	JAE          q80z_loop

q80z_tail:
	ZTOY0
	TESTQ        CX, CX
	JZ           q80z_done
	VMOVDQU      2(AX), Y2
	VMOVDQU      (SI), Y3
	VPMOVB2M     Y2, K2
	VPABSB       Y2, Y2
	VPSUBB       Y3, Y27, K2, Y3
	VPXORD       Y5, Y5, Y5
	VPDPBUSD     Y3, Y2, Y5
	VCVTDQ2PS    Y5, Y5
	SCALE1_D
	VFMADD231PS  Y4, Y5, Y0

q80z_done:
	HSUMY0
	VZEROUPPER
	MOVSS        X0, ret+72(FP)
	RET

// func dotQ4_0AVX512(w []byte, q []int8, d []float32) float32
// Σ(q-8)·x = Σq·x - Σ8·x, both with VPDPBUSD.
TEXT ·dotQ4_0AVX512(SB), NOSPLIT, $0-76
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	VPBROADCASTD qc0F<>(SB), Z24
	VPMOVZXBD    qidx01<>(SB), Z25
	VPBROADCASTD qc08<>(SB), Z26
	MOVL         $0xff00ff00, R8
	KMOVD        R8, K1
	VXORPS       X0, X0, X0
	CMPQ         CX, $2
	JB           q40z_tail

q40z_loop:
	NIBBLES2(2, 20)
	VMOVDQU64    (SI), Z3
	VPXORD       Z5, Z5, Z5
	VPDPBUSD     Z3, Z2, Z5
	VPXORD       Z6, Z6, Z6
	VPDPBUSD     Z3, Z26, Z6
	VPSUBD       Z6, Z5, Z5
	VCVTDQ2PS    Z5, Z5
	SCALE2_D(18)
	VFMADD231PS  Z4, Z5, Z0
	ADDQ         $36, AX
	ADDQ         $64, SI
	ADDQ         $8, DX
	SUBQ         $2, CX
	CMPQ         CX, $2
	JAE          q40z_loop

q40z_tail:
	ZTOY0
	TESTQ        CX, CX
	JZ           q40z_done
	NIBBLES1(2)
	VMOVDQU      (SI), Y3
	VPXORD       Y5, Y5, Y5
	VPDPBUSD     Y3, Y2, Y5
	VPXORD       Y6, Y6, Y6
	VPDPBUSD     Y3, Y26, Y6
	VPSUBD       Y6, Y5, Y5
	VCVTDQ2PS    Y5, Y5
	SCALE1_D
	VFMADD231PS  Y4, Y5, Y0

q40z_done:
	HSUMY0
	VZEROUPPER
	MOVSS        X0, ret+72(FP)
	RET

// func dotQ4_1AVX512(w []byte, q []int8, d []float32, s []float32) float32
TEXT ·dotQ4_1AVX512(SB), NOSPLIT, $0-100
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	MOVQ         s_base+72(FP), BX
	VPBROADCASTD qc0F<>(SB), Z24
	VPMOVZXBD    qidx02<>(SB), Z25
	MOVL         $0xff00ff00, R8
	KMOVD        R8, K1
	VXORPS       X0, X0, X0
	VXORPS       X1, X1, X1
	CMPQ         CX, $2
	JB           q41z_tail

q41z_loop:
	NIBBLES2(4, 24)
	VPXORD       Z5, Z5, Z5
	VPDPBUSD     (SI), Z2, Z5
	VCVTDQ2PS    Z5, Z5
	SCALE2_DM(20)
	VFMADD231PS  Z4, Z5, Z0
	ADDQ         $40, AX
	ADDQ         $64, SI
	ADDQ         $8, DX
	ADDQ         $8, BX
	SUBQ         $2, CX
	CMPQ         CX, $2
	JAE          q41z_loop

q41z_tail:
	ZTOY0
	TESTQ        CX, CX
	JZ           q41z_done
	NIBBLES1(4)
	VPXORD       Y5, Y5, Y5
	VPDPBUSD     (SI), Y2, Y5
	VCVTDQ2PS    Y5, Y5
	SCALE1_DM
	VFMADD231PS  Y4, Y5, Y0

q41z_done:
	HSUMY0
	ADDM
	VZEROUPPER
	MOVSS        X0, ret+96(FP)
	RET

// func dotQ5_0AVX512(w []byte, q []int8, d []float32) float32
// The fifth bits (qh, a 64-bit mask for two blocks) add 16 to their bytes under a mask.
TEXT ·dotQ5_0AVX512(SB), NOSPLIT, $0-76
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	VPBROADCASTD qc0F<>(SB), Z24
	VPMOVZXBD    qidx01<>(SB), Z25
	VPBROADCASTD qc10<>(SB), Z26
	MOVL         $0xff00ff00, R8
	KMOVD        R8, K1
	VXORPS       X0, X0, X0
	CMPQ         CX, $2
	JB           q50z_tail

q50z_loop:
	NIBBLES2(6, 28)
	MOVL         2(AX), R8
	MOVL         24(AX), R9
	SHLQ         $32, R9
	ORQ          R9, R8
	KMOVQ        R8, K2
	VPADDB       Z26, Z2, K2, Z2
	VMOVDQU64    (SI), Z3
	VPXORD       Z5, Z5, Z5
	VPDPBUSD     Z3, Z2, Z5
	VPXORD       Z6, Z6, Z6
	VPDPBUSD     Z3, Z26, Z6
	VPSUBD       Z6, Z5, Z5
	VCVTDQ2PS    Z5, Z5
	SCALE2_D(22)
	VFMADD231PS  Z4, Z5, Z0
	ADDQ         $44, AX
	ADDQ         $64, SI
	ADDQ         $8, DX
	SUBQ         $2, CX
	CMPQ         CX, $2
	JAE          q50z_loop

q50z_tail:
	ZTOY0
	TESTQ        CX, CX
	JZ           q50z_done
	NIBBLES1(6)
	MOVL         2(AX), R8
	KMOVD        R8, K2
	VPADDB       Y26, Y2, K2, Y2
	VMOVDQU      (SI), Y3
	VPXORD       Y5, Y5, Y5
	VPDPBUSD     Y3, Y2, Y5
	VPXORD       Y6, Y6, Y6
	VPDPBUSD     Y3, Y26, Y6
	VPSUBD       Y6, Y5, Y5
	VCVTDQ2PS    Y5, Y5
	SCALE1_D
	VFMADD231PS  Y4, Y5, Y0

q50z_done:
	HSUMY0
	VZEROUPPER
	MOVSS        X0, ret+72(FP)
	RET

// func dotQ5_1AVX512(w []byte, q []int8, d []float32, s []float32) float32
TEXT ·dotQ5_1AVX512(SB), NOSPLIT, $0-100
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	MOVQ         s_base+72(FP), BX
	VPBROADCASTD qc0F<>(SB), Z24
	VPMOVZXBD    qidx02<>(SB), Z25
	VPBROADCASTD qc10<>(SB), Z26
	MOVL         $0xff00ff00, R8
	KMOVD        R8, K1
	VXORPS       X0, X0, X0
	VXORPS       X1, X1, X1
	CMPQ         CX, $2
	JB           q51z_tail

q51z_loop:
	NIBBLES2(8, 32)
	MOVL         4(AX), R8
	MOVL         28(AX), R9
	SHLQ         $32, R9
	ORQ          R9, R8
	KMOVQ        R8, K2
	VPADDB       Z26, Z2, K2, Z2
	VPXORD       Z5, Z5, Z5
	VPDPBUSD     (SI), Z2, Z5
	VCVTDQ2PS    Z5, Z5
	SCALE2_DM(24)
	VFMADD231PS  Z4, Z5, Z0
	ADDQ         $48, AX
	ADDQ         $64, SI
	ADDQ         $8, DX
	ADDQ         $8, BX
	SUBQ         $2, CX
	CMPQ         CX, $2
	JAE          q51z_loop

q51z_tail:
	ZTOY0
	TESTQ        CX, CX
	JZ           q51z_done
	NIBBLES1(8)
	MOVL         4(AX), R8
	KMOVD        R8, K2
	VPADDB       Y26, Y2, K2, Y2
	VPXORD       Y5, Y5, Y5
	VPDPBUSD     (SI), Y2, Y5
	VCVTDQ2PS    Y5, Y5
	SCALE1_DM
	VFMADD231PS  Y4, Y5, Y0

q51z_done:
	HSUMY0
	ADDM
	VZEROUPPER
	MOVSS        X0, ret+96(FP)
	RET

// ---------------------------------------------------------------------------------------
// AVX-512 K-quant kernels: per super-block of 256, four VPDPBUSDs of 64 elements (Q4_K,
// Q5_K: a 32-byte qs chunk, two sub-blocks; Q6_K: two halves × two pieces of four groups),
// each product multiplied lane-wise by its sub-block's or group's scale (VPERMD from the
// unpacked scales) into an int32 accumulator Z10, then converted and scaled by d·dx into Z0. The mins
// (Q4_K, Q5_K) go through the group sums into Y1. Registers: AX w, SI q, DX d, BX bsums,
// CX super-blocks left.

// SCALEMIN_K unpacks the 6-bit scales and mins at 4(AX) into R11 (sc[0..7] bytes) and
// R12 (m[0..7] bytes).
#define SCALEMIN_K \
	MOVL 4(AX), R8;            \
	MOVL 8(AX), R9;            \
	MOVL 12(AX), R10;          \
	MOVL R8, R11;              \
	ANDL $0x3f3f3f3f, R11;     \
	MOVL R10, R12;             \
	ANDL $0x0f0f0f0f, R12;     \
	MOVL R8, R13;              \
	SHRL $2, R13;              \
	ANDL $0x30303030, R13;     \
	ORL  R13, R12;             \
	SHLQ $32, R12;             \
	ORQ  R12, R11;             \
	MOVL R9, R12;              \
	ANDL $0x3f3f3f3f, R12;     \
	SHRL $4, R10;              \
	ANDL $0x0f0f0f0f, R10;     \
	SHRL $2, R9;               \
	ANDL $0x30303030, R9;      \
	ORL  R9, R10;              \
	SHLQ $32, R10;             \
	ORQ  R10, R12

// K45_DOT: Z2 holds the chunk's two sub-blocks' weights; Z10 += their products with the
// activations at xoff(SI) times the scales picked by idx from Z6.
#define K45_DOT(xoff, idx) \
	VPXORD   Z3, Z3, Z3;      \
	VPDPBUSD xoff(SI), Z2, Z3; \
	VPERMD   Z6, idx, Z9;     \
	VPMULLD  Z9, Z3, Z3;      \
	VPADDD   Z3, Z10, Z10

#define K45_NIBBLES(qoff) \
	VMOVDQU      qoff(AX), Y2;    \
	VPSRLW       $4, Y2, Y3;      \
	VINSERTI64X4 $1, Y3, Z2, Z2;  \
	VPANDD       Z24, Z2, Z2

// K45_HIGH: the fifth bits of the chunk's sub-blocks (Z12 selects them in qh, Z11).
#define K45_HIGH \
	VPTESTMB Z12, Z11, K2;      \
	VPADDB   Z27, Z2, K2, Z2;   \
	VPSLLW   $2, Z12, Z12

// K45_SETUP: the scales (Y6), the mins times the pair sums of bsums (Y8, float).
#define K45_SETUP \
	SCALEMIN_K;                 \
	VMOVQ     R11, X6;          \
	VPMOVZXBD X6, Y6;           \
	VMOVQ     R12, X7;          \
	VPMOVZXBD X7, Y7;           \
	VPMADDWD  (BX), Y25, Y8;    \
	VPMULLD   Y7, Y8, Y8;       \
	VCVTDQ2PS Y8, Y8;           \
	VPXORD    Z10, Z10, Z10

// K45_FINISH: Z0 += d·dx·Z10, Y1 -= dmin·dx·Y8; next super-block.
#define K45_FINISH(size) \
	VCVTDQ2PS    Z10, Z10;      \
	MOVL         (AX), R8;      \
	VMOVD        R8, X4;        \
	VCVTPH2PS    X4, X4;        \
	VBROADCASTSS (DX), X5;      \
	VMULPS       X5, X4, X4;    \
	VBROADCASTSS X4, Z5;        \
	VFMADD231PS  Z5, Z10, Z0;   \
	VMOVSHDUP    X4, X5;        \
	VBROADCASTSS X5, Y5;        \
	VFNMADD231PS Y5, Y8, Y1;    \
	ADDQ         $size, AX;     \
	ADDQ         $256, SI;      \
	ADDQ         $4, DX;        \
	ADDQ         $32, BX

#define K_PROLOGUE \
	VPBROADCASTD qc0F<>(SB), Z24;       \
	VXORPS       X0, X0, X0;            \
	VXORPS       X1, X1, X1

#define K45_IDX \
	VPBROADCASTD qc1w<>(SB), Y25;       \
	VPMOVZXBD    qidxK<>+0(SB), Z20;    \
	VPMOVZXBD    qidxK<>+16(SB), Z21;   \
	VPMOVZXBD    qidxK<>+32(SB), Z22;   \
	VPMOVZXBD    qidxK<>+48(SB), Z23

// func dotQ4_KAVX512(w []byte, q []int8, d []float32, bsums []int16) float32
TEXT ·dotQ4_KAVX512(SB), NOSPLIT, $0-100
	MOVQ w_base+0(FP), AX
	MOVQ q_base+24(FP), SI
	MOVQ d_base+48(FP), DX
	MOVQ d_len+56(FP), CX
	MOVQ bsums_base+72(FP), BX
	K_PROLOGUE
	K45_IDX
	TESTQ CX, CX
	JZ    q4kz_done

q4kz_loop:
	K45_SETUP
	K45_NIBBLES(16)
	K45_DOT(0, Z20)
	K45_NIBBLES(48)
	K45_DOT(64, Z21)
	K45_NIBBLES(80)
	K45_DOT(128, Z22)
	K45_NIBBLES(112)
	K45_DOT(192, Z23)
	K45_FINISH(144)
	DECQ  CX
	JNZ   q4kz_loop

q4kz_done:
	ZTOY0
	VADDPS Y1, Y0, Y0
	HSUMY0
	VZEROUPPER
	MOVSS  X0, ret+96(FP)
	RET

// func dotQ5_KAVX512(w []byte, q []int8, d []float32, bsums []int16) float32
TEXT ·dotQ5_KAVX512(SB), NOSPLIT, $0-100
	MOVQ w_base+0(FP), AX
	MOVQ q_base+24(FP), SI
	MOVQ d_base+48(FP), DX
	MOVQ d_len+56(FP), CX
	MOVQ bsums_base+72(FP), BX
	K_PROLOGUE
	K45_IDX
	VPBROADCASTD qc10<>(SB), Z27
	VPBROADCASTD qc01<>(SB), Y26
	VPADDB       Y26, Y26, Y13
	VINSERTI64X4 $1, Y13, Z26, Z26
	TESTQ        CX, CX
	JZ           q5kz_done

q5kz_loop:
	K45_SETUP
	VBROADCASTI64X4 16(AX), Z11
	VMOVDQA64       Z26, Z12
	K45_NIBBLES(48)
	K45_HIGH
	K45_DOT(0, Z20)
	K45_NIBBLES(80)
	K45_HIGH
	K45_DOT(64, Z21)
	K45_NIBBLES(112)
	K45_HIGH
	K45_DOT(128, Z22)
	K45_NIBBLES(144)
	K45_HIGH
	K45_DOT(192, Z23)
	K45_FINISH(176)
	DECQ            CX
	JNZ             q5kz_loop

q5kz_done:
	ZTOY0
	VADDPS Y1, Y0, Y0
	HSUMY0
	VZEROUPPER
	MOVSS  X0, ret+96(FP)
	RET

// Q6K_HALF: one half (128 elements) of a Q6_K super-block: Z2 = elements 0-63 (low
// nibbles of ql[0..63] with qh bits 0-1 and 2-3), Z4 = 64-127 (high nibbles with qh bits
// 4-5 and 6-7); VPTERNLOGD $0xf8 is dst | (src2 & src3).
#define Q6K_HALF(qloff, qhoff, xoff0, xoff1, idxa, idxb) \
	VMOVDQU64    qloff(AX), Z2;          \
	VMOVDQU      qhoff(AX), Y3;          \
	VPSRLW       $2, Y3, Y4;             \
	VINSERTI64X4 $1, Y4, Z3, Z3;         \
	VPSRLW       $4, Z2, Z4;             \
	VPANDD       Z24, Z4, Z4;            \
	VPANDD       Z24, Z2, Z2;            \
	VPSLLW       $4, Z3, Z5;             \
	VPTERNLOGD   $0xf8, Z27, Z5, Z2;     \
	VPTERNLOGD   $0xf8, Z27, Z3, Z4;     \
	VPXORD       Z8, Z8, Z8;             \
	VPDPBUSD     xoff0(SI), Z2, Z8;      \
	VPXORD       Z9, Z9, Z9;             \
	VPDPBUSD     xoff1(SI), Z4, Z9;      \
	VPERMD       Z6, idxa, Z5;           \
	VPMULLD      Z5, Z8, Z8;             \
	VPADDD       Z8, Z10, Z10;           \
	VPERMD       Z6, idxb, Z5;           \
	VPMULLD      Z5, Z9, Z9;             \
	VPADDD       Z9, Z10, Z10

// func dotQ6_KAVX512(w []byte, q []int8, d []float32, bsums []int16) float32
// Σ_g sc[g]·(Σ q·x − 32·bsums[g]): the offset from the group sums (VPMADDWD).
TEXT ·dotQ6_KAVX512(SB), NOSPLIT, $0-100
	MOVQ w_base+0(FP), AX
	MOVQ q_base+24(FP), SI
	MOVQ d_base+48(FP), DX
	MOVQ d_len+56(FP), CX
	MOVQ bsums_base+72(FP), BX
	K_PROLOGUE
	VPBROADCASTD qc30<>(SB), Z27
	VPMOVZXBD    qidx6<>+0(SB), Z20
	VPMOVZXBD    qidx6<>+16(SB), Z21
	VPMOVZXBD    qidx6<>+32(SB), Z22
	VPMOVZXBD    qidx6<>+48(SB), Z23
	TESTQ        CX, CX
	JZ           q6kz_done

q6kz_loop:
	VPMOVSXBD    192(AX), Z6
	VPMOVSXBW    192(AX), Y7
	VPMADDWD     (BX), Y7, Y7
	VPSLLD       $5, Y7, Y7
	VPXORD       Z10, Z10, Z10
	VPSUBD       Z7, Z10, Z10
	Q6K_HALF(0, 128, 0, 64, Z20, Z21)
	Q6K_HALF(64, 160, 128, 192, Z22, Z23)
	VCVTDQ2PS    Z10, Z10
	MOVWLZX      208(AX), R8
	VMOVD        R8, X4
	VCVTPH2PS    X4, X4
	VMULSS       (DX), X4, X4
	VBROADCASTSS X4, Z4
	VFMADD231PS  Z4, Z10, Z0
	ADDQ         $210, AX
	ADDQ         $256, SI
	ADDQ         $4, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          q6kz_loop

q6kz_done:
	ZTOY0
	HSUMY0
	VZEROUPPER
	MOVSS X0, ret+96(FP)
	RET

// ---------------------------------------------------------------------------------------
// AVX2 (+FMA, F16C) kernels: VPMADDUBSW of the unsigned weights with the signed activations
// (16-bit pair sums, which cannot saturate for weights below 64, or |w| ≤ 128 in Q8_0
// where x takes w's sign, x being within ±127), then VPMADDWD with ones, or with the sub-block scales in the
// K-quants, into int32 lanes. One 32-element block per iteration; float accumulator Y0.
// Registers: AX w, SI q, DX d, BX s or bsums, CX blocks left; Y15 0x0f bytes, Y14 ones
// words.

DATA q2ctrl<>+0(SB)/8, $0x0000000000000000
DATA q2ctrl<>+8(SB)/8, $0x0101010101010101
DATA q2ctrl<>+16(SB)/8, $0x0202020202020202
DATA q2ctrl<>+24(SB)/8, $0x0303030303030303
GLOBL q2ctrl<>(SB), RODATA|NOPTR, $32

DATA q2nbit<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL q2nbit<>(SB), RODATA|NOPTR, $8

DATA q6ctrl<>+0(SB)/8, $0x0100010001000100
DATA q6ctrl<>+8(SB)/8, $0x0100010001000100
DATA q6ctrl<>+16(SB)/8, $0x0302030203020302
DATA q6ctrl<>+24(SB)/8, $0x0302030203020302
GLOBL q6ctrl<>(SB), RODATA|NOPTR, $32

// NIB_AVX2 expands the 16 qs bytes at off(AX) into Y2 = [lo hi].
#define NIB_AVX2(off) \
	VBROADCASTI128 off(AX), Y2;      \
	VPSRLW         $4, Y2, Y3;       \
	VPBLENDD       $0xf0, Y3, Y2, Y2; \
	VPAND          Y15, Y2, Y2

// QH_AVX2 ORs 16 into the bytes of Y2 whose bit in the uint32 at off(AX) is set (Y12
// q2ctrl, Y11 q2nbit, Y10 all ones, Y13 0x10 bytes).
#define QH_AVX2(off) \
	VPBROADCASTD off(AX), Y5;  \
	VPSHUFB      Y12, Y5, Y5;  \
	VPOR         Y11, Y5, Y5;  \
	VPCMPEQB     Y10, Y5, Y5;  \
	VPAND        Y13, Y5, Y5;  \
	VPOR         Y5, Y2, Y2

#define PROLOGUE32_AVX2 \
	VPBROADCASTD qc0F<>(SB), Y15; \
	VPBROADCASTD qc1w<>(SB), Y14; \
	VXORPS       X0, X0, X0;      \
	VXORPS       X1, X1, X1

#define QH_CONSTS_AVX2 \
	VPBROADCASTD qc10<>(SB), Y13;  \
	VMOVDQU      q2ctrl<>(SB), Y12; \
	VPBROADCASTQ q2nbit<>(SB), Y11; \
	VPCMPEQB     Y10, Y10, Y10

// func dotQ8_0AVX2(w []byte, q []int8, d []float32) float32
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-76
	MOVQ        w_base+0(FP), AX
	MOVQ        q_base+24(FP), SI
	MOVQ        d_base+48(FP), DX
	MOVQ        d_len+56(FP), CX
	PROLOGUE32_AVX2
	TESTQ       CX, CX
	JZ          q80y_done

q80y_loop:
	VMOVDQU     2(AX), Y2
	VMOVDQU     (SI), Y3
	VPSIGNB     Y2, Y3, Y3
	VPABSB      Y2, Y2
	VPMADDUBSW  Y3, Y2, Y2
	VPMADDWD    Y14, Y2, Y2
	VCVTDQ2PS   Y2, Y2
	SCALE1_D
	VFMADD231PS Y4, Y2, Y0
	ADDQ        $34, AX
	ADDQ        $32, SI
	ADDQ        $4, DX
	DECQ        CX
	JNZ         q80y_loop

q80y_done:
	HSUMY0
	VZEROUPPER
	MOVSS       X0, ret+72(FP)
	RET

// func dotQ4_0AVX2(w []byte, q []int8, d []float32) float32
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-76
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	PROLOGUE32_AVX2
	VPBROADCASTD qc08<>(SB), Y13
	TESTQ        CX, CX
	JZ           q40y_done

q40y_loop:
	NIB_AVX2(2)
	VMOVDQU      (SI), Y3
	VPMADDUBSW   Y3, Y2, Y2
	VPMADDUBSW   Y3, Y13, Y5
	VPSUBW       Y5, Y2, Y2
	VPMADDWD     Y14, Y2, Y2
	VCVTDQ2PS    Y2, Y2
	SCALE1_D
	VFMADD231PS  Y4, Y2, Y0
	ADDQ         $18, AX
	ADDQ         $32, SI
	ADDQ         $4, DX
	DECQ         CX
	JNZ          q40y_loop

q40y_done:
	HSUMY0
	VZEROUPPER
	MOVSS        X0, ret+72(FP)
	RET

// func dotQ4_1AVX2(w []byte, q []int8, d []float32, s []float32) float32
TEXT ·dotQ4_1AVX2(SB), NOSPLIT, $0-100
	MOVQ        w_base+0(FP), AX
	MOVQ        q_base+24(FP), SI
	MOVQ        d_base+48(FP), DX
	MOVQ        d_len+56(FP), CX
	MOVQ        s_base+72(FP), BX
	PROLOGUE32_AVX2
	TESTQ       CX, CX
	JZ          q41y_done

q41y_loop:
	NIB_AVX2(4)
	VPMADDUBSW  (SI), Y2, Y2
	VPMADDWD    Y14, Y2, Y2
	VCVTDQ2PS   Y2, Y2
	SCALE1_DM
	VFMADD231PS Y4, Y2, Y0
	ADDQ        $20, AX
	ADDQ        $32, SI
	ADDQ        $4, DX
	ADDQ        $4, BX
	DECQ        CX
	JNZ         q41y_loop

q41y_done:
	HSUMY0
	ADDM
	VZEROUPPER
	MOVSS       X0, ret+96(FP)
	RET

// func dotQ5_0AVX2(w []byte, q []int8, d []float32) float32
TEXT ·dotQ5_0AVX2(SB), NOSPLIT, $0-76
	MOVQ        w_base+0(FP), AX
	MOVQ        q_base+24(FP), SI
	MOVQ        d_base+48(FP), DX
	MOVQ        d_len+56(FP), CX
	PROLOGUE32_AVX2
	QH_CONSTS_AVX2
	TESTQ       CX, CX
	JZ          q50y_done

q50y_loop:
	NIB_AVX2(6)
	QH_AVX2(2)
	VMOVDQU     (SI), Y3
	VPMADDUBSW  Y3, Y2, Y2
	VPMADDUBSW  Y3, Y13, Y5
	VPSUBW      Y5, Y2, Y2
	VPMADDWD    Y14, Y2, Y2
	VCVTDQ2PS   Y2, Y2
	SCALE1_D
	VFMADD231PS Y4, Y2, Y0
	ADDQ        $22, AX
	ADDQ        $32, SI
	ADDQ        $4, DX
	DECQ        CX
	JNZ         q50y_loop

q50y_done:
	HSUMY0
	VZEROUPPER
	MOVSS       X0, ret+72(FP)
	RET

// func dotQ5_1AVX2(w []byte, q []int8, d []float32, s []float32) float32
TEXT ·dotQ5_1AVX2(SB), NOSPLIT, $0-100
	MOVQ        w_base+0(FP), AX
	MOVQ        q_base+24(FP), SI
	MOVQ        d_base+48(FP), DX
	MOVQ        d_len+56(FP), CX
	MOVQ        s_base+72(FP), BX
	PROLOGUE32_AVX2
	QH_CONSTS_AVX2
	TESTQ       CX, CX
	JZ          q51y_done

q51y_loop:
	NIB_AVX2(8)
	QH_AVX2(4)
	VPMADDUBSW  (SI), Y2, Y2
	VPMADDWD    Y14, Y2, Y2
	VCVTDQ2PS   Y2, Y2
	SCALE1_DM
	VFMADD231PS Y4, Y2, Y0
	ADDQ        $24, AX
	ADDQ        $32, SI
	ADDQ        $4, DX
	ADDQ        $4, BX
	DECQ        CX
	JNZ         q51y_loop

q51y_done:
	HSUMY0
	ADDM
	VZEROUPPER
	MOVSS       X0, ret+96(FP)
	RET

// AVX2 K-quants: the sub-block scales are stored as words in the local frame and
// broadcast into the VPMADDWD that widens each 32-element product (Y10 the int32 sums).

// K4_NIB2: Y2, Y3 = the low and high nibbles of the 32 qs bytes at qoff(AX).
#define K4_NIB2(qoff) \
	VMOVDQU qoff(AX), Y2; \
	VPSRLW  $4, Y2, Y3;   \
	VPAND   Y15, Y2, Y2;  \
	VPAND   Y15, Y3, Y3

// K4_DOT2: Y10 += Y2·x[xlo] scaled by the word at slo(SP), Y3·x[xhi] by shi(SP).
#define K4_DOT2(xlo, xhi, slo, shi) \
	VPMADDUBSW   xlo(SI), Y2, Y2; \
	VPMADDUBSW   xhi(SI), Y3, Y3; \
	VPBROADCASTW slo(SP), Y4;     \
	VPMADDWD     Y4, Y2, Y2;      \
	VPBROADCASTW shi(SP), Y5;     \
	VPMADDWD     Y5, Y3, Y3;      \
	VPADDD       Y2, Y10, Y10;    \
	VPADDD       Y3, Y10, Y10

// K5_OR: Y2 |= Y6 & 0x10, Y3 |= Y7 & 0x10 (the fifth bits, Y13 0x10 bytes).
#define K5_OR \
	VPAND Y13, Y6, Y6; \
	VPOR  Y6, Y2, Y2;  \
	VPAND Y13, Y7, Y7; \
	VPOR  Y7, Y3, Y3

// K45_SETUP_AVX2: the scales as words at 0(SP), the mins times the pair sums of bsums
// (Y8, float), Y10 zero.
#define K45_SETUP_AVX2 \
	SCALEMIN_K;                 \
	VMOVQ     R11, X6;          \
	VPMOVZXBW X6, X6;           \
	VMOVDQU   X6, (SP);         \
	VMOVQ     R12, X7;          \
	VPMOVZXBD X7, Y7;           \
	VPMADDWD  (BX), Y14, Y8;    \
	VPMULLD   Y7, Y8, Y8;       \
	VCVTDQ2PS Y8, Y8;           \
	VPXOR     Y10, Y10, Y10

#define K45_FINISH_AVX2(size) \
	VCVTDQ2PS    Y10, Y10;      \
	MOVL         (AX), R8;      \
	VMOVD        R8, X4;        \
	VCVTPH2PS    X4, X4;        \
	VBROADCASTSS (DX), X5;      \
	VMULPS       X5, X4, X4;    \
	VBROADCASTSS X4, Y5;        \
	VFMADD231PS  Y5, Y10, Y0;   \
	VMOVSHDUP    X4, X5;        \
	VBROADCASTSS X5, Y5;        \
	VFNMADD231PS Y5, Y8, Y1;    \
	ADDQ         $size, AX;     \
	ADDQ         $256, SI;      \
	ADDQ         $4, DX;        \
	ADDQ         $32, BX

// func dotQ4_KAVX2(w []byte, q []int8, d []float32, bsums []int16) float32
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $16-100
	MOVQ w_base+0(FP), AX
	MOVQ q_base+24(FP), SI
	MOVQ d_base+48(FP), DX
	MOVQ d_len+56(FP), CX
	MOVQ bsums_base+72(FP), BX
	PROLOGUE32_AVX2
	TESTQ CX, CX
	JZ    q4ky_done

q4ky_loop:
	K45_SETUP_AVX2
	K4_NIB2(16)
	K4_DOT2(0, 32, 0, 2)
	K4_NIB2(48)
	K4_DOT2(64, 96, 4, 6)
	K4_NIB2(80)
	K4_DOT2(128, 160, 8, 10)
	K4_NIB2(112)
	K4_DOT2(192, 224, 12, 14)
	K45_FINISH_AVX2(144)
	DECQ  CX
	JNZ   q4ky_loop

q4ky_done:
	VADDPS Y1, Y0, Y0
	HSUMY0
	VZEROUPPER
	MOVSS  X0, ret+96(FP)
	RET

// func dotQ5_KAVX2(w []byte, q []int8, d []float32, bsums []int16) float32
// Bit j of qh[l] (element l of sub-block j) moved to bit 4 with word shifts: bits within
// a byte stay in it for shifts below 8, and the 0x10 mask drops the rest.
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $16-100
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	MOVQ         bsums_base+72(FP), BX
	PROLOGUE32_AVX2
	VPBROADCASTD qc10<>(SB), Y13
	TESTQ        CX, CX
	JZ           q5ky_done

q5ky_loop:
	K45_SETUP_AVX2
	VMOVDQU 16(AX), Y11
	K4_NIB2(48)
	VPSLLW  $4, Y11, Y6
	VPSLLW  $3, Y11, Y7
	K5_OR
	K4_DOT2(0, 32, 0, 2)
	K4_NIB2(80)
	VPSLLW  $2, Y11, Y6
	VPSLLW  $1, Y11, Y7
	K5_OR
	K4_DOT2(64, 96, 4, 6)
	K4_NIB2(112)
	VMOVDQU Y11, Y6
	VPSRLW  $1, Y11, Y7
	K5_OR
	K4_DOT2(128, 160, 8, 10)
	K4_NIB2(144)
	VPSRLW  $2, Y11, Y6
	VPSRLW  $3, Y11, Y7
	K5_OR
	K4_DOT2(192, 224, 12, 14)
	K45_FINISH_AVX2(176)
	DECQ    CX
	JNZ     q5ky_loop

q5ky_done:
	VADDPS Y1, Y0, Y0
	HSUMY0
	VZEROUPPER
	MOVSS  X0, ret+96(FP)
	RET

// Q6_AVX2_DOT: Y10 += the products of Y5 with x at xoff(SI), the first 16 elements' pair
// sums scaled by the word at soff(SP), the next 16 by the word after it (Y12 q6ctrl).
#define Q6_AVX2_DOT(xoff, soff) \
	VPMADDUBSW   xoff(SI), Y5, Y5; \
	VPBROADCASTD soff(SP), Y6;     \
	VPSHUFB      Y12, Y6, Y6;      \
	VPMADDWD     Y6, Y5, Y5;       \
	VPADDD       Y5, Y10, Y10

// Q6_AVX2_HALF: the four 32-element pieces of one half (see dotQ6_KGo).
#define Q6_AVX2_HALF(ql0, ql1, qh, x0, x1, x2, x3, s0, s1, s2, s3) \
	VMOVDQU ql0(AX), Y2;    \
	VMOVDQU ql1(AX), Y3;    \
	VMOVDQU qh(AX), Y4;     \
	VPAND   Y15, Y2, Y5;    \
	VPSLLW  $4, Y4, Y6;     \
	VPAND   Y13, Y6, Y6;    \
	VPOR    Y6, Y5, Y5;     \
	Q6_AVX2_DOT(x0, s0);    \
	VPAND   Y15, Y3, Y5;    \
	VPSLLW  $2, Y4, Y6;     \
	VPAND   Y13, Y6, Y6;    \
	VPOR    Y6, Y5, Y5;     \
	Q6_AVX2_DOT(x1, s1);    \
	VPSRLW  $4, Y2, Y5;     \
	VPAND   Y15, Y5, Y5;    \
	VPAND   Y13, Y4, Y6;    \
	VPOR    Y6, Y5, Y5;     \
	Q6_AVX2_DOT(x2, s2);    \
	VPSRLW  $4, Y3, Y5;     \
	VPAND   Y15, Y5, Y5;    \
	VPSRLW  $2, Y4, Y6;     \
	VPAND   Y13, Y6, Y6;    \
	VPOR    Y6, Y5, Y5;     \
	Q6_AVX2_DOT(x3, s3)

// func dotQ6_KAVX2(w []byte, q []int8, d []float32, bsums []int16) float32
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $32-100
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	MOVQ         bsums_base+72(FP), BX
	PROLOGUE32_AVX2
	VPBROADCASTD qc30<>(SB), Y13
	VMOVDQU      q6ctrl<>(SB), Y12
	TESTQ        CX, CX
	JZ           q6ky_done

q6ky_loop:
	VPMOVSXBW    192(AX), Y6
	VMOVDQU      Y6, (SP)
	VPMADDWD     (BX), Y6, Y7
	VPSLLD       $5, Y7, Y7
	VPXOR        Y10, Y10, Y10
	VPSUBD       Y7, Y10, Y10
	Q6_AVX2_HALF(0, 32, 128, 0, 32, 64, 96, 0, 4, 8, 12)
	Q6_AVX2_HALF(64, 96, 160, 128, 160, 192, 224, 16, 20, 24, 28)
	VCVTDQ2PS    Y10, Y10
	MOVWLZX      208(AX), R8
	VMOVD        R8, X4
	VCVTPH2PS    X4, X4
	VMULSS       (DX), X4, X4
	VBROADCASTSS X4, Y4
	VFMADD231PS  Y4, Y10, Y0
	ADDQ         $210, AX
	ADDQ         $256, SI
	ADDQ         $4, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          q6ky_loop

q6ky_done:
	HSUMY0
	VZEROUPPER
	MOVSS X0, ret+96(FP)
	RET

// ---------------------------------------------------------------------------------------
// AVX-512 VNNI multi-row kernels of the 32-element types:
// func dot4XxxAVX512(w []byte, q []int8, d, s []float32, out *[4]float32)
// One weight row against 4 activation rows stored one after the other (nb = len(d)/4
// blocks each): every two weight blocks are unpacked once into Z2 as unsigned bytes u
// (the value plus an offset o for the signed types) and reduced with VPDPBUSD against each
// row's 64 activation bytes. Per row r, Z10+r accumulates d·dx·Σu·x per lane and an offset
// accumulator (X0, X1, X4, X14) c·Σx = c·s per block in lanes 0-1 (c = m for Q4_1 and Q5_1,
// d otherwise), added at the end times X15 (1, or −o: −128 for Q8_0, −8 for Q4_0, −16 for
// Q5_0). Registers: AX w, SI q, DX d, BX s, DI out, CX blocks left, R10 and R11 one and
// three rows of q, R12 and R13 one and three rows of d and s; X8 the two blocks' d, X9
// their c; Z24 0x0f bytes, Z25 qidx01, K1 the words of the high nibbles.

DATA qf1<>+0(SB)/4, $0x3f800000
GLOBL qf1<>(SB), RODATA|NOPTR, $4
DATA qfm128<>+0(SB)/4, $0xc3000000
GLOBL qfm128<>(SB), RODATA|NOPTR, $4
DATA qfm16<>+0(SB)/4, $0xc1800000
GLOBL qfm16<>(SB), RODATA|NOPTR, $4
DATA qfm8<>+0(SB)/4, $0xc1000000
GLOBL qfm8<>(SB), RODATA|NOPTR, $4
DATA qc80<>+0(SB)/4, $0x80808080
GLOBL qc80<>(SB), RODATA|NOPTR, $4

// X4ROW2: one activation row's two blocks (q at qm, scales at dm, sums at sm).
#define X4ROW2(qm, dm, sm, acc, oacc) \
	VMOVQ       dm, X5;      \
	VMULPS      X8, X5, X5;  \
	VPERMPS     Z5, Z25, Z5; \
	VPXORD      Z6, Z6, Z6;  \
	VPDPBUSD    qm, Z2, Z6;  \
	VCVTDQ2PS   Z6, Z6;      \
	VFMADD231PS Z5, Z6, acc; \
	VMOVQ       sm, X7;      \
	VFMADD231PS X9, X7, oacc

// X4ROW1: one activation row's last block (Y2 its weights, X8 and X9 lane 0 d and c).
#define X4ROW1(qm, dm, sm, acc, oacc) \
	VMULSS       dm, X8, X5; \
	VBROADCASTSS X5, Y5;     \
	VPXORD       Y6, Y6, Y6; \
	VPDPBUSD     qm, Y2, Y6; \
	VCVTDQ2PS    Y6, Y6;     \
	VFMADD231PS  Y5, Y6, acc; \
	VMOVSS       sm, X7;     \
	VFMADD231PS  X9, X7, oacc

#define X4ROWS2 \
	X4ROW2((SI), (DX), (BX), Z10, X0);                         \
	X4ROW2((SI)(R10*1), (DX)(R12*1), (BX)(R12*1), Z11, X1);    \
	X4ROW2((SI)(R10*2), (DX)(R12*2), (BX)(R12*2), Z12, X4);    \
	X4ROW2((SI)(R11*1), (DX)(R13*1), (BX)(R13*1), Z13, X14)

#define X4ROWS1 \
	X4ROW1((SI), (DX), (BX), Y10, X0);                         \
	X4ROW1((SI)(R10*1), (DX)(R12*1), (BX)(R12*1), Y11, X1);    \
	X4ROW1((SI)(R10*2), (DX)(R12*2), (BX)(R12*2), Y12, X4);    \
	X4ROW1((SI)(R11*1), (DX)(R13*1), (BX)(R13*1), Y13, X14)

// X4START loads the arguments and strides, clears the accumulators and loads X15 = k.
#define X4START(k) \
	MOVQ         w_base+0(FP), AX;   \
	MOVQ         q_base+24(FP), SI;  \
	MOVQ         d_base+48(FP), DX;  \
	MOVQ         d_len+56(FP), CX;   \
	MOVQ         s_base+72(FP), BX;  \
	MOVQ         out+96(FP), DI;     \
	SHRQ         $2, CX;             \
	MOVQ         CX, R10;            \
	SHLQ         $5, R10;            \
	LEAQ         (R10)(R10*2), R11;  \
	LEAQ         (CX*4), R12;        \
	LEAQ         (R12)(R12*2), R13;  \
	VPBROADCASTD qc0F<>(SB), Z24;    \
	VPMOVZXBD    qidx01<>(SB), Z25;  \
	MOVL         $0xff00ff00, R8;    \
	KMOVD        R8, K1;             \
	VPXORD       Z10, Z10, Z10;      \
	VPXORD       Z11, Z11, Z11;      \
	VPXORD       Z12, Z12, Z12;      \
	VPXORD       Z13, Z13, Z13;      \
	VXORPS       X0, X0, X0;         \
	VXORPS       X1, X1, X1;         \
	VXORPS       X4, X4, X4;         \
	VXORPS       X14, X14, X14;      \
	VBROADCASTSS k(SB), X15

// X4NEXT advances the pointers past two blocks of bs bytes.
#define X4NEXT(bs) \
	ADDQ $(2*bs), AX; \
	ADDQ $64, SI;     \
	ADDQ $8, DX;      \
	ADDQ $8, BX;      \
	SUBQ $2, CX

#define X4ZTOY(z, y) \
	VEXTRACTF64X4 $1, z, Y6; \
	VADDPS        Y6, y, y

// X4SUM: out[off] = the sum of acc's lanes + k·(oacc lanes 0-1).
#define X4SUM(y, x, oacc, off) \
	VEXTRACTF128 $1, y, X6;     \
	VADDPS       X6, x, x;      \
	VFMADD231PS  X15, oacc, x;  \
	VMOVHLPS     x, x, X6;      \
	VADDPS       X6, x, x;      \
	VMOVSHDUP    x, X6;         \
	VADDSS       X6, x, x;      \
	VMOVSS       x, off(DI)

#define X4FINISH \
	X4ZTOY(Z10, Y10);            \
	X4ZTOY(Z11, Y11);            \
	X4ZTOY(Z12, Y12);            \
	X4ZTOY(Z13, Y13)

#define X4STORE \
	X4SUM(Y10, X10, X0, 0);      \
	X4SUM(Y11, X11, X1, 4);      \
	X4SUM(Y12, X12, X4, 8);      \
	X4SUM(Y13, X13, X14, 12);    \
	VZEROUPPER;                  \
	RET

// D2: X8 = X9 = [d0 d1] of the blocks at 0(AX) and bs(AX).
#define D2(bs) \
	MOVWLZX   (AX), R8;   \
	MOVWLZX   bs(AX), R9; \
	SHLL      $16, R9;    \
	ORL       R9, R8;     \
	VMOVD     R8, X8;     \
	VCVTPH2PS X8, X8;     \
	VMOVAPS   X8, X9

#define D1 \
	MOVWLZX   (AX), R8; \
	VMOVD     R8, X8;   \
	VCVTPH2PS X8, X8;   \
	VMOVAPS   X8, X9

// DM2: X8 = [d0 d1 ..], X9 = [m0 m1 ..] of the blocks at 0(AX) and bs(AX).
#define DM2(bs) \
	MOVL      (AX), R8;          \
	MOVL      bs(AX), R9;        \
	SHLQ      $32, R9;           \
	ORQ       R9, R8;            \
	VMOVQ     R8, X5;            \
	VCVTPH2PS X5, X5;            \
	VSHUFPS   $0x88, X5, X5, X8; \
	VSHUFPS   $0xdd, X5, X5, X9

#define DM1 \
	MOVL      (AX), R8; \
	VMOVD     R8, X8;   \
	VCVTPH2PS X8, X8;   \
	VMOVSHDUP X8, X9

// func dot4Q8_0AVX512(w []byte, q []int8, d, s []float32, out *[4]float32)
// u = w + 128 (w XOR 0x80).
TEXT ·dot4Q8_0AVX512(SB), NOSPLIT, $0-104
	X4START(qfm128<>)
	VPBROADCASTD qc80<>(SB), Z26
	CMPQ         CX, $2
	JB           q80x4_tail

q80x4_loop:
	VMOVDQU      2(AX), Y2
	VINSERTI64X4 $1, 36(AX), Z2, Z2
	VPXORD       Z26, Z2, Z2
	D2(34)
	X4ROWS2
	X4NEXT(34)
	CMPQ         CX, $2
	JAE          q80x4_loop

q80x4_tail:
	X4FINISH
	TESTQ        CX, CX
	JZ           q80x4_done
	VMOVDQU      2(AX), Y2
	VPXORD       Y26, Y2, Y2
	D1
	X4ROWS1

q80x4_done:
	X4STORE

// func dot4Q4_0AVX512(w []byte, q []int8, d, s []float32, out *[4]float32)
TEXT ·dot4Q4_0AVX512(SB), NOSPLIT, $0-104
	X4START(qfm8<>)
	CMPQ         CX, $2
	JB           q40x4_tail

q40x4_loop:
	NIBBLES2(2, 20)
	D2(18)
	X4ROWS2
	X4NEXT(18)
	CMPQ         CX, $2
	JAE          q40x4_loop

q40x4_tail:
	X4FINISH
	TESTQ        CX, CX
	JZ           q40x4_done
	NIBBLES1(2)
	D1
	X4ROWS1

q40x4_done:
	X4STORE

// func dot4Q4_1AVX512(w []byte, q []int8, d, s []float32, out *[4]float32)
TEXT ·dot4Q4_1AVX512(SB), NOSPLIT, $0-104
	X4START(qf1<>)
	CMPQ         CX, $2
	JB           q41x4_tail

q41x4_loop:
	NIBBLES2(4, 24)
	DM2(20)
	X4ROWS2
	X4NEXT(20)
	CMPQ         CX, $2
	JAE          q41x4_loop

q41x4_tail:
	X4FINISH
	TESTQ        CX, CX
	JZ           q41x4_done
	NIBBLES1(4)
	DM1
	X4ROWS1

q41x4_done:
	X4STORE

// func dot4Q5_0AVX512(w []byte, q []int8, d, s []float32, out *[4]float32)
TEXT ·dot4Q5_0AVX512(SB), NOSPLIT, $0-104
	X4START(qfm16<>)
	VPBROADCASTD qc10<>(SB), Z26
	CMPQ         CX, $2
	JB           q50x4_tail

q50x4_loop:
	NIBBLES2(6, 28)
	MOVL         2(AX), R8
	MOVL         24(AX), R9
	SHLQ         $32, R9
	ORQ          R9, R8
	KMOVQ        R8, K2
	VPADDB       Z26, Z2, K2, Z2
	D2(22)
	X4ROWS2
	X4NEXT(22)
	CMPQ         CX, $2
	JAE          q50x4_loop

q50x4_tail:
	X4FINISH
	TESTQ        CX, CX
	JZ           q50x4_done
	NIBBLES1(6)
	MOVL         2(AX), R8
	KMOVD        R8, K2
	VPADDB       Y26, Y2, K2, Y2
	D1
	X4ROWS1

q50x4_done:
	X4STORE

// func dot4Q5_1AVX512(w []byte, q []int8, d, s []float32, out *[4]float32)
TEXT ·dot4Q5_1AVX512(SB), NOSPLIT, $0-104
	X4START(qf1<>)
	VPBROADCASTD qc10<>(SB), Z26
	CMPQ         CX, $2
	JB           q51x4_tail

q51x4_loop:
	NIBBLES2(8, 32)
	MOVL         4(AX), R8
	MOVL         28(AX), R9
	SHLQ         $32, R9
	ORQ          R9, R8
	KMOVQ        R8, K2
	VPADDB       Z26, Z2, K2, Z2
	DM2(24)
	X4ROWS2
	X4NEXT(24)
	CMPQ         CX, $2
	JAE          q51x4_loop

q51x4_tail:
	X4FINISH
	TESTQ        CX, CX
	JZ           q51x4_done
	NIBBLES1(8)
	MOVL         4(AX), R8
	KMOVD        R8, K2
	VPADDB       Y26, Y2, K2, Y2
	DM1
	X4ROWS1

q51x4_done:
	X4STORE

// ---------------------------------------------------------------------------------------
// AVX2 multi-row kernels of the 32-element types (same signature and layout as the AVX-512
// ones), one block per iteration: the weights' unsigned bytes u in Y2 (for Q8_0 |w| and w
// in Y12, whose signs move to the activations: u·x would overflow VPMADDUBSW's words),
// reduced with VPMADDUBSW and VPMADDWD against each row's 32 activation bytes, times d·dx,
// plus k·c·s in lane 0 (X9 = k·c), then added into the row's accumulator (Y0, Y1, Y7, Y4):
// one addition per block on the accumulator, so that the single-row versions (dot1XxxAVX2,
// decode), which cannot overlap rows, are not held up by a multiply-add and an add in a
// chain (they ran 25-35% slower than the row kernels so; the four-row kernels take about 10%
// longer this way, BenchmarkMultiRowKernels). Registers as the AVX-512 ones; Y14 words of
// 1, Y15 0x0f bytes, Y10-Y13 QH_AVX2's constants.

#define Y4ROW(qm, dm, sm, acc) \
	VPMADDUBSW   qm, Y2, Y6;   \
	VPMADDWD     Y14, Y6, Y6;  \
	VCVTDQ2PS    Y6, Y6;       \
	VMULSS       dm, X8, X5;   \
	VBROADCASTSS X5, Y5;       \
	VMULPS       Y5, Y6, Y6;   \
	VMOVSS       sm, X5;       \
	VMULSS       X9, X5, X5;   \
	VADDPS       Y5, Y6, Y6;   \
	VADDPS       Y6, acc, acc

#define Y4ROWS \
	Y4ROW((SI), (DX), (BX), Y0);                      \
	Y4ROW((SI)(R10*1), (DX)(R12*1), (BX)(R12*1), Y1); \
	Y4ROW((SI)(R10*2), (DX)(R12*2), (BX)(R12*2), Y7); \
	Y4ROW((SI)(R11*1), (DX)(R13*1), (BX)(R13*1), Y4)

// Y4ROW8: Q8_0's row, the weights' signs moved to the activations.
#define Y4ROW8(qm, dm, acc) \
	VMOVDQU      qm, Y6;       \
	VPSIGNB      Y12, Y6, Y6;  \
	VPMADDUBSW   Y6, Y2, Y6;   \
	VPMADDWD     Y14, Y6, Y6;  \
	VCVTDQ2PS    Y6, Y6;       \
	VMULSS       dm, X8, X5;   \
	VBROADCASTSS X5, Y5;       \
	VFMADD231PS  Y5, Y6, acc

#define Y4START \
	MOVQ         w_base+0(FP), AX;  \
	MOVQ         q_base+24(FP), SI; \
	MOVQ         d_base+48(FP), DX; \
	MOVQ         d_len+56(FP), CX;  \
	MOVQ         s_base+72(FP), BX; \
	MOVQ         out+96(FP), DI;    \
	SHRQ         $2, CX;            \
	MOVQ         CX, R10;           \
	SHLQ         $5, R10;           \
	LEAQ         (R10)(R10*2), R11; \
	LEAQ         (CX*4), R12;       \
	LEAQ         (R12)(R12*2), R13; \
	VPBROADCASTD qc0F<>(SB), Y15;   \
	VPBROADCASTD qc1w<>(SB), Y14;   \
	VXORPS       Y0, Y0, Y0;        \
	VXORPS       Y1, Y1, Y1;        \
	VXORPS       Y7, Y7, Y7;        \
	VXORPS       Y4, Y4, Y4

#define Y4NEXT(bs) \
	ADDQ $bs, AX; \
	ADDQ $32, SI; \
	ADDQ $4, DX;  \
	ADDQ $4, BX;  \
	DECQ CX

#define Y4SUM(y, x, off) \
	VEXTRACTF128 $1, y, X6; \
	VADDPS       X6, x, x;  \
	VMOVHLPS     x, x, X6;  \
	VADDPS       X6, x, x;  \
	VMOVSHDUP    x, X6;     \
	VADDSS       X6, x, x;  \
	VMOVSS       x, off(DI)

#define Y4STORE \
	Y4SUM(Y0, X0, 0);  \
	Y4SUM(Y1, X1, 4);  \
	Y4SUM(Y7, X7, 8);  \
	Y4SUM(Y4, X4, 12); \
	VZEROUPPER;        \
	RET

// YD(k): X8 = d of the block at (AX), X9 = k·d.
#define YD(k) \
	MOVWLZX   (AX), R8;      \
	VMOVD     R8, X8;        \
	VCVTPH2PS X8, X8;        \
	VMULSS    k(SB), X8, X9

// YDM: X8 = d, X9 = m of the block at (AX).
#define YDM \
	MOVL      (AX), R8; \
	VMOVD     R8, X8;   \
	VCVTPH2PS X8, X8;   \
	VMOVSHDUP X8, X9

// func dot4Q8_0AVX2(w []byte, q []int8, d, s []float32, out *[4]float32)
TEXT ·dot4Q8_0AVX2(SB), NOSPLIT, $0-104
	Y4START
	TESTQ     CX, CX
	JZ        q80y4_done

q80y4_loop:
	VMOVDQU   2(AX), Y12
	VPABSB    Y12, Y2
	MOVWLZX   (AX), R8
	VMOVD     R8, X8
	VCVTPH2PS X8, X8
	Y4ROW8((SI), (DX), Y0)
	Y4ROW8((SI)(R10*1), (DX)(R12*1), Y1)
	Y4ROW8((SI)(R10*2), (DX)(R12*2), Y7)
	Y4ROW8((SI)(R11*1), (DX)(R13*1), Y4)
	Y4NEXT(34)
	JNZ       q80y4_loop

q80y4_done:
	Y4STORE

// func dot4Q4_0AVX2(w []byte, q []int8, d, s []float32, out *[4]float32)
TEXT ·dot4Q4_0AVX2(SB), NOSPLIT, $0-104
	Y4START
	TESTQ     CX, CX
	JZ        q40y4_done

q40y4_loop:
	NIB_AVX2(2)
	YD(qfm8<>)
	Y4ROWS
	Y4NEXT(18)
	JNZ       q40y4_loop

q40y4_done:
	Y4STORE

// func dot4Q4_1AVX2(w []byte, q []int8, d, s []float32, out *[4]float32)
TEXT ·dot4Q4_1AVX2(SB), NOSPLIT, $0-104
	Y4START
	TESTQ     CX, CX
	JZ        q41y4_done

q41y4_loop:
	NIB_AVX2(4)
	YDM
	Y4ROWS
	Y4NEXT(20)
	JNZ       q41y4_loop

q41y4_done:
	Y4STORE

// func dot4Q5_0AVX2(w []byte, q []int8, d, s []float32, out *[4]float32)
TEXT ·dot4Q5_0AVX2(SB), NOSPLIT, $0-104
	Y4START
	QH_CONSTS_AVX2
	TESTQ     CX, CX
	JZ        q50y4_done

q50y4_loop:
	NIB_AVX2(6)
	QH_AVX2(2)
	YD(qfm16<>)
	Y4ROWS
	Y4NEXT(22)
	JNZ       q50y4_loop

q50y4_done:
	Y4STORE

// func dot4Q5_1AVX2(w []byte, q []int8, d, s []float32, out *[4]float32)
TEXT ·dot4Q5_1AVX2(SB), NOSPLIT, $0-104
	Y4START
	QH_CONSTS_AVX2
	TESTQ     CX, CX
	JZ        q51y4_done

q51y4_loop:
	NIB_AVX2(8)
	QH_AVX2(4)
	YDM
	Y4ROWS
	Y4NEXT(24)
	JNZ       q51y4_loop

q51y4_done:
	Y4STORE

// The single-row versions of the AVX2 multi-row kernels (as dot1XxxAVX512: one row's
// operations of the multi-row kernel, Y4ROW or Y4ROW8 and Y4SUM's sum, returned).
// func dot1XxxAVX2(w []byte, q []int8, d, s []float32) float32

#define Y1START \
	MOVQ         w_base+0(FP), AX;  \
	MOVQ         q_base+24(FP), SI; \
	MOVQ         d_base+48(FP), DX; \
	MOVQ         d_len+56(FP), CX;  \
	MOVQ         s_base+72(FP), BX; \
	VPBROADCASTD qc0F<>(SB), Y15;   \
	VPBROADCASTD qc1w<>(SB), Y14;   \
	VXORPS       Y0, Y0, Y0

#define Y1STORE \
	VEXTRACTF128 $1, Y0, X6; \
	VADDPS       X6, X0, X0; \
	VMOVHLPS     X0, X0, X6; \
	VADDPS       X6, X0, X0; \
	VMOVSHDUP    X0, X6;     \
	VADDSS       X6, X0, X0; \
	VZEROUPPER

// func dot1Q8_0AVX2(w []byte, q []int8, d, s []float32) float32
TEXT ·dot1Q8_0AVX2(SB), NOSPLIT, $0-100
	Y1START
	TESTQ     CX, CX
	JZ        q80y1_done

q80y1_loop:
	VMOVDQU   2(AX), Y12
	VPABSB    Y12, Y2
	MOVWLZX   (AX), R8
	VMOVD     R8, X8
	VCVTPH2PS X8, X8
	Y4ROW8((SI), (DX), Y0)
	Y4NEXT(34)
	JNZ       q80y1_loop

q80y1_done:
	Y1STORE
	MOVSS        X0, ret+96(FP)
	RET

// func dot1Q4_0AVX2(w []byte, q []int8, d, s []float32) float32
TEXT ·dot1Q4_0AVX2(SB), NOSPLIT, $0-100
	Y1START
	TESTQ     CX, CX
	JZ        q40y1_done

q40y1_loop:
	NIB_AVX2(2)
	YD(qfm8<>)
	Y4ROW((SI), (DX), (BX), Y0)
	Y4NEXT(18)
	JNZ       q40y1_loop

q40y1_done:
	Y1STORE
	MOVSS        X0, ret+96(FP)
	RET

// func dot1Q4_1AVX2(w []byte, q []int8, d, s []float32) float32
TEXT ·dot1Q4_1AVX2(SB), NOSPLIT, $0-100
	Y1START
	TESTQ     CX, CX
	JZ        q41y1_done

q41y1_loop:
	NIB_AVX2(4)
	YDM
	Y4ROW((SI), (DX), (BX), Y0)
	Y4NEXT(20)
	JNZ       q41y1_loop

q41y1_done:
	Y1STORE
	MOVSS        X0, ret+96(FP)
	RET

// func dot1Q5_0AVX2(w []byte, q []int8, d, s []float32) float32
TEXT ·dot1Q5_0AVX2(SB), NOSPLIT, $0-100
	Y1START
	QH_CONSTS_AVX2
	TESTQ     CX, CX
	JZ        q50y1_done

q50y1_loop:
	NIB_AVX2(6)
	QH_AVX2(2)
	YD(qfm16<>)
	Y4ROW((SI), (DX), (BX), Y0)
	Y4NEXT(22)
	JNZ       q50y1_loop

q50y1_done:
	Y1STORE
	MOVSS        X0, ret+96(FP)
	RET

// func dot1Q5_1AVX2(w []byte, q []int8, d, s []float32) float32
TEXT ·dot1Q5_1AVX2(SB), NOSPLIT, $0-100
	Y1START
	QH_CONSTS_AVX2
	TESTQ     CX, CX
	JZ        q51y1_done

q51y1_loop:
	NIB_AVX2(8)
	QH_AVX2(4)
	YDM
	Y4ROW((SI), (DX), (BX), Y0)
	Y4NEXT(24)
	JNZ       q51y1_loop

q51y1_done:
	Y1STORE
	MOVSS        X0, ret+96(FP)
	RET

// func quantizeActs32AVX512(q []int8, d, s []float32, x []float32)
// Per block of 32 (len(d) blocks): amax = max|x|, D = amax/127, Q = x·(1/D) rounded to
// nearest even (VCVTPS2DQ under Go's default MXCSR), S = D·ΣQ; a block of zeros gets zeros.
TEXT ·quantizeActs32AVX512(SB), NOSPLIT, $0-96
	MOVQ         q_base+0(FP), DI
	MOVQ         d_base+24(FP), DX
	MOVQ         d_len+32(FP), CX
	MOVQ         s_base+48(FP), BX
	MOVQ         x_base+72(FP), SI
	VPBROADCASTD qabs<>(SB), Z31
	VBROADCASTSS qf127<>(SB), X30
	VBROADCASTSS qf1<>(SB), X29
	VXORPS       X28, X28, X28
	TESTQ        CX, CX
	JZ           qa_done

qa_loop:
	VMOVUPS      (SI), Z0
	VMOVUPS      64(SI), Z1
	VPANDD       Z31, Z0, Z2
	VPANDD       Z31, Z1, Z3
	VMAXPS       Z3, Z2, Z2
	VEXTRACTF64X4 $1, Z2, Y3
	VMAXPS       Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VMAXPS       X3, X2, X2
	VPERMILPS    $0x4e, X2, X3
	VMAXPS       X3, X2, X2
	VPERMILPS    $0xb1, X2, X3
	VMAXPS       X3, X2, X2
	VUCOMISS     X28, X2
	JE           qa_zero
	VDIVSS       X30, X2, X2
	VDIVSS       X2, X29, X4
	VBROADCASTSS X4, Z4
	VMULPS       Z4, Z0, Z0
	VMULPS       Z4, Z1, Z1
	VCVTPS2DQ    Z0, Z0
	VCVTPS2DQ    Z1, Z1
	VPMOVSDB     Z0, (DI)
	VPMOVSDB     Z1, 16(DI)
	VPADDD       Z1, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDD       Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	VCVTDQ2PS    X0, X0
	VMULSS       X2, X0, X0
	VMOVSS       X2, (DX)
	VMOVSS       X0, (BX)
	JMP          qa_next

qa_zero:
	VPXORD       Y0, Y0, Y0
	VMOVDQU      Y0, (DI)
	VMOVSS       X28, (DX)
	VMOVSS       X28, (BX)

qa_next:
	ADDQ         $128, SI
	ADDQ         $32, DI
	ADDQ         $4, DX
	ADDQ         $4, BX
	DECQ         CX
	JNZ          qa_loop

qa_done:
	VZEROUPPER
	RET

DATA qabs<>+0(SB)/4, $0x7fffffff
GLOBL qabs<>(SB), RODATA|NOPTR, $4
DATA qf127<>+0(SB)/4, $0x42fe0000
GLOBL qf127<>(SB), RODATA|NOPTR, $4

// ---------------------------------------------------------------------------------------
// AVX-512 VNNI multi-row kernels of the K-quants:
// func dot4Q4_KAVX512(w []byte, q []int8, d []float32, bsums []int16, out *[4]float32)
// One weight row against 4 activation rows stored one after the other (nb = len(d)/4
// super-blocks each): each chunk of two sub-blocks is unpacked once (Z2) with its scales
// (Z9) and reduced against each row into the row's int32 accumulator (Z16-Z19); per
// super-block those are scaled by d·dx into the row's float accumulator (Z10-Z13), less
// dmin·dx·Σ m·(group sums). Registers: AX w, SI q, DX d, BX bsums, CX super-blocks left,
// DI and R10 one and three rows of d, R14 and R15 one and three rows of q, R8 and R9 one
// and three rows of bsums (set after SCALEMIN_K, which uses R8-R13).

// KX4DOT: the row at qm's product with chunk Z2 times the scales Z9, into iacc.
#define KX4DOT(qm, iacc) \
	VPXORD   Z3, Z3, Z3;   \
	VPDPBUSD qm, Z2, Z3;   \
	VPMULLD  Z9, Z3, Z3;   \
	VPADDD   Z3, iacc, iacc

#define KX4CHUNK(qoff, xoff, idx) \
	K45_NIBBLES(qoff);                  \
	VPERMD  Z6, idx, Z9;                \
	KX4DOT(xoff(SI), Z16);              \
	KX4DOT(xoff(SI)(R14*1), Z17);       \
	KX4DOT(xoff(SI)(R14*2), Z18);       \
	KX4DOT(xoff(SI)(R15*1), Z19)

// KX4FIN: the row's super-block into its float accumulator (X4 = [d, dmin], Y7 the mins).
#define KX4FIN(dm, bm, iacc, facc) \
	VBROADCASTSS dm, X5;         \
	VMULPS       X5, X4, X5;     \
	VBROADCASTSS X5, Z26;        \
	VCVTDQ2PS    iacc, iacc;     \
	VFMADD231PS  Z26, iacc, facc; \
	VPMADDWD     bm, Y25, Y8;    \
	VPMULLD      Y7, Y8, Y8;     \
	VCVTDQ2PS    Y8, Y8;         \
	VMOVSHDUP    X5, X27;        \
	VBROADCASTSS X27, Z27;       \
	VFNMADD231PS Z27, Z8, facc

#define KX4SUM(z, y, x, off) \
	VEXTRACTF64X4 $1, z, Y6;   \
	VADDPS       Y6, y, y;     \
	VEXTRACTF128 $1, y, X6;    \
	VADDPS       X6, x, x;     \
	VMOVHLPS     x, x, X6;     \
	VADDPS       X6, x, x;     \
	VMOVSHDUP    x, X6;        \
	VADDSS       X6, x, x;     \
	VMOVSS       x, off(DI)

TEXT ·dot4Q4_KAVX512(SB), NOSPLIT, $0-104
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	MOVQ         bsums_base+72(FP), BX
	SHRQ         $2, CX
	LEAQ         (CX*4), DI
	MOVQ         CX, R14
	SHLQ         $8, R14
	LEAQ         (R14)(R14*2), R15
	VPBROADCASTD qc0F<>(SB), Z24
	K45_IDX
	VPXORD       Z10, Z10, Z10
	VPXORD       Z11, Z11, Z11
	VPXORD       Z12, Z12, Z12
	VPXORD       Z13, Z13, Z13
	TESTQ        CX, CX
	JZ           q4kx4_done

q4kx4_loop:
	SCALEMIN_K
	VMOVQ        R11, X6
	VPMOVZXBD    X6, Y6
	VMOVQ        R12, X7
	VPMOVZXBD    X7, Y7
	VPXORD       Z16, Z16, Z16
	VPXORD       Z17, Z17, Z17
	VPXORD       Z18, Z18, Z18
	VPXORD       Z19, Z19, Z19
	KX4CHUNK(16, 0, Z20)
	KX4CHUNK(48, 64, Z21)
	KX4CHUNK(80, 128, Z22)
	KX4CHUNK(112, 192, Z23)
	MOVL         (AX), R8
	VMOVD        R8, X4
	VCVTPH2PS    X4, X4
	LEAQ         (DI*8), R8
	LEAQ         (R8)(R8*2), R9
	LEAQ         (DI)(DI*2), R10
	KX4FIN((DX), (BX), Z16, Z10)
	KX4FIN((DX)(DI*1), (BX)(R8*1), Z17, Z11)
	KX4FIN((DX)(DI*2), (BX)(R8*2), Z18, Z12)
	KX4FIN((DX)(R10*1), (BX)(R9*1), Z19, Z13)
	ADDQ         $144, AX
	ADDQ         $256, SI
	ADDQ         $4, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          q4kx4_loop

q4kx4_done:
	MOVQ         out+96(FP), DI
	KX4SUM(Z10, Y10, X10, 0)
	KX4SUM(Z11, Y11, X11, 4)
	KX4SUM(Z12, Y12, X12, 8)
	KX4SUM(Z13, Y13, X13, 12)
	VZEROUPPER
	RET

// func dot4Q6_KAVX512(w []byte, q []int8, d []float32, bsums []int16, out *[4]float32)
// As dot4Q4_KAVX512 for Q6_K: each half's two chunks of 64 unpacked once (Z2, Z4) with their
// scales (Z28, Z29); a row's int32 accumulator starts at −32·Σ sc·(group sums).
#define Q6X4DOT(qm, wreg, sreg, iacc) \
	VPXORD   Z3, Z3, Z3;     \
	VPDPBUSD qm, wreg, Z3;   \
	VPMULLD  sreg, Z3, Z3;   \
	VPADDD   Z3, iacc, iacc

#define Q6X4HALF(qloff, qhoff, xoff0, xoff1, idxa, idxb) \
	VMOVDQU64    qloff(AX), Z2;                  \
	VMOVDQU      qhoff(AX), Y3;                  \
	VPSRLW       $2, Y3, Y4;                     \
	VINSERTI64X4 $1, Y4, Z3, Z3;                 \
	VPSRLW       $4, Z2, Z4;                     \
	VPANDD       Z24, Z4, Z4;                    \
	VPANDD       Z24, Z2, Z2;                    \
	VPSLLW       $4, Z3, Z5;                     \
	VPTERNLOGD   $0xf8, Z27, Z5, Z2;             \
	VPTERNLOGD   $0xf8, Z27, Z3, Z4;             \
	VPERMD       Z6, idxa, Z28;                  \
	VPERMD       Z6, idxb, Z29;                  \
	Q6X4DOT(xoff0(SI), Z2, Z28, Z16);            \
	Q6X4DOT(xoff1(SI), Z4, Z29, Z16);            \
	Q6X4DOT(xoff0(SI)(R14*1), Z2, Z28, Z17);     \
	Q6X4DOT(xoff1(SI)(R14*1), Z4, Z29, Z17);     \
	Q6X4DOT(xoff0(SI)(R14*2), Z2, Z28, Z18);     \
	Q6X4DOT(xoff1(SI)(R14*2), Z4, Z29, Z18);     \
	Q6X4DOT(xoff0(SI)(R15*1), Z2, Z28, Z19);     \
	Q6X4DOT(xoff1(SI)(R15*1), Z4, Z29, Z19)

#define Q6X4INIT(bm, iacc) \
	VPMADDWD bm, Y7, Y8;       \
	VPSLLD   $5, Y8, Y8;       \
	VPXORD   iacc, iacc, iacc; \
	VPSUBD   Z8, iacc, iacc

#define Q6X4FIN(dm, iacc, facc) \
	VMULSS       dm, X4, X5;     \
	VBROADCASTSS X5, Z26;        \
	VCVTDQ2PS    iacc, iacc;     \
	VFMADD231PS  Z26, iacc, facc

TEXT ·dot4Q6_KAVX512(SB), NOSPLIT, $0-104
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	MOVQ         bsums_base+72(FP), BX
	SHRQ         $2, CX
	LEAQ         (CX*4), DI
	MOVQ         CX, R14
	SHLQ         $8, R14
	LEAQ         (R14)(R14*2), R15
	LEAQ         (DI*8), R8
	LEAQ         (R8)(R8*2), R9
	LEAQ         (DI)(DI*2), R10
	VPBROADCASTD qc0F<>(SB), Z24
	VPBROADCASTD qc30<>(SB), Z27
	VPMOVZXBD    qidx6<>+0(SB), Z20
	VPMOVZXBD    qidx6<>+16(SB), Z21
	VPMOVZXBD    qidx6<>+32(SB), Z22
	VPMOVZXBD    qidx6<>+48(SB), Z23
	VPXORD       Z10, Z10, Z10
	VPXORD       Z11, Z11, Z11
	VPXORD       Z12, Z12, Z12
	VPXORD       Z13, Z13, Z13
	TESTQ        CX, CX
	JZ           q6kx4_done

q6kx4_loop:
	VPMOVSXBD    192(AX), Z6
	VPMOVSXBW    192(AX), Y7
	Q6X4INIT((BX), Z16)
	Q6X4INIT((BX)(R8*1), Z17)
	Q6X4INIT((BX)(R8*2), Z18)
	Q6X4INIT((BX)(R9*1), Z19)
	Q6X4HALF(0, 128, 0, 64, Z20, Z21)
	Q6X4HALF(64, 160, 128, 192, Z22, Z23)
	MOVWLZX      208(AX), R11
	VMOVD        R11, X4
	VCVTPH2PS    X4, X4
	Q6X4FIN((DX), Z16, Z10)
	Q6X4FIN((DX)(DI*1), Z17, Z11)
	Q6X4FIN((DX)(DI*2), Z18, Z12)
	Q6X4FIN((DX)(R10*1), Z19, Z13)
	ADDQ         $210, AX
	ADDQ         $256, SI
	ADDQ         $4, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          q6kx4_loop

q6kx4_done:
	MOVQ         out+96(FP), DI
	KX4SUM(Z10, Y10, X10, 0)
	KX4SUM(Z11, Y11, X11, 4)
	KX4SUM(Z12, Y12, X12, 8)
	KX4SUM(Z13, Y13, X13, 12)
	VZEROUPPER
	RET

// The single-row versions of the K-quants' multi-row kernels (as dot1XxxAVX512):
// func dot1Q4_KAVX512(w []byte, q []int8, d []float32, bsums []int16) float32
// func dot1Q6_KAVX512(w []byte, q []int8, d []float32, bsums []int16) float32

// KX1SUM leaves KX4SUM's sum of z in x (the same operations; the caller returns it).
#define KX1SUM(z, y, x) \
	VEXTRACTF64X4 $1, z, Y6;   \
	VADDPS       Y6, y, y;     \
	VEXTRACTF128 $1, y, X6;    \
	VADDPS       X6, x, x;     \
	VMOVHLPS     x, x, X6;     \
	VADDPS       X6, x, x;     \
	VMOVSHDUP    x, X6;        \
	VADDSS       X6, x, x;     \
	VZEROUPPER

TEXT ·dot1Q4_KAVX512(SB), NOSPLIT, $0-100
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	MOVQ         bsums_base+72(FP), BX
	VPBROADCASTD qc0F<>(SB), Z24
	K45_IDX
	VPXORD       Z10, Z10, Z10
	TESTQ        CX, CX
	JZ           q4kx1_done

q4kx1_loop:
	SCALEMIN_K
	VMOVQ        R11, X6
	VPMOVZXBD    X6, Y6
	VMOVQ        R12, X7
	VPMOVZXBD    X7, Y7
	VPXORD       Z16, Z16, Z16
	K45_NIBBLES(16)
	VPERMD       Z6, Z20, Z9
	KX4DOT(0(SI), Z16)
	K45_NIBBLES(48)
	VPERMD       Z6, Z21, Z9
	KX4DOT(64(SI), Z16)
	K45_NIBBLES(80)
	VPERMD       Z6, Z22, Z9
	KX4DOT(128(SI), Z16)
	K45_NIBBLES(112)
	VPERMD       Z6, Z23, Z9
	KX4DOT(192(SI), Z16)
	MOVL         (AX), R8
	VMOVD        R8, X4
	VCVTPH2PS    X4, X4
	KX4FIN((DX), (BX), Z16, Z10)
	ADDQ         $144, AX
	ADDQ         $256, SI
	ADDQ         $4, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          q4kx1_loop

q4kx1_done:
	KX1SUM(Z10, Y10, X10)
	MOVSS        X10, ret+96(FP)
	RET

#define Q6X1HALF(qloff, qhoff, xoff0, xoff1, idxa, idxb) \
	VMOVDQU64    qloff(AX), Z2;                  \
	VMOVDQU      qhoff(AX), Y3;                  \
	VPSRLW       $2, Y3, Y4;                     \
	VINSERTI64X4 $1, Y4, Z3, Z3;                 \
	VPSRLW       $4, Z2, Z4;                     \
	VPANDD       Z24, Z4, Z4;                    \
	VPANDD       Z24, Z2, Z2;                    \
	VPSLLW       $4, Z3, Z5;                     \
	VPTERNLOGD   $0xf8, Z27, Z5, Z2;             \
	VPTERNLOGD   $0xf8, Z27, Z3, Z4;             \
	VPERMD       Z6, idxa, Z28;                  \
	VPERMD       Z6, idxb, Z29;                  \
	Q6X4DOT(xoff0(SI), Z2, Z28, Z16);            \
	Q6X4DOT(xoff1(SI), Z4, Z29, Z16)

TEXT ·dot1Q6_KAVX512(SB), NOSPLIT, $0-100
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	MOVQ         bsums_base+72(FP), BX
	VPBROADCASTD qc0F<>(SB), Z24
	VPBROADCASTD qc30<>(SB), Z27
	VPMOVZXBD    qidx6<>+0(SB), Z20
	VPMOVZXBD    qidx6<>+16(SB), Z21
	VPMOVZXBD    qidx6<>+32(SB), Z22
	VPMOVZXBD    qidx6<>+48(SB), Z23
	VPXORD       Z10, Z10, Z10
	TESTQ        CX, CX
	JZ           q6kx1_done

q6kx1_loop:
	VPMOVSXBD    192(AX), Z6
	VPMOVSXBW    192(AX), Y7
	Q6X4INIT((BX), Z16)
	Q6X1HALF(0, 128, 0, 64, Z20, Z21)
	Q6X1HALF(64, 160, 128, 192, Z22, Z23)
	MOVWLZX      208(AX), R11
	VMOVD        R11, X4
	VCVTPH2PS    X4, X4
	Q6X4FIN((DX), Z16, Z10)
	ADDQ         $210, AX
	ADDQ         $256, SI
	ADDQ         $4, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          q6kx1_loop

q6kx1_done:
	KX1SUM(Z10, Y10, X10)
	MOVSS        X10, ret+96(FP)
	RET

// ---------------------------------------------------------------------------------------
// The single-row versions of the AVX-512 multi-row kernels:
// func dot1XxxAVX512(w []byte, q []int8, d, s []float32) float32
// One weight row against one activation row (nb = len(d) blocks) with the multi-row kernel's
// operations for one of its rows, in the same order (X4ROW2, X4ROW1, X4SUM), so that a row
// of a product is the same bits whether MatMulT reduces it among four or alone (the rows a
// tile of 16 leaves over, decode): quant's row invariance. The row kernels (dotXxxAVX512)
// order their sums otherwise.

// X1START is X4START for one row after the arguments are loaded (AX w, SI q, DX d, CX
// nb, BX s, by each function: vet reads a macro's arguments as its neighbour's): Z10 and
// X0 its accumulators.
#define X1START(k) \
	VPBROADCASTD qc0F<>(SB), Z24;    \
	VPMOVZXBD    qidx01<>(SB), Z25;  \
	MOVL         $0xff00ff00, R8;    \
	KMOVD        R8, K1;             \
	VPXORD       Z10, Z10, Z10;      \
	VXORPS       X0, X0, X0;         \
	VBROADCASTSS k(SB), X15

// X1STORE leaves X4SUM's sum in X10 (the same operations; the caller returns it).
#define X1STORE \
	VEXTRACTF128 $1, Y10, X6;   \
	VADDPS       X6, X10, X10;  \
	VFMADD231PS  X15, X0, X10;  \
	VMOVHLPS     X10, X10, X6;  \
	VADDPS       X6, X10, X10;  \
	VMOVSHDUP    X10, X6;       \
	VADDSS       X6, X10, X10;  \
	VZEROUPPER

// func dot1Q8_0AVX512(w []byte, q []int8, d, s []float32) float32
TEXT ·dot1Q8_0AVX512(SB), NOSPLIT, $0-100
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	MOVQ         s_base+72(FP), BX
	X1START(qfm128<>)
	VPBROADCASTD qc80<>(SB), Z26
	CMPQ         CX, $2
	JB           q80x1_tail

q80x1_loop:
	VMOVDQU      2(AX), Y2
	VINSERTI64X4 $1, 36(AX), Z2, Z2
	VPXORD       Z26, Z2, Z2
	D2(34)
	X4ROW2((SI), (DX), (BX), Z10, X0)
	X4NEXT(34)
	CMPQ         CX, $2
	JAE          q80x1_loop

q80x1_tail:
	X4ZTOY(Z10, Y10)
	TESTQ        CX, CX
	JZ           q80x1_done
	VMOVDQU      2(AX), Y2
	VPXORD       Y26, Y2, Y2
	D1
	X4ROW1((SI), (DX), (BX), Y10, X0)

q80x1_done:
	X1STORE
	MOVSS        X10, ret+96(FP)
	RET

// func dot1Q4_0AVX512(w []byte, q []int8, d, s []float32) float32
TEXT ·dot1Q4_0AVX512(SB), NOSPLIT, $0-100
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	MOVQ         s_base+72(FP), BX
	X1START(qfm8<>)
	CMPQ         CX, $2
	JB           q40x1_tail

q40x1_loop:
	NIBBLES2(2, 20)
	D2(18)
	X4ROW2((SI), (DX), (BX), Z10, X0)
	X4NEXT(18)
	CMPQ         CX, $2
	JAE          q40x1_loop

q40x1_tail:
	X4ZTOY(Z10, Y10)
	TESTQ        CX, CX
	JZ           q40x1_done
	NIBBLES1(2)
	D1
	X4ROW1((SI), (DX), (BX), Y10, X0)

q40x1_done:
	X1STORE
	MOVSS        X10, ret+96(FP)
	RET

// func dot1Q4_1AVX512(w []byte, q []int8, d, s []float32) float32
TEXT ·dot1Q4_1AVX512(SB), NOSPLIT, $0-100
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	MOVQ         s_base+72(FP), BX
	X1START(qf1<>)
	CMPQ         CX, $2
	JB           q41x1_tail

q41x1_loop:
	NIBBLES2(4, 24)
	DM2(20)
	X4ROW2((SI), (DX), (BX), Z10, X0)
	X4NEXT(20)
	CMPQ         CX, $2
	JAE          q41x1_loop

q41x1_tail:
	X4ZTOY(Z10, Y10)
	TESTQ        CX, CX
	JZ           q41x1_done
	NIBBLES1(4)
	DM1
	X4ROW1((SI), (DX), (BX), Y10, X0)

q41x1_done:
	X1STORE
	MOVSS        X10, ret+96(FP)
	RET

// func dot1Q5_0AVX512(w []byte, q []int8, d, s []float32) float32
TEXT ·dot1Q5_0AVX512(SB), NOSPLIT, $0-100
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	MOVQ         s_base+72(FP), BX
	X1START(qfm16<>)
	VPBROADCASTD qc10<>(SB), Z26
	CMPQ         CX, $2
	JB           q50x1_tail

q50x1_loop:
	NIBBLES2(6, 28)
	MOVL         2(AX), R8
	MOVL         24(AX), R9
	SHLQ         $32, R9
	ORQ          R9, R8
	KMOVQ        R8, K2
	VPADDB       Z26, Z2, K2, Z2
	D2(22)
	X4ROW2((SI), (DX), (BX), Z10, X0)
	X4NEXT(22)
	CMPQ         CX, $2
	JAE          q50x1_loop

q50x1_tail:
	X4ZTOY(Z10, Y10)
	TESTQ        CX, CX
	JZ           q50x1_done
	NIBBLES1(6)
	MOVL         2(AX), R8
	KMOVD        R8, K2
	VPADDB       Y26, Y2, K2, Y2
	D1
	X4ROW1((SI), (DX), (BX), Y10, X0)

q50x1_done:
	X1STORE
	MOVSS        X10, ret+96(FP)
	RET

// func dot1Q5_1AVX512(w []byte, q []int8, d, s []float32) float32
TEXT ·dot1Q5_1AVX512(SB), NOSPLIT, $0-100
	MOVQ         w_base+0(FP), AX
	MOVQ         q_base+24(FP), SI
	MOVQ         d_base+48(FP), DX
	MOVQ         d_len+56(FP), CX
	MOVQ         s_base+72(FP), BX
	X1START(qf1<>)
	VPBROADCASTD qc10<>(SB), Z26
	CMPQ         CX, $2
	JB           q51x1_tail

q51x1_loop:
	NIBBLES2(8, 32)
	MOVL         4(AX), R8
	MOVL         28(AX), R9
	SHLQ         $32, R9
	ORQ          R9, R8
	KMOVQ        R8, K2
	VPADDB       Z26, Z2, K2, Z2
	DM2(24)
	X4ROW2((SI), (DX), (BX), Z10, X0)
	X4NEXT(24)
	CMPQ         CX, $2
	JAE          q51x1_loop

q51x1_tail:
	X4ZTOY(Z10, Y10)
	TESTQ        CX, CX
	JZ           q51x1_done
	NIBBLES1(8)
	MOVL         4(AX), R8
	KMOVD        R8, K2
	VPADDB       Y26, Y2, K2, Y2
	DM1
	X4ROW1((SI), (DX), (BX), Y10, X0)

q51x1_done:
	X1STORE
	MOVSS        X10, ret+96(FP)
	RET

//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 VNNI kernels of the packed layout (pack.go): one group of 16 weight rows against
// 4 activation rows (packed16x4: q 4 rows of 32·nb one after the other, d and s 4 rows of
// nb, nb = len(d)/4, out 4 × 16) or one (packed16x1: nb = len(d), out 16).
//
// Per block: Z20 the 16 rows' d, Z21 = d·(−o) (Z31 = −o); Z0-Z7 the 8 steps of 4 columns
// as unsigned bytes, lane r row r. Per activation row i, two VPDPBUSD chains (Z8+2i,
// Z9+2i) take the 8 steps against the row's 4 bytes of each broadcast; their sum, as floats,
// times d·dx adds to Z16+i, and Z21·s the offset's correction. Registers: AX w, SI q, DX d,
// BX s, DI out, CX blocks left; R9 = 0, R10 and R11 one and three rows of q, R12 and R13 one
// and three rows of d and s.

DATA pkm128<>+0(SB)/4, $0xc3000000
GLOBL pkm128<>(SB), RODATA|NOPTR, $4
DATA pkm16<>+0(SB)/4, $0xc1800000
GLOBL pkm16<>(SB), RODATA|NOPTR, $4
DATA pkm32<>+0(SB)/4, $0xc2000000
GLOBL pkm32<>(SB), RODATA|NOPTR, $4
DATA pkm8<>+0(SB)/4, $0xc1000000
GLOBL pkm8<>(SB), RODATA|NOPTR, $4
DATA pk0F<>+0(SB)/4, $0x0f0f0f0f
GLOBL pk0F<>(SB), RODATA|NOPTR, $4
DATA pk10<>+0(SB)/4, $0x10101010
GLOBL pk10<>(SB), RODATA|NOPTR, $4

// PKROW: activation row at q index qi, d/s index di into chains ia, ib and float acc f.
#define PKROW(qi, di, ia, ib, f) \
	VPXORD            ia, ia, ia;                \
	VPXORD            ib, ib, ib;                \
	VPDPBUSD.BCST     (SI)(qi), Z0, ia;        \
	VPDPBUSD.BCST     4(SI)(qi), Z1, ib;       \
	VPDPBUSD.BCST     8(SI)(qi), Z2, ia;       \
	VPDPBUSD.BCST     12(SI)(qi), Z3, ib;      \
	VPDPBUSD.BCST     16(SI)(qi), Z4, ia;      \
	VPDPBUSD.BCST     20(SI)(qi), Z5, ib;      \
	VPDPBUSD.BCST     24(SI)(qi), Z6, ia;      \
	VPDPBUSD.BCST     28(SI)(qi), Z7, ib;      \
	VPADDD            ib, ia, ia;                \
	VCVTDQ2PS         ia, ia;                    \
	VMULPS.BCST       (DX)(di), Z20, Z22;      \
	VFMADD231PS       Z22, ia, f;                \
	VFMADD231PS.BCST  (BX)(di), Z21, f

#define PKSTART(k) \
	MOVQ         w_base+0(FP), AX;  \
	MOVQ         q_base+24(FP), SI; \
	MOVQ         d_base+48(FP), DX; \
	MOVQ         d_len+56(FP), CX;  \
	MOVQ         s_base+72(FP), BX; \
	MOVQ         out+96(FP), DI;    \
	XORQ         R9, R9;            \
	VBROADCASTSS k(SB), Z31;        \
	VPXORD       Z16, Z16, Z16;     \
	VPXORD       Z17, Z17, Z17;     \
	VPXORD       Z18, Z18, Z18;     \
	VPXORD       Z19, Z19, Z19

#define PKSTRIDES \
	SHRQ $2, CX;            \
	MOVQ CX, R10;           \
	SHLQ $5, R10;           \
	LEAQ (R10)(R10*2), R11; \
	LEAQ (CX*4), R12;       \
	LEAQ (R12)(R12*2), R13

#define PKSCALES \
	VCVTPH2PS (AX), Z20; \
	VMULPS    Z31, Z20, Z21

#define PKQ80 \
	VMOVDQU32 32(AX), Z0;  \
	VMOVDQU32 96(AX), Z1;  \
	VMOVDQU32 160(AX), Z2; \
	VMOVDQU32 224(AX), Z3; \
	VMOVDQU32 288(AX), Z4; \
	VMOVDQU32 352(AX), Z5; \
	VMOVDQU32 416(AX), Z6; \
	VMOVDQU32 480(AX), Z7

// PKNIB: steps t and t+4 from the nibbles at off(AX).
#define PKNIB(off, lo, hi) \
	VMOVDQU32 off(AX), hi;   \
	VPANDD    Z30, hi, lo;   \
	VPSRLW    $4, hi, hi;    \
	VPANDD    Z30, hi, hi

#define PKHB(off, z) \
	KMOVQ  off(AX), K1; \
	VPADDB Z29, z, K1, z

#define PKQ50 \
	PKNIB(32, Z0, Z4);  \
	PKNIB(96, Z1, Z5);  \
	PKNIB(160, Z2, Z6); \
	PKNIB(224, Z3, Z7); \
	PKHB(288, Z0);      \
	PKHB(296, Z1);      \
	PKHB(304, Z2);      \
	PKHB(312, Z3);      \
	PKHB(320, Z4);      \
	PKHB(328, Z5);      \
	PKHB(336, Z6);      \
	PKHB(344, Z7)

#define PKROWS4 \
	PKROW(R9*1, R9*1, Z8, Z9, Z16);      \
	PKROW(R10*1, R12*1, Z10, Z11, Z17);  \
	PKROW(R10*2, R12*2, Z12, Z13, Z18); \
	PKROW(R11*1, R13*1, Z14, Z15, Z19)

#define PKNEXT(bb) \
	ADDQ $bb, AX; \
	ADDQ $32, SI; \
	ADDQ $4, DX;  \
	ADDQ $4, BX;  \
	DECQ CX

#define PKSTORE4 \
	VMOVUPS Z16, (DI);    \
	VMOVUPS Z17, 64(DI);  \
	VMOVUPS Z18, 128(DI); \
	VMOVUPS Z19, 192(DI); \
	VZEROUPPER;           \
	RET

// func packed16Q8_0x4AVX512(w []byte, q []int8, d, s []float32, out *[64]float32)
TEXT ·packed16Q8_0x4AVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm128<>)
	PKSTRIDES
	TESTQ CX, CX
	JZ    pk80x4_done

pk80x4_loop:
	PKSCALES
	PKQ80
	PKROWS4
	PKNEXT(544)
	JNZ pk80x4_loop

pk80x4_done:
	PKSTORE4

// func packed16Q8_0x1AVX512(w []byte, q []int8, d, s []float32, out *[16]float32)
TEXT ·packed16Q8_0x1AVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm128<>)
	TESTQ CX, CX
	JZ    pk80x1_done

pk80x1_loop:
	PKSCALES
	PKQ80
	PKROW(R9*1, R9*1, Z8, Z9, Z16)
	PKNEXT(544)
	JNZ pk80x1_loop

pk80x1_done:
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

// func packed16Q5_0x4AVX512(w []byte, q []int8, d, s []float32, out *[64]float32)
TEXT ·packed16Q5_0x4AVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm16<>)
	PKSTRIDES
	VPBROADCASTD pk0F<>(SB), Z30
	VPBROADCASTD pk10<>(SB), Z29
	TESTQ CX, CX
	JZ    pk50x4_done

pk50x4_loop:
	PKSCALES
	PKQ50
	PKROWS4
	PKNEXT(352)
	JNZ pk50x4_loop

pk50x4_done:
	PKSTORE4

// func packed16Q5_0x1AVX512(w []byte, q []int8, d, s []float32, out *[16]float32)
TEXT ·packed16Q5_0x1AVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm16<>)
	VPBROADCASTD pk0F<>(SB), Z30
	VPBROADCASTD pk10<>(SB), Z29
	TESTQ CX, CX
	JZ    pk50x1_done

pk50x1_loop:
	PKSCALES
	PKQ50
	PKROW(R9*1, R9*1, Z8, Z9, Z16)
	PKNEXT(352)
	JNZ pk50x1_loop

pk50x1_done:
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

// Q4_K: the blocks' a and c are float32 (Z20, Z21), the nibbles follow.
#define PKSCALESK \
	VMOVUPS (AX), Z20; \
	VMOVUPS 64(AX), Z21

#define PKQ4K \
	PKNIB(128, Z0, Z4); \
	PKNIB(192, Z1, Z5); \
	PKNIB(256, Z2, Z6); \
	PKNIB(320, Z3, Z7)

// func packed16Q4_Kx4AVX512(w []byte, q []int8, d, s []float32, out *[64]float32)
TEXT ·packed16Q4_Kx4AVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm16<>)
	PKSTRIDES
	VPBROADCASTD pk0F<>(SB), Z30
	TESTQ CX, CX
	JZ    pk4kx4_done

pk4kx4_loop:
	PKSCALESK
	PKQ4K
	PKROWS4
	PKNEXT(384)
	JNZ pk4kx4_loop

pk4kx4_done:
	PKSTORE4

// func packed16Q4_Kx1AVX512(w []byte, q []int8, d, s []float32, out *[16]float32)
TEXT ·packed16Q4_Kx1AVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm16<>)
	VPBROADCASTD pk0F<>(SB), Z30
	TESTQ CX, CX
	JZ    pk4kx1_done

pk4kx1_loop:
	PKSCALESK
	PKQ4K
	PKROW(R9*1, R9*1, Z8, Z9, Z16)
	PKNEXT(384)
	JNZ pk4kx1_loop

pk4kx1_done:
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

// Q6_K: Z20 and Z25 the a of a block's first and last 16 columns, Z21 and Z23 times −32;
// the values are bytes. The two chains take the two halves (steps 0-3 and 4-7), each with
// its scale, and s holds the activations' sums per 16 (BX advances 8 bytes a block; its
// rows are twice d's).
#define PKSCALES6 \
	VMOVUPS (AX), Z20;      \
	VMOVUPS 64(AX), Z25;    \
	VMULPS  Z31, Z20, Z21;  \
	VMULPS  Z31, Z25, Z23

#define PKQ6K \
	VMOVDQU32 128(AX), Z0; \
	VMOVDQU32 192(AX), Z1; \
	VMOVDQU32 256(AX), Z2; \
	VMOVDQU32 320(AX), Z3; \
	VMOVDQU32 384(AX), Z4; \
	VMOVDQU32 448(AX), Z5; \
	VMOVDQU32 512(AX), Z6; \
	VMOVDQU32 576(AX), Z7

#define PKROW6(qi, di, si, ia, ib, f) \
	VPXORD            ia, ia, ia;           \
	VPXORD            ib, ib, ib;           \
	VPDPBUSD.BCST     (SI)(qi), Z0, ia;     \
	VPDPBUSD.BCST     16(SI)(qi), Z4, ib;   \
	VPDPBUSD.BCST     4(SI)(qi), Z1, ia;    \
	VPDPBUSD.BCST     20(SI)(qi), Z5, ib;   \
	VPDPBUSD.BCST     8(SI)(qi), Z2, ia;    \
	VPDPBUSD.BCST     24(SI)(qi), Z6, ib;   \
	VPDPBUSD.BCST     12(SI)(qi), Z3, ia;   \
	VPDPBUSD.BCST     28(SI)(qi), Z7, ib;   \
	VCVTDQ2PS         ia, ia;               \
	VCVTDQ2PS         ib, ib;               \
	VBROADCASTSS      (DX)(di), Z22;        \
	VMULPS            Z22, Z20, Z24;        \
	VFMADD231PS       Z24, ia, f;           \
	VMULPS            Z22, Z25, Z24;        \
	VFMADD231PS       Z24, ib, f;           \
	VFMADD231PS.BCST  (BX)(si), Z21, f;     \
	VFMADD231PS.BCST  4(BX)(si), Z23, f

#define PKNEXT6 \
	ADDQ $640, AX; \
	ADDQ $32, SI;  \
	ADDQ $4, DX;   \
	ADDQ $8, BX;   \
	DECQ CX

// func packed16Q6_Kx4AVX512(w []byte, q []int8, d, s []float32, out *[64]float32)
TEXT ·packed16Q6_Kx4AVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm32<>)
	PKSTRIDES
	TESTQ CX, CX
	JZ    pk6kx4_done

pk6kx4_loop:
	PKSCALES6
	PKQ6K
	PKROW6(R9*1, R9*1, R9*1, Z8, Z9, Z16)
	PKROW6(R10*1, R12*1, R12*2, Z10, Z11, Z17)
	PKROW6(R10*2, R12*2, R12*4, Z12, Z13, Z18)
	PKROW6(R11*1, R13*1, R13*2, Z14, Z15, Z19)
	PKNEXT6
	JNZ pk6kx4_loop

pk6kx4_done:
	PKSTORE4

// func packed16Q6_Kx1AVX512(w []byte, q []int8, d, s []float32, out *[16]float32)
TEXT ·packed16Q6_Kx1AVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm32<>)
	TESTQ CX, CX
	JZ    pk6kx1_done

pk6kx1_loop:
	PKSCALES6
	PKQ6K
	PKROW6(R9*1, R9*1, R9*1, Z8, Z9, Z16)
	PKNEXT6
	JNZ pk6kx1_loop

pk6kx1_done:
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

// Q4_0: float16 d (c = −8·d) and nibbles; Q4_1: float16 d and m (c = m) and nibbles.
#define PKQ4(off) \
	PKNIB(off, Z0, Z4);      \
	PKNIB(off+64, Z1, Z5);   \
	PKNIB(off+128, Z2, Z6);  \
	PKNIB(off+192, Z3, Z7)

#define PKSCALES41 \
	VCVTPH2PS (AX), Z20; \
	VCVTPH2PS 32(AX), Z21

// func packed16Q4_0x4AVX512(w []byte, q []int8, d, s []float32, out *[64]float32)
TEXT ·packed16Q4_0x4AVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm8<>)
	PKSTRIDES
	VPBROADCASTD pk0F<>(SB), Z30
	TESTQ CX, CX
	JZ    pk40x4_done

pk40x4_loop:
	PKSCALES
	PKQ4(32)
	PKROWS4
	PKNEXT(288)
	JNZ pk40x4_loop

pk40x4_done:
	PKSTORE4

// func packed16Q4_0x1AVX512(w []byte, q []int8, d, s []float32, out *[16]float32)
TEXT ·packed16Q4_0x1AVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm8<>)
	VPBROADCASTD pk0F<>(SB), Z30
	TESTQ CX, CX
	JZ    pk40x1_done

pk40x1_loop:
	PKSCALES
	PKQ4(32)
	PKROW(R9*1, R9*1, Z8, Z9, Z16)
	PKNEXT(288)
	JNZ pk40x1_loop

pk40x1_done:
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

// func packed16Q4_1x4AVX512(w []byte, q []int8, d, s []float32, out *[64]float32)
TEXT ·packed16Q4_1x4AVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm8<>)
	PKSTRIDES
	VPBROADCASTD pk0F<>(SB), Z30
	TESTQ CX, CX
	JZ    pk41x4_done

pk41x4_loop:
	PKSCALES41
	PKQ4(64)
	PKROWS4
	PKNEXT(320)
	JNZ pk41x4_loop

pk41x4_done:
	PKSTORE4

// func packed16Q4_1x1AVX512(w []byte, q []int8, d, s []float32, out *[16]float32)
TEXT ·packed16Q4_1x1AVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm8<>)
	VPBROADCASTD pk0F<>(SB), Z30
	TESTQ CX, CX
	JZ    pk41x1_done

pk41x1_loop:
	PKSCALES41
	PKQ4(64)
	PKROW(R9*1, R9*1, Z8, Z9, Z16)
	PKNEXT(320)
	JNZ pk41x1_loop

pk41x1_done:
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

// Decode's kernels (one activation row, weights read from memory once) that prefetch the
// weights 4 KiB ahead (every line of a block's bytes, PKPFn: n lines), picked where
// gemm.DecodePrefetch says software prefetch is faster on this CPU. Otherwise the same
// instructions as the x1 kernels above.
#define PKPF5 \
	PREFETCHT0 4096(AX); \
	PREFETCHT0 4160(AX); \
	PREFETCHT0 4224(AX); \
	PREFETCHT0 4288(AX); \
	PREFETCHT0 4352(AX)

#define PKPF6 \
	PKPF5;               \
	PREFETCHT0 4416(AX)

#define PKPF9 \
	PKPF6;               \
	PREFETCHT0 4480(AX); \
	PREFETCHT0 4544(AX); \
	PREFETCHT0 4608(AX)

#define PKPF10 \
	PKPF9;               \
	PREFETCHT0 4672(AX)

// func packed16Q8_0x1PFAVX512(w []byte, q []int8, d, s []float32, out *[16]float32)
TEXT ·packed16Q8_0x1PFAVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm128<>)
	TESTQ CX, CX
	JZ    pk80x1pf_done

pk80x1pf_loop:
	PKPF9
	PKSCALES
	PKQ80
	PKROW(R9*1, R9*1, Z8, Z9, Z16)
	PKNEXT(544)
	JNZ pk80x1pf_loop

pk80x1pf_done:
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

// func packed16Q5_0x1PFAVX512(w []byte, q []int8, d, s []float32, out *[16]float32)
TEXT ·packed16Q5_0x1PFAVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm16<>)
	VPBROADCASTD pk0F<>(SB), Z30
	VPBROADCASTD pk10<>(SB), Z29
	TESTQ CX, CX
	JZ    pk50x1pf_done

pk50x1pf_loop:
	PKPF6
	PKSCALES
	PKQ50
	PKROW(R9*1, R9*1, Z8, Z9, Z16)
	PKNEXT(352)
	JNZ pk50x1pf_loop

pk50x1pf_done:
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

// func packed16Q4_Kx1PFAVX512(w []byte, q []int8, d, s []float32, out *[16]float32)
TEXT ·packed16Q4_Kx1PFAVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm16<>)
	VPBROADCASTD pk0F<>(SB), Z30
	TESTQ CX, CX
	JZ    pk4kx1pf_done

pk4kx1pf_loop:
	PKPF6
	PKSCALESK
	PKQ4K
	PKROW(R9*1, R9*1, Z8, Z9, Z16)
	PKNEXT(384)
	JNZ pk4kx1pf_loop

pk4kx1pf_done:
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

// func packed16Q6_Kx1PFAVX512(w []byte, q []int8, d, s []float32, out *[16]float32)
TEXT ·packed16Q6_Kx1PFAVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm32<>)
	TESTQ CX, CX
	JZ    pk6kx1pf_done

pk6kx1pf_loop:
	PKPF10
	PKSCALES6
	PKQ6K
	PKROW6(R9*1, R9*1, R9*1, Z8, Z9, Z16)
	PKNEXT6
	JNZ pk6kx1pf_loop

pk6kx1pf_done:
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

// func packed16Q4_0x1PFAVX512(w []byte, q []int8, d, s []float32, out *[16]float32)
TEXT ·packed16Q4_0x1PFAVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm8<>)
	VPBROADCASTD pk0F<>(SB), Z30
	TESTQ CX, CX
	JZ    pk40x1pf_done

pk40x1pf_loop:
	PKPF5
	PKSCALES
	PKQ4(32)
	PKROW(R9*1, R9*1, Z8, Z9, Z16)
	PKNEXT(288)
	JNZ pk40x1pf_loop

pk40x1pf_done:
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

// func packed16Q4_1x1PFAVX512(w []byte, q []int8, d, s []float32, out *[16]float32)
TEXT ·packed16Q4_1x1PFAVX512(SB), NOSPLIT, $0-104
	PKSTART(pkm8<>)
	VPBROADCASTD pk0F<>(SB), Z30
	TESTQ CX, CX
	JZ    pk41x1pf_done

pk41x1pf_loop:
	PKPF5
	PKSCALES41
	PKQ4(64)
	PKROW(R9*1, R9*1, Z8, Z9, Z16)
	PKNEXT(320)
	JNZ pk41x1pf_loop

pk41x1pf_done:
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

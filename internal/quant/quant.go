// Package quant holds weights in ggml's quantized block types (the GGUF layout, so a matrix
// can be a view of a mapped file) and multiplies them with f32 activations without
// dequantizing them: the activations are quantized to 8-bit blocks once per product
// (QuantizeActs32 for the 32-element types, QuantizeActsK for the K-quants) and each weight
// row is reduced against them with integer dot products, in AVX-512 (VNNI where present),
// AVX2 or Go kernels chosen at run time by CPU feature (kernels.go holds the Go ones, the
// reference the assembly is tested against). With several activation rows (decode batches,
// prefill) the multi-row kernels reduce one weight row against 4 activation rows at a time,
// unpacking each weight block once.
//
// Weight block layouts (ggml; d, m, dmin little-endian float16):
//
//	Q8_0 (34 bytes / 32):  d, qs[32] int8                  x = d·q
//	Q4_0 (18 bytes / 32):  d, qs[16]                       x = d·(q-8)
//	Q4_1 (20 bytes / 32):  d, m, qs[16]                    x = d·q + m
//	Q5_0 (22 bytes / 32):  d, qh[4], qs[16]                x = d·(q-16)
//	Q5_1 (24 bytes / 32):  d, m, qh[4], qs[16]             x = d·q + m
//	Q4_K (144 bytes / 256): d, dmin, scales[12], qs[128]
//	Q5_K (176 bytes / 256): d, dmin, scales[12], qh[32], qs[128]
//	Q6_K (210 bytes / 256): ql[128], qh[64], scales[16] int8, d
//
// In the 32-element types element j < 16 of a block is the low nibble of qs[j] and element
// j+16 its high nibble; the fifth bit of element j (Q5_0, Q5_1) is bit j of the little-endian
// uint32 qh. The K-quant layouts are described at internal/gguf's dequantK.
package quant

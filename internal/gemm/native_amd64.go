//go:build amd64 && !purego

package gemm

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate sh -c "cd asmgen && go run . -out ../kernels_amd64.s -decl ../kernels_amd64_decl.go"

// hasAVX512 and hasAVX2 report whether the CPU (and OS) support the kernels' instruction sets.
var (
	hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512DQ &&
		cpu.X86.HasBMI2
	hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasAVX
	hasF16C = hasAVX2 // the AVX2 kernels' f16 path uses VCVTPH2PS (F16C)
)

// registerNative registers the assembly implementations this CPU supports, best first.
func registerNative() {
	if hasAVX512 {
		im := &impl{name: "avx512", mr: avx512MR, nr: 32, dotMR: avx512DotMR, dotVec: 16,
			packA: packAAVX512, packAT: packATAVX512}
		for kind := range 3 {
			im.microRows[kind] = avx512Micro[kind]
			im.micro[kind] = avx512Micro[kind][avx512MR-1]
			im.dot[kind] = avx512Dot[kind]
			im.dotRows[kind] = avx512DotRows[kind]
			im.packT[kind] = packTWhole(avx512PackT[kind], elemKind(kind), 16)
		}
		cpuVendorName = vendor()
		decodePrior = cpuVendorName == "GenuineIntel"
		if cpu.X86.HasAVX512BF16 {
			im.pair = avx512PairMicro
			im.pairStream, im.pairStreamPF = avx512PairStream, avx512PairStreamPF
			im.packRow = packRowBF16AVX512
			im.packAPairs[avx512MR], im.packAPairs[tallMR] = packAPairs14AVX512, packAPairs16AVX512
			newDecodeTuners(tunePairsIdx, "bf16 pairs")
		}
		st, pf := *im, *im
		for kind := range 3 {
			st.microRows[kind] = avx512Stream[kind]
			pf.microRows[kind] = avx512StreamPF[kind]
		}
		im.streamIm, im.streamPF = &st, &pf
		// Batched decode: the tall kernels (16 columns, up to 16 rows), without and with
		// software prefetch.
		tall := *im
		tall.mr, tall.nr, tall.packA = tallMR, 16, packA16AVX512
		tallPF := tall
		for kind := range 3 {
			tall.microRows[kind], tallPF.microRows[kind] = avx512Tall[kind], avx512TallPF[kind]
			tall.micro[kind], tallPF.micro[kind] = avx512Tall[kind][tallMR-1], avx512TallPF[kind][tallMR-1]
		}
		im.tallIm, im.tallPF = &tall, &tallPF
		if im.pair != nil {
			im.pairTall, im.pairTallPF = avx512PairTall, avx512PairTallPF
		}
		newDecodeTuners(int(kindF32), "f32")
		newDecodeTuners(int(kindBF16), "bf16")
		newDecodeTuners(int(kindF16), "f16")
		if amxAvailable() {
			// The same kernels, with pair-packed (bf16) products on AMX tiles.
			amx := *im
			amx.name = "amx"
			amx.amx = true
			register(&amx)
		}
		register(im)
	}
	if hasAVX2 && hasF16C && cpu.X86.HasAVX {
		im := &impl{name: "avx2", mr: avx2MR, nr: 16, dotMR: avx2DotMR, dotVec: 8, packA: packAAVX2}
		for kind := range 3 {
			im.packT[kind] = packTWhole(avx2PackT[kind], elemKind(kind), 8)
			im.microRows[kind] = avx2Micro[kind]
			im.micro[kind] = avx2Micro[kind][avx2MR-1]
			im.dot[kind] = avx2Dot[kind]
			im.dotRows[kind] = avx2DotRows[kind]
		}
		register(im)
	}
}

// cpuVendor returns CPUID leaf 0's vendor string registers.
//
//go:noescape
func cpuVendor() (ebx, edx, ecx uint32)

// vendor is the CPU's vendor string ("GenuineIntel", "AuthenticAMD", ...).
func vendor() string {
	var b [12]byte
	ebx, edx, ecx := cpuVendor()
	binary.LittleEndian.PutUint32(b[0:], ebx)
	binary.LittleEndian.PutUint32(b[4:], edx)
	binary.LittleEndian.PutUint32(b[8:], ecx)
	return string(b[:])
}

// packTWhole wraps a transposing pack kernel (kc a multiple of vec) with a scalar tail.
func packTWhole(kern packTFn, kind elemKind, vec int) packTFn {
	return func(kc int, src unsafe.Pointer, lds int, dst *float32) {
		whole := kc / vec * vec
		if whole > 0 {
			kern(whole, src, lds, dst)
		}
		if whole == kc {
			return
		}
		d := unsafe.Slice(dst, kc*panelW)
		for j := 0; j < panelW; j++ {
			for p := whole; p < kc; p++ {
				off := uintptr(j*lds + p)
				switch kind {
				case kindF32:
					d[p*panelW+j] = *(*float32)(unsafe.Add(src, off*4))
				case kindBF16:
					d[p*panelW+j] = BF16ToFloat32(*(*uint16)(unsafe.Add(src, off*2)))
				default:
					d[p*panelW+j] = F16ToFloat32(*(*uint16)(unsafe.Add(src, off*2)))
				}
			}
		}
	}
}

// converters are the vectorised conversion kernel (n a multiple of its vector width).
type converters struct {
	vec    int
	decode [3]func(dst *float32, src *uint16, n int)
	encode [3]func(dst *uint16, src *float32, n int)
}

var nativeConverters = map[string]*converters{
	"avx512": {vec: 16,
		decode: [3]func(*float32, *uint16, int){nil, decodeBF16AVX512, decodeF16AVX512},
		encode: [3]func(*uint16, *float32, int){nil, encodeBF16AVX512, encodeF16AVX512}},
	"avx2": {vec: 8,
		decode: [3]func(*float32, *uint16, int){nil, decodeBF16AVX2, decodeF16AVX2},
		encode: [3]func(*uint16, *float32, int){nil, encodeBF16AVX2, encodeF16AVX2}},
}

// currentConverters is the current implementation's converters ("amx" is the AVX-512
// kernels with AMX tiles: the AVX-512 ones); nil for "generic".
func currentConverters() *converters {
	name := Impl()
	if name == "amx" {
		name = "avx512"
	}
	return nativeConverters[name]
}

// decodeNative widens src into dst with the current implementation's vector kernel and
// reports whether it did (the scalar tail included).
func decodeNative(kind elemKind, dst []float32, src []uint16) bool {
	cv := currentConverters()
	if cv == nil {
		return false
	}
	n := len(src) / cv.vec * cv.vec
	if n > 0 {
		cv.decode[kind](&dst[0], &src[0], n)
	}
	for i := n; i < len(src); i++ {
		if kind == kindBF16 {
			dst[i] = BF16ToFloat32(src[i])
		} else {
			dst[i] = F16ToFloat32(src[i])
		}
	}
	return true
}

// encodeNative is decodeNative's inverse (round to nearest even).
func encodeNative(kind elemKind, dst []uint16, src []float32) bool {
	cv := currentConverters()
	if cv == nil {
		return false
	}
	n := len(src) / cv.vec * cv.vec
	if n > 0 {
		cv.encode[kind](&dst[0], &src[0], n)
	}
	for i := n; i < len(src); i++ {
		if kind == kindBF16 {
			dst[i] = Float32ToBF16(src[i])
		} else {
			dst[i] = Float32ToF16(src[i])
		}
	}
	return true
}

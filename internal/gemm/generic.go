package gemm

import "unsafe"

// The pure-Go implementation: used on CPUs without the assembly kernels, with the build tag
// purego, and as the reference the assembly is tested against.

const (
	genericMR = 4
	genericNR = 16
)

var genericImpl = &impl{
	name:   "generic",
	mr:     genericMR,
	nr:     genericNR,
	micro:  [3]microFn{microGeneric[float32], microGeneric[uint16], microGenericF16},
	dotMR:  4,
	dotVec: 1,
	dot: [3][]dotFn{
		{dotGeneric[float32], dotGeneric[float32], dotGeneric[float32], dotGeneric[float32]},
		{dotGeneric[uint16], dotGeneric[uint16], dotGeneric[uint16], dotGeneric[uint16]},
		{dotGenericF16, dotGenericF16, dotGenericF16, dotGenericF16},
	},
}

// widen converts one stored B element to f32: f32 as is, uint16 as bf16.
func widen[E float32 | uint16](v E) float32 {
	switch x := any(v).(type) {
	case float32:
		return x
	case uint16:
		return BF16ToFloat32(x)
	}
	return 0
}

// microGeneric is the micro-kernel for f32 (E = float32) or bf16 (E = uint16) B. As the
// assembly ones, it sums each element of C in one chain in depth order from C's value.
func microGeneric[E float32 | uint16](kc int, a *float32, b unsafe.Pointer, ldb int, c *float32, ldc int) {
	const mr, nr = genericMR, genericNR
	A := unsafe.Slice(a, kc*mr)
	var acc [mr][nr]float32
	loadTile(&acc, c, ldc)
	for p := 0; p < kc; p++ {
		brow := unsafe.Slice((*E)(unsafe.Add(b, uintptr(p*ldb)*unsafe.Sizeof(E(0)))), nr)
		var bv [nr]float32
		for j, v := range brow {
			bv[j] = widen(v)
		}
		ap := A[p*mr : p*mr+mr]
		for i := range acc {
			ai := ap[i]
			row := &acc[i]
			for j := range row {
				row[j] += ai * bv[j]
			}
		}
	}
	storeTile(&acc, c, ldc)
}

// microGenericF16 is the micro-kernel for f16 B.
func microGenericF16(kc int, a *float32, b unsafe.Pointer, ldb int, c *float32, ldc int) {
	const mr, nr = genericMR, genericNR
	A := unsafe.Slice(a, kc*mr)
	var acc [mr][nr]float32
	loadTile(&acc, c, ldc)
	for p := 0; p < kc; p++ {
		brow := unsafe.Slice((*uint16)(unsafe.Add(b, uintptr(p*ldb)*2)), nr)
		var bv [nr]float32
		for j, v := range brow {
			bv[j] = F16ToFloat32(v)
		}
		ap := A[p*mr : p*mr+mr]
		for i := range acc {
			ai := ap[i]
			row := &acc[i]
			for j := range row {
				row[j] += ai * bv[j]
			}
		}
	}
	storeTile(&acc, c, ldc)
}

func loadTile(acc *[genericMR][genericNR]float32, c *float32, ldc int) {
	for i := range acc {
		copy(acc[i][:], unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(c), uintptr(i*ldc)*4)), genericNR))
	}
}

func storeTile(acc *[genericMR][genericNR]float32, c *float32, ldc int) {
	for i := range acc {
		copy(unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(c), uintptr(i*ldc)*4)), genericNR), acc[i][:])
	}
}

// dotGeneric is the dot kernel for f32 (E = float32) or bf16 (E = uint16) W.
func dotGeneric[E float32 | uint16](k, mx int, x *float32, ldx int, w unsafe.Pointer, ldw int, out *float32, ldo int) {
	esz := unsafe.Sizeof(E(0))
	for j := 0; j < dotNW; j++ {
		wrow := unsafe.Slice((*E)(unsafe.Add(w, uintptr(j*ldw)*esz)), k)
		for i := 0; i < mx; i++ {
			xrow := unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(x), uintptr(i*ldx)*4)), k)
			var s0, s1, s2, s3 float32
			p := 0
			for ; p+4 <= k; p += 4 {
				s0 += xrow[p] * widen(wrow[p])
				s1 += xrow[p+1] * widen(wrow[p+1])
				s2 += xrow[p+2] * widen(wrow[p+2])
				s3 += xrow[p+3] * widen(wrow[p+3])
			}
			for ; p < k; p++ {
				s0 += xrow[p] * widen(wrow[p])
			}
			*(*float32)(unsafe.Add(unsafe.Pointer(out), uintptr(i*ldo+j)*4)) = (s0 + s1) + (s2 + s3)
		}
	}
}

// dotGenericF16 is the dot kernel for f16 W.
func dotGenericF16(k, mx int, x *float32, ldx int, w unsafe.Pointer, ldw int, out *float32, ldo int) {
	var buf [256]float32
	for j := 0; j < dotNW; j++ {
		wrow := unsafe.Slice((*uint16)(unsafe.Add(w, uintptr(j*ldw)*2)), k)
		var sums [16]float32
		for p0 := 0; p0 < k; p0 += len(buf) {
			chunk := wrow[p0:min(p0+len(buf), k)]
			for q, v := range chunk {
				buf[q] = F16ToFloat32(v)
			}
			for i := 0; i < mx; i++ {
				xrow := unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(x), uintptr(i*ldx+p0)*4)), len(chunk))
				var s float32
				for q, v := range xrow {
					s += v * buf[q]
				}
				sums[i] += s
			}
		}
		for i := 0; i < mx; i++ {
			*(*float32)(unsafe.Add(unsafe.Pointer(out), uintptr(i*ldo+j)*4)) = sums[i]
		}
	}
}

//go:build !amd64 || purego

package kernels

// No AVX-512 slice kernels in this build (hasVector is false): these are never called.

func swigluVector(out, e, gate, up []float32)                        { panic(noVector) }
func swigluBackVector(dg, du, dy, gate, up, e []float32)             { panic(noVector) }
func dotVector(a, b []float32) float32                               { panic(noVector) }
func addVector(dst, src []float32)                                   { panic(noVector) }
func axpyVector(alpha float32, x, y []float32)                       { panic(noVector) }
func mulScaleVector(out, x, w []float32, s float32)                  { panic(noVector) }
func ropeVector(lo, hi, c, s []float32, sgn float32)                 { panic(noVector) }
func dot3F64Vector(a, b, c []float32) float64                        { panic(noVector) }
func rmsBackVector(dx, dy, x, w []float32, inv, k float64, acc bool) { panic(noVector) }
func adamwVector(p, g, m, v []float32, k *[7]float32)                { panic(noVector) }

const noVector = "kernels: no AVX-512 slice kernels in this build"

package kernels

// Scale multiplies every cos and sin of the table by f: rotations scaled by f (LongRoPE's
// attention factor, which multiplies both queries and keys). ApplyInverse then applies the
// transpose, f times the opposite rotation, which is still the gradient of Apply. Call it once,
// before the table is used: each value is rounded to f32 and then multiplied by f, in f32.
func (t *Table) Scale(f float32) {
	if t.Bytes() != 0 || t.scale != 1 {
		panic("kernels: Table.Scale after the table was used or scaled")
	}
	t.scale = f
}

package kernels

// Scale multiplies every cos and sin of the table by f: rotations scaled by f (LongRoPE's
// attention factor, which multiplies both queries and keys). ApplyInverse then applies the
// transpose, f times the opposite rotation, which is still the gradient of Apply.
func (t *Table) Scale(f float32) {
	for i := range t.cos {
		t.cos[i] *= f
		t.sin[i] *= f
	}
}

//go:build !unix

package safetensors

// Release does nothing where files are read into memory rather than mapped.
func (t *Tensor) Release() {}

// ReleaseRange does nothing where files are read into memory rather than mapped.
func (t *Tensor) ReleaseRange(off, n int) {}

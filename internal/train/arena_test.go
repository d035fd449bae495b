package train

import "testing"

func TestSizeClass(t *testing.T) {
	prev := 0
	for n := 1; n < 1<<20; n += 1 + n/7 {
		c := sizeClass(n)
		if c < n || float64(c) > float64(n)*1.125+1 || c < prev {
			t.Fatalf("sizeClass(%d) = %d", n, c)
		}
		prev = c
	}
}

func TestArenaReuse(t *testing.T) {
	var a arena
	x := a.get(1000)
	x[0] = 7
	m := a.mark()
	y := a.raw(1000)
	a.releaseFrom(m)
	if z := a.raw(999); &z[0] != &y[0] {
		t.Fatal("a released buffer of the same class is not reused")
	}
	a.reset()
	if z := a.get(1000); z[0] != 0 {
		t.Fatal("get returned a dirty buffer")
	}
	a.reset()
	// Unused for two passes: dropped.
	a.reset()
	a.reset()
	n := 0
	for _, l := range a.free {
		n += len(l)
	}
	if n != 0 {
		t.Fatalf("%d idle buffers kept", n)
	}
	// Ranges released out of order come back once each.
	i := a.mark()
	a.raw(10)
	a.raw(10)
	j := a.mark()
	a.raw(10)
	a.releaseRange(i, j)
	a.releaseFrom(i)
	if got := len(a.free[10]); got != 3 {
		t.Fatalf("%d buffers free, want 3", got)
	}
}

func TestArenaDrop(t *testing.T) {
	var a arena
	i := a.mark()
	x := a.raw(100)
	y := a.raw(100)
	a.drop(x)
	if z := a.raw(100); &z[0] != &x[0] {
		t.Fatal("a dropped buffer is not reused")
	}
	a.releaseRange(i, a.mark())
	if n := len(a.free[sizeClass(100)]); n != 2 {
		t.Fatalf("%d buffers free, want 2 (each once)", n)
	}
	_ = y
}

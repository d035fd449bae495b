package train

import (
	"math/bits"
	"sync"
)

// arena hands out the float32 buffers of training passes and takes them all back when a pass
// ends, so that the next pass (usually of the same shapes) reuses the memory: no allocation,
// no page faults on fresh memory and no garbage for the collector, whose heap would otherwise
// swing by the size of all activations every pass. Sizes are rounded up to classes (at most
// 1/8 larger) so sequences of nearby lengths share buffers; a buffer unused for two passes is
// dropped.
type arena struct {
	mu   sync.Mutex
	free map[int][]*arenaBuf // by class
	used []*arenaBuf
}

type arenaBuf struct {
	s    []float32
	idle int // passes since last handed out
}

// sizeClass rounds n up to a number with at most 4 significant bits.
func sizeClass(n int) int {
	if n <= 16 {
		return n
	}
	shift := bits.Len(uint(n)) - 4
	return (n + 1<<shift - 1) >> shift << shift
}

// raw returns a buffer of n floats with undefined contents.
func (a *arena) raw(n int) []float32 {
	if n == 0 {
		return nil // no buffer: drop and the releases never see an empty one
	}
	if a == nil {
		return make([]float32, n)
	}
	c := sizeClass(n)
	a.mu.Lock()
	defer a.mu.Unlock()
	var b *arenaBuf
	if l := a.free[c]; len(l) > 0 {
		b = l[len(l)-1]
		a.free[c] = l[:len(l)-1]
	} else {
		b = &arenaBuf{s: make([]float32, c)}
	}
	b.idle = 0
	a.used = append(a.used, b)
	return b.s[:n]
}

// get returns a zeroed buffer of n floats.
func (a *arena) get(n int) []float32 {
	s := a.raw(n)
	clear(s)
	return s
}

// clone returns a copy of x in a buffer of the arena.
func (a *arena) clone(x []float32) []float32 {
	s := a.raw(len(x))
	copy(s, x)
	return s
}

// mark returns a position in the buffers handed out, for releaseFrom and releaseRange.
func (a *arena) mark() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.used)
}

// releaseFrom takes back the buffers handed out since mark i.
func (a *arena) releaseFrom(i int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.put(a.used[i:])
	clear(a.used[i:])
	a.used = a.used[:i]
}

// releaseRange takes back the buffers handed out between marks i and j.
func (a *arena) releaseRange(i, j int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.put(a.used[i:j])
	clear(a.used[i:j])
}

// drop takes back the given buffers (handed out since the last reset) ahead of the others.
func (a *arena) drop(bufs ...[]float32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range bufs {
		if len(s) == 0 {
			continue
		}
		for i := len(a.used) - 1; i >= 0; i-- {
			if b := a.used[i]; b != nil && &b.s[0] == &s[0] {
				a.put(a.used[i : i+1])
				a.used[i] = nil
				break
			}
		}
	}
}

// put returns buffers to the free lists (nil entries were released already).
func (a *arena) put(bs []*arenaBuf) {
	if a.free == nil {
		a.free = map[int][]*arenaBuf{}
	}
	for _, b := range bs {
		if b != nil {
			a.free[len(b.s)] = append(a.free[len(b.s)], b)
		}
	}
}

// reset takes back every buffer handed out since the last reset; none may be used after.
func (a *arena) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.free == nil {
		a.free = map[int][]*arenaBuf{}
	}
	for c, l := range a.free {
		kept := l[:0]
		for _, b := range l {
			if b.idle++; b.idle < 2 {
				kept = append(kept, b)
			}
		}
		clear(l[len(kept):])
		a.free[c] = kept
	}
	a.put(a.used)
	clear(a.used)
	a.used = a.used[:0]
}

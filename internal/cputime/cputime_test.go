package cputime

import (
	"runtime"
	"testing"
)

// TestSecondsGrows: busy work adds CPU time (on unix; elsewhere Seconds is 0).
func TestSecondsGrows(t *testing.T) {
	s0 := Seconds()
	x := 0.0
	for i := range 50_000_000 {
		x += float64(i) * 1e-9
	}
	s1 := Seconds()
	if runtime.GOOS != "windows" && runtime.GOOS != "plan9" && s1 <= s0 {
		t.Fatalf("CPU seconds %v then %v after busy work (%v)", s0, s1, x)
	}
}

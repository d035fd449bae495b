package serving

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/honeai/hone/internal/synth"
)

// TestCloseWaitsForUsers: Close unmaps the weights only after every Acquire was released
// (a training pass still reading them would fault), and Acquire fails once Close began.
func TestCloseWaitsForUsers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(dir, synth.Tiny("llama")); err != nil {
		t.Fatal(err)
	}
	s, err := Load("tiny", dir, LoadOptions{NoEngine: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	release, err := s.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while the model was in use")
	case <-time.After(100 * time.Millisecond):
	}
	// Still mapped: reading the weights must not fault.
	sum := float32(0)
	for _, v := range s.Model.Layers[0].O.W.F32 {
		sum += v
	}
	_ = sum
	if _, err := s.Acquire(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire during Close: %v", err)
	}
	release()
	release() // twice is harmless
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the release")
	}
	s.Close() // again: no-op
}

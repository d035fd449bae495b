package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// A 96 MiB blob goes into the database and back out while the process's heap stays far
// below its size: both directions stream chunk by chunk.
func TestStreamsWithoutHoldingTheBlob(t *testing.T) {
	if testing.Short() {
		t.Skip("96 MiB through the database")
	}
	ctx := context.Background()
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		s := NewDB(d)
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		const size = 96 << 20
		peak := sampleHeapPeak(t)
		want := sha256.New()
		info, err := s.Put(ctx, io.TeeReader(io.LimitReader(rand.NewChaCha8([32]byte{1}), size), want))
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != size || info.Hash != hex.EncodeToString(want.Sum(nil)) {
			t.Fatalf("put: %+v", info)
		}
		rc, err := s.Open(ctx, info.Hash)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || n != size {
			t.Fatalf("read back %d bytes: %v", n, err)
		}
		if p := peak(); p > 32<<20 {
			t.Fatalf("heap peak %d MiB while streaming a %d MiB blob", p>>20, size>>20)
		} else {
			t.Logf("heap peak %.1f MiB for a %d MiB blob in and out", float64(p)/(1<<20), size>>20)
		}
	})
}

// sampleHeapPeak samples the heap until the returned function is called, which answers the
// largest HeapAlloc seen.
func sampleHeapPeak(t *testing.T) func() uint64 {
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var once atomic.Bool
	finish := func() uint64 {
		if once.CompareAndSwap(false, true) {
			close(stop)
			<-done
		}
		return peak.Load()
	}
	t.Cleanup(func() { finish() })
	return finish
}

package membudget

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/honeai/hone/internal/fault"
)

// TestBudget: charges beyond the budget wait for room and get it when a lease ends; past the
// wait they fail with an unavailable fault naming --request-memory; a charge larger than the
// budget passes when nothing is held; a lease's end gives back all it held; a large burst's
// memory is returned to the OS once it is over; no lease, no budget: no charge.
func TestBudget(t *testing.T) {
	b := New(100, 1, 200*time.Millisecond)
	var freed atomic.Int32
	b.free = func() { freed.Add(1) }
	ctx1, end1, _ := b.Start(context.Background())
	if err := Charge(ctx1, 80); err != nil {
		t.Fatal(err)
	}
	ctx2, end2, _ := b.Start(context.Background())
	got := make(chan error, 1)
	go func() { got <- Charge(ctx2, 30) }() // waits for room
	select {
	case err := <-got:
		t.Fatalf("a charge past the budget did not wait: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	end1()
	if err := <-got; err != nil {
		t.Fatalf("after room was given back: %v", err)
	}
	if b.Used() != 30 {
		t.Fatalf("used %d, want 30", b.Used())
	}
	ctx3, end3, _ := b.Start(context.Background())
	start := time.Now()
	err := Charge(ctx3, 80)
	if !fault.Is(err, fault.KindUnavailable) || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("past the wait: %v after %s", err, time.Since(start))
	}
	if f, _ := fault.As(err); f == nil || !strings.Contains(f.Msg, "--request-memory") {
		t.Fatalf("the fault's message: %v", err)
	}
	end3()
	end2()
	if b.Used() != 0 {
		t.Fatalf("used %d after every lease ended", b.Used())
	}
	// One charge larger than the budget passes when nothing is held.
	ctx4, end4, _ := b.Start(context.Background())
	if err := Charge(ctx4, 1000); err != nil {
		t.Fatal(err)
	}
	Reset(ctx4)
	if b.Used() != 0 {
		t.Fatal("Reset kept bytes")
	}
	end4()
	deadline := time.Now().Add(5 * time.Second)
	for freed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if freed.Load() == 0 {
		t.Fatal("the burst's memory was not returned to the OS")
	}
	// Concurrent leases never hold more than the budget together (but for one alone).
	b2 := New(1000, 1, time.Second)
	b2.free = func() {}
	var wg sync.WaitGroup
	var over atomic.Bool
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, end, _ := b2.Start(context.Background())
			defer end()
			for j := 0; j < 10; j++ {
				if err := Charge(ctx, 30); err != nil {
					return
				}
				if b2.Used() > 1000 {
					over.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if over.Load() || b2.Used() != 0 {
		t.Fatalf("held more than the budget (%v), or kept %d", over.Load(), b2.Used())
	}
	// Holders that all wait for each other: the youngest gives up at once, the others go on.
	b3 := New(100, 1, 10*time.Second)
	b3.free = func() {}
	var ctxs []context.Context
	var ends []func()
	for i := 0; i < 3; i++ {
		ctx, end, _ := b3.Start(context.Background())
		if err := Charge(ctx, 30); err != nil {
			t.Fatal(err)
		}
		ctxs, ends = append(ctxs, ctx), append(ends, end)
	}
	results := make([]error, 3)
	var wg3 sync.WaitGroup
	start = time.Now()
	for i := range ctxs {
		wg3.Add(1)
		go func() {
			defer wg3.Done()
			results[i] = Charge(ctxs[i], 30)
			ends[i]() // the request ends (done, or failed), giving back what it held
		}()
	}
	wg3.Wait()
	if results[0] != nil || results[1] != nil || !fault.Is(results[2], fault.KindUnavailable) || time.Since(start) > 5*time.Second {
		t.Fatalf("holders waiting for each other: %v after %s", results, time.Since(start))
	}
	if b3.Used() != 0 {
		t.Fatalf("kept %d", b3.Used())
	}
	if err := Charge(context.Background(), 1<<40); err != nil {
		t.Fatal("a charge without a lease")
	}
	if ctx, end, _ := (*Budget)(nil).Start(context.Background()); Charge(ctx, 1<<40) != nil {
		t.Fatal("a charge without a budget")
	} else {
		end()
	}
}

// TestSlots: a budget admits limit/perRequest leases at once; another waits for a slot, gets
// one when a lease ends, and past the wait is refused with an unavailable fault, holding
// nothing.
func TestSlots(t *testing.T) {
	b := New(100, 50, 200*time.Millisecond)
	_, end1, err1 := b.Start(context.Background())
	_, end2, err2 := b.Start(context.Background())
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, _, err := b.Start(context.Background()); !fault.Is(err, fault.KindUnavailable) {
		t.Fatalf("a third lease of two slots: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		_, end, err := b.Start(context.Background())
		if err == nil {
			end()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	end1()
	end1() // ending twice gives back one slot
	if err := <-got; err != nil {
		t.Fatalf("a lease after a slot was freed: %v", err)
	}
	end2()
	if len(b.slots) != 0 || b.Used() != 0 {
		t.Fatalf("%d slots taken, %d bytes held", len(b.slots), b.Used())
	}
	if one := New(10, 1<<30, time.Second); cap(one.slots) != 1 {
		t.Fatalf("a request larger than the budget: %d slots", cap(one.slots))
	}
}

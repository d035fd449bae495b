// Package membudget bounds the memory that requests hold at once, process-wide: the bytes a
// request decodes, loads from the store and answers on the routes that can amplify (a small
// request naming a lot of stored data: refs, table and object reads, calls queries with
// expanded refs, stored Responses input items, file reads). Each such request carries a Lease
// in its context; the code that loads or builds bytes charges them to it (Charge), and the
// lease gives them back when the request ends. Leases are admitted a few at a time (as many
// as fit at the largest bound of one request), and a charge that does not fit what the
// requests in flight hold waits briefly for room; past the wait either fails with a fault of
// kind unavailable (503, to be retried), so that a burst of requests is served a few at a
// time instead of all at once.
//
//	b := membudget.New(256<<20, 32<<20, 2*time.Second)
//	ctx, end, err := b.Start(ctx)       // per request (httpx.Heavy does it)
//	if err != nil { return err }        // no slot within the wait: a 503
//	defer end()
//	if err := membudget.Charge(ctx, len(val)); err != nil { return err }
//
// When the requests of a burst have ended, the memory they used is returned to the operating
// system (runtime/debug.FreeOSMemory, at most once every few seconds), so that the process
// goes back near its idle size instead of keeping the burst's heap.
package membudget

import (
	"context"
	"runtime/debug"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/honeai/hone/internal/fault"
)

// Budget is the most bytes the leases of requests in flight may hold together.
type Budget struct {
	limit int64
	wait  time.Duration
	// slots admits limit/perRequest leases at once (at least one), so that requests at their
	// largest fit together and wait for a slot before they hold anything, instead of
	// holding part of what they need while waiting for the rest.
	slots chan struct{}

	mu      sync.Mutex
	used    int64
	peak    int64         // the most held since the budget was last idle
	room    chan struct{} // closed (and replaced) when what is held or who waits changes
	seq     uint64        // leases started
	holders int           // leases holding bytes
	blocked map[*Lease]bool
	free    func() // returns memory to the OS (debug.FreeOSMemory)
	freeAt  int64  // a burst whose peak passed this is returned to the OS when it ends
	toFree  bool   // a return to the OS is scheduled
}

// freeDelay is how long after a burst its memory is returned to the OS (bursts closer
// together than this are returned once).
const freeDelay = time.Second

// New returns a budget of limit bytes, of which a request may hold up to perRequest (the
// largest bound of one request) before it must wait for others; a lease waits up to wait
// for a slot and a charge for room. A limit of 0 (or less) is no budget: nil, whose Start
// gives no lease.
func New(limit, perRequest int64, wait time.Duration) *Budget {
	if limit <= 0 {
		return nil
	}
	slots := 1
	if perRequest > 0 && limit/perRequest > 1 {
		slots = int(min(limit/perRequest, 1<<16))
	}
	return &Budget{limit: limit, wait: wait, slots: make(chan struct{}, slots), room: make(chan struct{}), blocked: map[*Lease]bool{},
		free: debug.FreeOSMemory, freeAt: limit / 4}
}

// Limit is the budget's size.
func (b *Budget) Limit() int64 { return b.limit }

// Used is what the leases hold now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Lease is one request's share of a budget.
type Lease struct {
	b    *Budget
	seq  uint64 // the order leases started in: the youngest gives up first
	held int64  // under b.mu
}

type ctxKey struct{}

// Start gives ctx a lease of b once one of its slots is free, waiting up to the budget's
// wait (past it, an unavailable fault); end gives back everything the lease holds, and its
// slot.
func (b *Budget) Start(ctx context.Context) (context.Context, func(), error) {
	if b == nil {
		return ctx, func() {}, nil
	}
	select {
	case b.slots <- struct{}{}:
	default:
		t := time.NewTimer(b.wait)
		select {
		case b.slots <- struct{}{}:
			t.Stop()
		case <-t.C:
			return ctx, nil, b.busy()
		case <-ctx.Done():
			t.Stop()
			return ctx, nil, ctx.Err()
		}
	}
	b.mu.Lock()
	b.seq++
	l := &Lease{b: b, seq: b.seq}
	b.mu.Unlock()
	var once sync.Once
	return context.WithValue(ctx, ctxKey{}, l), func() {
		once.Do(func() {
			l.Reset()
			<-b.slots
		})
	}, nil
}

// Charge charges n bytes to the lease of ctx (none: no charge), waiting up to the budget's
// wait for room; past it, an unavailable fault. A single charge larger than the whole budget
// is let through when nothing else is held, so that no request is refused for ever.
func Charge(ctx context.Context, n int) error {
	l, ok := ctx.Value(ctxKey{}).(*Lease)
	if !ok || n <= 0 {
		return nil
	}
	return l.Charge(ctx, int64(n))
}

// Reset gives back what the lease of ctx holds (a streamed answer, once a part is written).
func Reset(ctx context.Context) {
	if l, ok := ctx.Value(ctxKey{}).(*Lease); ok {
		l.Reset()
	}
}

// Charge charges n bytes to the lease. It waits while the bytes do not fit beside what the
// other leases hold: a lease that holds nothing yet waits up to the budget's wait; one that
// holds bytes waits as long as another holder is still making progress, and when every
// holder waits (none could finish) the youngest gives up, so that the others go on.
func (l *Lease) Charge(ctx context.Context, n int64) error {
	b := l.b
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		// Room, or this lease alone holds anything (a request larger than the budget is
		// let through on its own, never refused for ever).
		if b.used+n <= b.limit || b.used == l.held {
			if l.held == 0 {
				b.holders++
			}
			l.held += n
			b.used += n
			b.peak = max(b.peak, b.used)
			b.unblock(l)
			return nil
		}
		if l.held > 0 && !b.blocked[l] {
			b.blocked[l] = true
			b.changed()
		}
		if l.held > 0 && len(b.blocked) == b.holders && b.youngestBlocked() == l {
			b.unblock(l)
			return b.busy()
		}
		if timer == nil {
			timer = time.NewTimer(b.wait)
		}
		room := b.room
		b.mu.Unlock()
		var err error
		select {
		case <-room:
		case <-timer.C:
			err = b.busy()
		case <-ctx.Done():
			err = ctx.Err()
		}
		b.mu.Lock()
		if err != nil {
			b.unblock(l)
			return err
		}
	}
}

func (b *Budget) busy() error {
	return fault.Unavailable("The server is busy: requests in flight hold its memory budget for requests of %s (--request-memory); retry shortly", humanize.IBytes(uint64(b.limit)))
}

// changed wakes the waiters: what is held, or who waits, changed. Under b.mu.
func (b *Budget) changed() {
	close(b.room)
	b.room = make(chan struct{})
}

// unblock takes l off the blocked holders. Under b.mu.
func (b *Budget) unblock(l *Lease) {
	if b.blocked[l] {
		delete(b.blocked, l)
		b.changed()
	}
}

// youngestBlocked is the blocked holder that started last. Under b.mu.
func (b *Budget) youngestBlocked() *Lease {
	var y *Lease
	for l := range b.blocked {
		if y == nil || l.seq > y.seq {
			y = l
		}
	}
	return y
}

// Reset gives back everything the lease holds.
func (l *Lease) Reset() {
	b := l.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if l.held == 0 {
		return
	}
	b.used -= l.held
	b.holders--
	l.held = 0
	b.unblock(l)
	b.changed()
	if b.used > 0 {
		return
	}
	// The burst is over: a large one returns its memory to the OS shortly.
	if b.peak >= b.freeAt && !b.toFree {
		b.toFree = true
		time.AfterFunc(freeDelay, func() {
			b.free()
			b.mu.Lock()
			b.toFree = false
			b.mu.Unlock()
		})
	}
	b.peak = 0
}

package jobs

import (
	"context"
	"sync"
	"time"

	"github.com/honeai/hone/internal/db"
)

// clockRecheck is how often a storeClock measures its offset again.
const clockRecheck = time.Minute

// storeClock tells the time of the database server, so that leases written by one machine
// and reaped by another agree even when the machines' clocks do not: the offset between
// this machine's clock and the server's is measured (SELECT now(), halfway through the
// round trip) at first use and again every clockRecheck; between measurements the local
// clock runs on with the last offset. A failed measurement keeps the last offset. Used on
// PostgreSQL, where workers on several machines share the queue; on SQLite every worker is
// on one machine and uses its clock.
type storeClock struct {
	d     *db.DB
	local func() time.Time // this machine's clock (time.Now; skewed in tests)

	mu      sync.Mutex
	offset  time.Duration
	checked time.Time
	ok      bool
}

func (c *storeClock) now() time.Time {
	local := c.local()
	c.mu.Lock()
	stale := !c.ok || local.Sub(c.checked) > clockRecheck || local.Before(c.checked)
	c.mu.Unlock()
	if stale {
		c.measure()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return local.Add(c.offset)
}

func (c *storeClock) measure() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	t0 := c.local()
	var server time.Time
	err := c.d.QueryRow(ctx, `SELECT now()`).Scan(&server)
	t1 := c.local()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked = t1
	if err != nil {
		return // try again after clockRecheck; keep the last offset
	}
	c.offset = server.Sub(t0.Add(t1.Sub(t0) / 2))
	c.ok = true
}

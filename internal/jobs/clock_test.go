package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db/dbtest"
)

// Two workers whose clocks disagree by an hour share one queue on PostgreSQL: the one an
// hour behind claims a job under a 30 s lease, and the other does not take it for expired;
// once the lease really runs out it does.
func TestLeaseClockSkew(t *testing.T) {
	d := dbtest.Postgres(t)
	ctx := context.Background()
	behind, err := Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	ahead, err := Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	behind.now = (&storeClock{d: d, local: func() time.Time { return time.Now().Add(-time.Hour) }}).now
	var extra time.Duration // moves the second worker's clock on
	ahead.now = (&storeClock{d: d, local: func() time.Time { return time.Now().Add(time.Hour + extra) }}).now
	behind.Lease, ahead.Lease = 30*time.Second, 30*time.Second
	if _, err := behind.Enqueue(ctx, "m", "e", "sft", nil); err != nil {
		t.Fatal(err)
	}
	j, err := behind.Claim(ctx, "behind")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ahead.Claim(ctx, "ahead"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a worker an hour ahead took a job leased for 30 s: %v", err)
	}
	got, err := ahead.Get(ctx, j.ID)
	if err != nil || got.Status != Running {
		t.Fatalf("the job: %+v %v", got, err)
	}
	extra = 31 * time.Second // the lease has run out by both (corrected) clocks
	if _, err := ahead.Claim(ctx, "ahead"); err != nil {
		t.Fatalf("after the lease ran out: %v", err)
	}
}

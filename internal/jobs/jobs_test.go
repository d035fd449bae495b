package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

func TestQueue(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		q, err := Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		q.now = func() time.Time { return clock }
		a1, _ := q.Enqueue(ctx, "m1", "e", "rl", map[string]int{"n": 1})
		clock = clock.Add(time.Second)
		a2, _ := q.Enqueue(ctx, "m1", "e", "rl", map[string]int{"n": 2})
		clock = clock.Add(time.Second)
		b1, _ := q.Enqueue(ctx, "m2", "e", "sft", nil)

		// One running job per model: the second job of m1 waits; m2's job runs beside.
		j, err := q.Claim(ctx, "w1")
		if err != nil || j.ID != a1.ID || j.Status != Running {
			t.Fatalf("claim 1: %+v %v", j, err)
		}
		j, err = q.Claim(ctx, "w2")
		if err != nil || j.ID != b1.ID {
			t.Fatalf("claim 2: %+v %v", j, err)
		}
		if _, err := q.Claim(ctx, "w3"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("claim 3: %v", err)
		}
		// Events: ordered, re-listable with after.
		e1, _ := q.AddEvent(ctx, a1.ID, EventStarted, map[string]int{"num_sequences": 2})
		q.AddEvent(ctx, a1.ID, EventStep, map[string]float64{"loss": 1.5})
		q.AddEvent(ctx, a1.ID, EventStep, map[string]float64{"loss": 1.0})
		evs, more, _ := q.Events(ctx, a1.ID, "", 2)
		if len(evs) != 2 || !more || evs[0].ID != e1.ID || evs[1].Type != EventStep {
			t.Fatalf("events %+v more %v", evs, more)
		}
		evs, more, _ = q.Events(ctx, a1.ID, evs[1].ID, 10)
		if len(evs) != 1 || more || string(evs[0].Data) != `{"attempt":1,"loss":1}` {
			t.Fatalf("after: %+v", evs)
		}
		if _, _, err := q.Events(ctx, a1.ID, "nope", 10); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bad cursor: %v", err)
		}
		step := 1
		if err := q.Finish(ctx, a1.ID, "w1", Succeeded, "", &step); err != nil {
			t.Fatal(err)
		}
		if err := q.Finish(ctx, a1.ID, "w1", Succeeded, "", &step); err == nil {
			t.Fatal("finished twice")
		}
		got, _ := q.Get(ctx, a1.ID)
		if got.Status != Succeeded || got.Step == nil || *got.Step != 1 || got.FinishedAt == nil || got.StartedAt == nil {
			t.Fatalf("job %+v", got)
		}
		if err := q.Finish(ctx, b1.ID, "w2", Succeeded, "", nil); err != nil {
			t.Fatal(err)
		}
		// Now a2 can run. Its worker dies: after the lease it is claimed again; after
		// MaxAttempts it fails with a message.
		for attempt := 1; attempt <= q.MaxAttempts; attempt++ {
			j, err = q.Claim(ctx, "w-dies")
			if err != nil || j.ID != a2.ID || j.Attempts != attempt {
				t.Fatalf("attempt %d: %+v %v", attempt, j, err)
			}
			if _, err := q.Claim(ctx, "other"); !errors.Is(err, ErrNotFound) {
				t.Fatal("a job ran twice at once")
			}
			clock = clock.Add(q.Lease + time.Second)
		}
		q.Claim(ctx, "reaper")
		got, _ = q.Get(ctx, a2.ID)
		if got.Status != Failed || got.ErrorMessage == nil {
			t.Fatalf("abandoned job %+v", got)
		}
		// Cancelling a queued job.
		c, _ := q.Enqueue(ctx, "m3", "e", "rl", nil)
		got, err = q.Cancel(ctx, c.ID)
		if err != nil || got.Status != Cancelled {
			t.Fatalf("cancel %+v %v", got, err)
		}
		if evs, _, _ := q.Events(ctx, c.ID, "", 10); len(evs) != 1 || evs[0].Type != EventFailed {
			t.Fatalf("cancel events %+v", evs)
		}
	})
}

// TestWorkers: workers run jobs to completion, record the runner's events and results, stop
// a running job on cancel, and fail a job whose runner errs.
func TestWorkers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q, err := Open(ctx, dbtest.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	q.Lease = 300 * time.Millisecond
	var sameRunning atomic.Int32
	run := func(ctx context.Context, j Job, progress func(string, any)) (*int, error) {
		if j.ModelID == "same" {
			if sameRunning.Add(1) > 1 {
				t.Error("two jobs of one model at once")
			}
			defer sameRunning.Add(-1)
		}
		progress(EventStarted, map[string]int{"num_sequences": 1})
		switch j.Kind {
		case "slow":
			<-ctx.Done()
			return nil, ctx.Err()
		case "bad":
			return nil, errors.New("line 3: not JSON")
		}
		time.Sleep(20 * time.Millisecond)
		s := 7
		return &s, nil
	}
	go q.Work(ctx, 2, "test", run, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ok1, _ := q.Enqueue(ctx, "same", "e", "fast", nil)
	ok2, _ := q.Enqueue(ctx, "same", "e", "fast", nil)
	bad, _ := q.Enqueue(ctx, "x", "e", "bad", nil)
	slow, _ := q.Enqueue(ctx, "y", "e", "slow", nil)
	wait := func(id, status string) Job {
		deadline := time.Now().Add(time.Minute) // a bound for a stuck worker, not a timing assertion
		for time.Now().Before(deadline) {
			j, _ := q.Get(ctx, id)
			if j.Status == status {
				return j
			}
			time.Sleep(20 * time.Millisecond)
		}
		j, _ := q.Get(ctx, id)
		t.Fatalf("job %s is %s, want %s", id, j.Status, status)
		return j
	}
	for _, id := range []string{ok1.ID, ok2.ID} {
		if j := wait(id, Succeeded); *j.Step != 7 {
			t.Fatalf("step %v", j.Step)
		}
		evs, _, _ := q.Events(ctx, id, "", 10)
		if len(evs) != 2 || evs[0].Type != EventStarted || evs[1].Type != EventEnded {
			t.Fatalf("events %+v", evs)
		}
	}
	if j := wait(bad.ID, Failed); *j.ErrorMessage != "line 3: not JSON" {
		t.Fatalf("error %q", *j.ErrorMessage)
	}
	wait(slow.ID, Running)
	q.Cancel(ctx, slow.ID)
	wait(slow.ID, Cancelled)
}

// TestFinalStatusHasFinalEvent polls hundreds of jobs while workers run them: whenever a
// reader sees a final status, the job's events already end with the matching final event
// (the status change and its event are one transaction), and no job is claimed twice
// (PostgreSQL's READ COMMITTED let two workers claim one job before claims were serialised).
func TestFinalStatusHasFinalEvent(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		q, err := Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		var runs sync.Map // job id → times run
		run := func(ctx context.Context, j Job, progress func(string, any)) (*int, error) {
			if _, twice := runs.LoadOrStore(j.ID, true); twice {
				t.Errorf("job %s was claimed twice", j.ID)
			}
			progress(EventStarted, map[string]int{"num_sequences": 1})
			progress(EventStep, map[string]float64{"loss": 1})
			if j.Kind == "bad" {
				return nil, errors.New("bad data")
			}
			s := 1
			return &s, nil
		}
		const n = 300
		ids := make([]string, n)
		for i := range ids {
			kind := "ok"
			if i%5 == 0 {
				kind = "bad"
			}
			j, err := q.Enqueue(ctx, fmt.Sprintf("m%d", i), "e", kind, nil)
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = j.ID
		}
		go q.Work(ctx, 4, "stress", run, slog.New(slog.NewTextHandler(io.Discard, nil)))
		var wg sync.WaitGroup
		var checked atomic.Int64
		for p := 0; p < 4; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				done := make([]bool, n)
				left := n
				deadline := time.Now().Add(2 * time.Minute)
				for left > 0 && time.Now().Before(deadline) {
					for i, id := range ids {
						if done[(i+p*n/4)%n] {
							continue
						}
						i = (i + p*n/4) % n
						id = ids[i]
						j, err := q.Get(ctx, id)
						if err != nil {
							t.Error(err)
							return
						}
						var want string
						switch j.Status {
						case Succeeded:
							want = EventEnded
						case Failed:
							want = EventFailed
						default:
							continue
						}
						evs, _, err := q.Events(ctx, id, "", 100)
						if err != nil {
							t.Error(err)
							return
						}
						if len(evs) == 0 || evs[len(evs)-1].Type != want {
							t.Errorf("job %s is %s but its events are %v", id, j.Status, eventTypes(evs))
							return
						}
						checked.Add(1)
						done[i] = true
						left--
					}
				}
				if left > 0 {
					t.Errorf("poller %d: %d jobs never finished", p, left)
				}
			}(p)
		}
		wg.Wait()
		if checked.Load() != 4*n {
			t.Fatalf("checked %d final states, want %d", checked.Load(), 4*n)
		}
	})
}

func eventTypes(evs []Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// TestList: an entity's jobs newest first, filtered by model and status, paged by before;
// another entity's jobs never appear.
func TestList(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		q, err := Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i := range 5 {
			j, err := q.Enqueue(ctx, fmt.Sprintf("m%d", i%2), "e", "sft", nil)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		q.Enqueue(ctx, "m0", "other", "sft", nil)
		if _, err := q.Cancel(ctx, ids[2]); err != nil {
			t.Fatal(err)
		}
		list := func(o ListOptions) ([]string, bool) {
			js, more, err := q.List(ctx, "e", o)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, j := range js {
				out = append(out, j.ID)
			}
			return out, more
		}
		got, more := list(ListOptions{})
		if fmt.Sprint(got) != fmt.Sprint([]string{ids[4], ids[3], ids[2], ids[1], ids[0]}) || more {
			t.Fatalf("all: %v %v", got, more)
		}
		got, more = list(ListOptions{Limit: 2})
		if fmt.Sprint(got) != fmt.Sprint([]string{ids[4], ids[3]}) || !more {
			t.Fatalf("limit 2: %v %v", got, more)
		}
		got, more = list(ListOptions{Limit: 2, Before: ids[3]})
		if fmt.Sprint(got) != fmt.Sprint([]string{ids[2], ids[1]}) || !more {
			t.Fatalf("before: %v %v", got, more)
		}
		got, _ = list(ListOptions{ModelID: "m0", Status: Queued})
		if fmt.Sprint(got) != fmt.Sprint([]string{ids[4], ids[0]}) {
			t.Fatalf("m0 queued: %v", got)
		}
		got, _ = list(ListOptions{Status: Cancelled})
		if fmt.Sprint(got) != fmt.Sprint([]string{ids[2]}) {
			t.Fatalf("cancelled: %v", got)
		}
	})
}

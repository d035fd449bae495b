package jobs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// A job that runs again (its worker died, or shut down cleanly) repeats its step numbers;
// every event names the run it belongs to, so the runs can be told apart.
func TestEventsCarryTheirAttempt(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		q, err := Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		q.now = func() time.Time { return clock }
		j, _ := q.Enqueue(ctx, "m", "e", "sft", nil)
		step := func(n int) {
			if _, err := q.AddEvent(ctx, j.ID, EventStep, map[string]any{"step": n, "loss": 1.0}); err != nil {
				t.Fatal(err)
			}
		}
		// Run 1: two steps, then the worker dies (its lease expires).
		c, err := q.Claim(ctx, "w1")
		if err != nil || c.Attempt != 1 {
			t.Fatalf("claim 1: %+v %v", c, err)
		}
		q.AddEvent(ctx, j.ID, EventStarted, map[string]any{})
		step(1)
		step(2)
		clock = clock.Add(q.Lease + time.Second)
		// Run 2: one step, then a clean shutdown hands it back.
		c, err = q.Claim(ctx, "w2")
		if err != nil || c.Attempt != 2 || c.Attempts != 2 {
			t.Fatalf("claim 2: %+v %v", c, err)
		}
		step(1)
		if err := q.Release(ctx, j.ID, "w2"); err != nil {
			t.Fatal(err)
		}
		// Run 3 finishes.
		c, err = q.Claim(ctx, "w3")
		if err != nil || c.Attempt != 3 || c.Attempts != 2 {
			t.Fatalf("claim 3: %+v %v", c, err)
		}
		step(1)
		step(2)
		if err := q.Finish(ctx, j.ID, "w3", Succeeded, "", nil); err != nil {
			t.Fatal(err)
		}
		evs, _, err := q.Events(ctx, j.ID, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			var data struct {
				Attempt int `json:"attempt"`
				Step    int `json:"step"`
			}
			if err := json.Unmarshal(e.Data, &data); err != nil {
				t.Fatalf("%s: %v", e.Data, err)
			}
			got = append(got, e.Type+"@"+string(rune('0'+data.Attempt))+"/"+string(rune('0'+data.Step)))
		}
		want := []string{
			"training_started@1/0", "gradient_step@1/1", "gradient_step@1/2", "worker_lost@1/0",
			"gradient_step@2/1", "training_interrupted@2/0",
			"gradient_step@3/1", "gradient_step@3/2", "training_ended@3/0",
		}
		if len(got) != len(want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("events %v, want %v", got, want)
			}
		}
		if g, _ := q.Get(ctx, j.ID); g.Attempt != 3 {
			t.Fatalf("job attempt %d", g.Attempt)
		}
	})
}

func TestWithAttempt(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{}`, `{"attempt":2}`},
		{`{"loss":1}`, `{"attempt":2,"loss":1}`},
		{`{"attempt":5}`, `{"attempt":5}`},
		{`[1]`, `[1]`},
		{`null`, `null`},
	} {
		if got := string(withAttempt([]byte(c.in), 2)); got != c.want {
			t.Errorf("withAttempt(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	if got := string(withAttempt([]byte(`{"a":1}`), 0)); got != `{"a":1}` {
		t.Errorf("attempt 0: %s", got)
	}
}

package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// TestProgressKeepsTheJob holds the rule for runs whose worker dies (issue 33 item 5): a job
// fails only after MaxAttempts runs in a row that saved no state past the furthest saved
// before. Here every run dies (its lease expires); runs 1, 2 and 3 each save further, so the
// job is still queued after them (before, it failed after 3 runs whatever they did); runs 4,
// 5 and 6 save nothing further (run 5 saves the same step again) and the job fails after run
// 6, its events saying why at each step.
func TestProgressKeepsTheJob(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		q, err := Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		q.now = func() time.Time { return clock }
		j, _ := q.Enqueue(ctx, "m", "e", "sft", nil)
		saves := map[int]int{1: 32, 2: 64, 3: 96, 5: 96} // run: the step whose state it saves
		for run := 1; run <= 6; run++ {
			c, err := q.Claim(ctx, "w")
			if err != nil || c.ID != j.ID || c.Attempt != run {
				t.Fatalf("run %d: %+v %v", run, c, err)
			}
			if step, ok := saves[run]; ok {
				if _, err := q.AddEvent(ctx, j.ID, EventSaved, map[string]any{"step": step, "num_sequences": 256}); err != nil {
					t.Fatal(err)
				}
			}
			clock = clock.Add(q.Lease + time.Second) // the worker dies
			if run < 6 {
				continue
			}
			if _, err := q.Claim(ctx, "reaper"); err == nil {
				t.Fatal("the job ran a seventh time")
			}
		}
		got, _ := q.Get(ctx, j.ID)
		if got.Status != Failed || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "3 runs in a row that made no progress") ||
			!strings.Contains(*got.ErrorMessage, "past step 96") {
			t.Fatalf("job %+v (%v)", got, *got.ErrorMessage)
		}
		evs, _, _ := q.Events(ctx, j.ID, "", 100)
		var lost []string
		for _, e := range evs {
			if e.Type != EventWorkerLost {
				continue
			}
			var data struct {
				Attempt                 int    `json:"attempt"`
				AttemptsWithoutProgress int    `json:"attempts_without_progress"`
				MaxAttempts             int    `json:"max_attempts"`
				SavedStep               int    `json:"saved_step"`
				Message                 string `json:"message"`
			}
			if err := json.Unmarshal(e.Data, &data); err != nil {
				t.Fatal(err)
			}
			if data.MaxAttempts != 3 || !strings.Contains(data.Message, "stopped responding") {
				t.Errorf("event %s", e.Data)
			}
			lost = append(lost, fmt.Sprintf("%d/%d/%d", data.Attempt, data.AttemptsWithoutProgress, data.SavedStep))
		}
		// attempt / runs in a row without progress / furthest saved step, at each loss.
		want := "1/0/32 2/0/64 3/0/96 4/1/96 5/2/96 6/3/96"
		if strings.Join(lost, " ") != want {
			t.Fatalf("worker_lost events %v, want %s", lost, want)
		}
		if last := evs[len(evs)-1]; last.Type != EventFailed {
			t.Fatalf("last event %s", last.Type)
		}
	})
}

package jobs

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// TestNonFiniteEventData: a gradient_step whose metrics are NaN or infinite is recorded, the
// numbers written as "NaN", "Infinity" and "-Infinity", instead of being dropped.
func TestNonFiniteEventData(t *testing.T) {
	type metrics struct {
		Step     int     `json:"step"`
		Loss     float64 `json:"loss"`
		GradNorm float64 `json:"grad_norm"`
		Floor    float32 `json:"floor"`
		Skip     float64 `json:"-"`
		Opt      float64 `json:"opt,omitempty"`
		Plain    float64
	}
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		q, err := Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := q.Enqueue(ctx, "m", "e", "sft", nil)
		data := metrics{Step: 3, Loss: math.NaN(), GradNorm: math.Inf(1), Floor: float32(math.Inf(-1)), Skip: math.NaN(), Plain: 1.5}
		if _, err := q.AddEvent(ctx, j.ID, EventStep, data); err != nil {
			t.Fatal(err)
		}
		if _, err := q.AddEvent(ctx, j.ID, EventStep, map[string]any{"loss": math.NaN(), "list": []float64{1, math.Inf(-1)}}); err != nil {
			t.Fatal(err)
		}
		evs, _, err := q.Events(ctx, j.ID, "", 10)
		if err != nil || len(evs) != 2 {
			t.Fatalf("events %v %v", evs, err)
		}
		if got, want := string(evs[0].Data), `{"Plain":1.5,"floor":"-Infinity","grad_norm":"Infinity","loss":"NaN","step":3}`; got != want {
			t.Fatalf("event data %s, want %s", got, want)
		}
		if got, want := string(evs[1].Data), `{"list":[1,"-Infinity"],"loss":"NaN"}`; got != want {
			t.Fatalf("event data %s, want %s", got, want)
		}
	})
}

// TestReleaseRequeuesAtOnce: a job handed back by a worker that shuts down is queued again at
// once with a training_interrupted event, and interrupted attempts never fail it.
func TestReleaseRequeuesAtOnce(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		q, err := Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := q.Enqueue(ctx, "m", "e", "sft", nil)
		for i := 0; i < q.MaxAttempts+2; i++ {
			c, err := q.Claim(ctx, "w")
			if err != nil || c.ID != j.ID || c.Attempts != 1 {
				t.Fatalf("claim %d: %+v %v", i, c, err)
			}
			if err := q.Release(ctx, j.ID, "w"); err != nil {
				t.Fatal(err)
			}
			if g, _ := q.Get(ctx, j.ID); g.Status != Queued {
				t.Fatalf("after release: %s", g.Status)
			}
		}
		if err := q.Release(ctx, j.ID, "w"); err == nil {
			t.Fatal("released a job that is not running")
		}
		evs, _, _ := q.Events(ctx, j.ID, "", 100)
		if len(evs) != q.MaxAttempts+2 || evs[0].Type != EventInterrupted || !strings.Contains(string(evs[len(evs)-1].Data), fmt.Sprintf(`"attempt":%d`, q.MaxAttempts+2)) {
			t.Fatalf("events %+v", evs)
		}
	})
}

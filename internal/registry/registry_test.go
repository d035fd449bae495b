package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

func TestRegistry(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		dir := t.TempDir()
		r, err := New(ctx, d, dir)
		if err != nil {
			t.Fatal(err)
		}
		m, created, err := r.Create(ctx, Model{Entity: "e", Project: "p", Name: "agent", BaseModel: "demo"}, false)
		if err != nil || !created || m.ID == "" || m.RunID == "" {
			t.Fatalf("create %+v %v", m, err)
		}
		if _, _, err := r.Create(ctx, Model{Entity: "e", Project: "p", Name: "agent", BaseModel: "demo"}, false); !errors.Is(err, ErrExists) {
			t.Fatalf("duplicate: %v", err)
		}
		again, created, err := r.Create(ctx, Model{Entity: "e", Project: "p", Name: "agent", BaseModel: "demo"}, true)
		if err != nil || created || again.ID != m.ID {
			t.Fatalf("return_existing %+v %v", again, err)
		}
		if got, err := r.Resolve(ctx, "e/p/agent"); err != nil || got.ID != m.ID {
			t.Fatalf("resolve by name %+v %v", got, err)
		}
		if got, err := r.Resolve(ctx, m.ID); err != nil || got.Name != "agent" {
			t.Fatalf("resolve by id %+v %v", got, err)
		}
		for s := 1; s <= 5; s++ {
			os.MkdirAll(r.CheckpointDir(m.ID, s), 0o755)
			if _, err := r.AddCheckpoint(ctx, m.ID, s, map[string]float64{"loss": float64(10 - s)}); err != nil {
				t.Fatal(err)
			}
		}
		page, more, _ := r.Checkpoints(ctx, m.ID, "", 2, "asc")
		if len(page) != 2 || !more || page[0].Step != 1 {
			t.Fatalf("page 1 %+v", page)
		}
		page, more, _ = r.Checkpoints(ctx, m.ID, page[1].ID, 10, "asc")
		if len(page) != 3 || more || page[0].Step != 3 {
			t.Fatalf("page 2 %+v", page)
		}
		desc, _, _ := r.Checkpoints(ctx, m.ID, "", 2, "desc")
		if desc[0].Step != 5 || desc[1].Step != 4 {
			t.Fatalf("desc %+v", desc)
		}
		if err := r.MergeMetrics(ctx, m.ID, 5, map[string]float64{"val/reward": 0.5}); err != nil {
			t.Fatal(err)
		}
		if l, _ := r.Latest(ctx, m.ID); l.Step != 5 || l.Metrics["val/reward"] != 0.5 || l.Metrics["loss"] != 5 {
			t.Fatalf("latest %+v", l)
		}
		n, missing, err := r.DeleteCheckpoints(ctx, m.ID, []int{2, 9})
		if err != nil || n != 1 || len(missing) != 1 || missing[0] != 9 {
			t.Fatalf("delete %d %v %v", n, missing, err)
		}
		if _, err := os.Stat(r.CheckpointDir(m.ID, 2)); !os.IsNotExist(err) {
			t.Fatal("checkpoint files stay")
		}
		k, err := r.Delete(ctx, m.ID)
		if err != nil || k != 4 {
			t.Fatalf("delete model %d %v", k, err)
		}
		if _, err := os.Stat(filepath.Join(dir, m.ID)); !os.IsNotExist(err) {
			t.Fatal("model files stay")
		}
		if _, err := r.Get(ctx, m.ID); !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	})
}

// TestPrunePlan: the latest and the best by the metric are kept (ties to the later step),
// checkpoints without the metric are never best, and a metric nobody has is ErrNoMetric.
func TestPrunePlan(t *testing.T) {
	cs := []Checkpoint{
		{Step: 1, Metrics: map[string]float64{"val/reward": 0.5}},
		{Step: 2, Metrics: map[string]float64{"val/reward": 0.9}},
		{Step: 3, Metrics: map[string]float64{}},
		{Step: 4, Metrics: map[string]float64{"val/reward": 0.9}},
		{Step: 5, Metrics: map[string]float64{"val/reward": 0.1}},
	}
	for _, c := range []struct {
		keep          int
		kept, deleted string
	}{
		{1, "[4 5]", "[1 2 3]"},
		{2, "[2 4 5]", "[1 3]"},
		{9, "[1 2 4 5]", "[3]"},
	} {
		res, err := PrunePlan(cs, "val/reward", c.keep)
		if err != nil || fmt.Sprint(res.Kept) != c.kept || fmt.Sprint(res.Deleted) != c.deleted {
			t.Errorf("keep %d: %+v %v", c.keep, res, err)
		}
	}
	if _, err := PrunePlan(cs, "val/other", 1); !errors.Is(err, ErrNoMetric) {
		t.Errorf("missing metric: %v", err)
	}
	if res, err := PrunePlan(cs[:1], "val/other", 1); err != nil || fmt.Sprint(res.Kept) != "[1]" {
		t.Errorf("one checkpoint: %+v %v", res, err)
	}
}

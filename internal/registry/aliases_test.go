package registry

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// TestAliases: an alias moves with its event in one transaction, only onto checkpoints that
// exist; a move that expects another step fails; the checkpoints aliases point at are kept
// from deletion and pruning; a model's deletion takes its aliases; concurrent moves and
// deletions never leave an alias on a missing checkpoint (both stores).
func TestAliases(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		r, err := New(ctx, d, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := r.Create(ctx, Model{Entity: "e", Project: "p", Name: "agent", BaseModel: "demo"}, false)
		if err != nil {
			t.Fatal(err)
		}
		for s := 1; s <= 3; s++ {
			if _, err := r.AddCheckpoint(ctx, m.ID, s, map[string]float64{"val/reward": float64(s)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.MoveAlias(ctx, m.ID, "prod", 9, AliasEvent{Kind: AliasSet, Actor: "a"}, nil); !errors.Is(err, ErrNoStep) {
			t.Fatalf("onto a missing step: %v", err)
		}
		a, err := r.MoveAlias(ctx, m.ID, "prod", 1, AliasEvent{Kind: AliasSet, Actor: "key 1", Reason: "first"}, nil)
		if err != nil || a.Step != 1 || a.UpdatedBy != "key 1" || a.Reason != "first" {
			t.Fatalf("create %+v %v", a, err)
		}
		wrong := 2
		if _, err := r.MoveAlias(ctx, m.ID, "prod", 3, AliasEvent{Kind: AliasPromoted, Actor: "job"}, &wrong); !errors.Is(err, ErrAliasMoved) {
			t.Fatalf("a move expecting step 2: %v", err)
		}
		right := 1
		if a, err = r.MoveAlias(ctx, m.ID, "prod", 3, AliasEvent{Kind: AliasPromoted, Actor: "job"}, &right); err != nil || a.Step != 3 {
			t.Fatalf("a move expecting step 1: %+v %v", a, err)
		}
		if _, err := r.MoveAlias(ctx, m.ID, "base", 0, AliasEvent{Kind: AliasSet, Actor: "a"}, nil); err != nil {
			t.Fatalf("step 0: %v", err)
		}
		if st, err := r.AliasStep(ctx, m.ID, "prod"); err != nil || st != 3 {
			t.Fatalf("AliasStep %d %v", st, err)
		}
		if _, err := r.AliasStep(ctx, m.ID, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown alias: %v", err)
		}
		evs, _, err := r.AliasEvents(ctx, m.ID, "prod", "", 10)
		if err != nil || len(evs) != 2 || evs[0].Kind != AliasPromoted || *evs[0].From != 1 || *evs[0].To != 3 || evs[1].From != nil {
			t.Fatalf("events %+v %v", evs, err)
		}
		var ae *AliasedError
		if _, _, err := r.DeleteCheckpoints(ctx, m.ID, []int{2, 3}); !errors.As(err, &ae) || ae.Step != 3 || ae.Aliases[0] != "prod" {
			t.Fatalf("deleting an aliased step: %v", err)
		}
		if _, err := r.Step(ctx, m.ID, 2); err != nil {
			t.Fatalf("the refused deletion deleted step 2: %v", err)
		}
		// Pruning keeps the best (3, also aliased), the latest (3) and the aliased ones.
		if _, err := r.MoveAlias(ctx, m.ID, "old", 1, AliasEvent{Kind: AliasSet, Actor: "a"}, nil); err != nil {
			t.Fatal(err)
		}
		res, err := r.Prune(ctx, m.ID, "val/reward", 1)
		if err != nil || len(res.Deleted) != 1 || res.Deleted[0] != 2 || len(res.Kept) != 2 {
			t.Fatalf("prune %+v %v", res, err)
		}
		// Moves and deletions at once: no alias is ever left on a missing checkpoint.
		for s := 4; s <= 13; s++ {
			if _, err := r.AddCheckpoint(ctx, m.ID, s, nil); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for s := 4; s <= 13; s++ {
			wg.Add(2)
			go func(s int) {
				defer wg.Done()
				r.MoveAlias(ctx, m.ID, "race", s, AliasEvent{Kind: AliasSet, Actor: "a"}, nil)
			}(s)
			go func(s int) {
				defer wg.Done()
				r.DeleteCheckpoints(ctx, m.ID, []int{s})
			}(s)
		}
		wg.Wait()
		if st, err := r.AliasStep(ctx, m.ID, "race"); err == nil {
			if _, err := r.Step(ctx, m.ID, st); err != nil {
				t.Fatalf("alias race points at step %d, which is gone", st)
			}
		}
		if err := r.DeleteAlias(ctx, m.ID, "old", AliasEvent{Actor: "a", Reason: "retired"}); err != nil {
			t.Fatal(err)
		}
		if evs, _, _ := r.AliasEvents(ctx, m.ID, "old", "", 10); len(evs) != 2 || evs[0].Kind != AliasDeleted {
			t.Fatalf("deleted alias's history %+v", evs)
		}
		if _, err := r.Delete(ctx, m.ID); err != nil {
			t.Fatal(err)
		}
		if as, _ := r.Aliases(ctx, m.ID); len(as) != 0 {
			t.Fatalf("the model's deletion left %v", as)
		}
		if evs, _, _ := r.AliasEvents(ctx, m.ID, "", "", 10); len(evs) != 0 {
			t.Fatalf("the model's deletion left events %v", evs)
		}
		for name, ok := range map[string]bool{"prod": true, "v1.2-rc_3": true, "latest": false, "step3": false, "Prod": false, "": false, "-x": false} {
			if ValidAliasName(name) != ok {
				t.Errorf("ValidAliasName(%q) = %v", name, !ok)
			}
		}
	})
}

package quota

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/fault"
)

// TestQuota: charges count per entity, a charge past the limit is a forbidden fault naming
// --entity-quota and rolls back with its transaction, concurrent charges never pass the
// limit together, Check refuses before writing, Set replaces the ledger, and a nil Quota
// counts and refuses nothing. Both stores.
func TestQuota(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		q, err := Open(ctx, d, 100)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Charge(ctx, "a", 60, "body"); err != nil {
			t.Fatal(err)
		}
		if err := q.Check(ctx, "a", 41, "body"); !fault.Is(err, fault.KindForbidden) || !strings.Contains(err.Error(), "--entity-quota") {
			t.Fatalf("check past the quota: %v", err)
		}
		if f, _ := fault.As(q.Check(ctx, "a", 41, "file")); f == nil || f.Field != "file" {
			t.Fatalf("the fault's field: %+v", f)
		}
		if err := q.Check(ctx, "a", 40, "body"); err != nil {
			t.Fatalf("check within: %v", err)
		}
		// A refused charge rolls back with the record it came with.
		err = d.WriteTx(ctx, func(tx *db.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO entity_storage (entity, bytes) VALUES ('marker', 1)`); err != nil {
				return err
			}
			return q.ChargeTx(ctx, tx, "a", 41, "body")
		})
		if !fault.Is(err, fault.KindForbidden) {
			t.Fatalf("charge past the quota: %v", err)
		}
		if n, _ := q.Usage(ctx, "a"); n != 60 {
			t.Fatalf("usage after a refused charge: %d", n)
		}
		if n, _ := q.Usage(ctx, "marker"); n != 0 {
			t.Fatal("the refused transaction was kept")
		}
		// Ten charges of 10 at once: exactly four fit (60 + 40).
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := q.Charge(ctx, "a", 10, "body")
				if err != nil && !fault.Is(err, fault.KindForbidden) {
					t.Error(err)
				}
				mu.Lock()
				ok += map[bool]int{true: 1}[err == nil]
				mu.Unlock()
			}()
		}
		wg.Wait()
		if n, _ := q.Usage(ctx, "a"); ok != 4 || n != 100 {
			t.Fatalf("%d concurrent charges fit, usage %d; want 4, 100", ok, n)
		}
		if used, left, err := q.Room(ctx, "b"); used != 0 || left != 100 || err != nil {
			t.Fatalf("room of a new entity: %d %d %v", used, left, err)
		}
		if err := Set(ctx, d, map[string]int64{"b": 7}); err != nil {
			t.Fatal(err)
		}
		all, err := All(ctx, d)
		if err != nil || len(all) != 1 || all["b"] != 7 {
			t.Fatalf("after Set: %v %v", all, err)
		}
		var none *Quota
		if err := errors.Join(none.Check(ctx, "a", 1<<60, "body"), none.Charge(ctx, "a", 1, "body")); err != nil {
			t.Fatalf("nil quota: %v", err)
		}
		if _, left, _ := none.Room(ctx, "a"); left != -1 {
			t.Fatalf("nil quota's room: %d", left)
		}
		unlimited, _ := Open(ctx, d, 0)
		if err := unlimited.Charge(ctx, "c", 1<<40, "body"); err != nil {
			t.Fatal(err)
		}
		if n, _ := unlimited.Usage(ctx, "c"); n != 1<<40 {
			t.Fatalf("counted without a limit: %d", n)
		}
	})
}
